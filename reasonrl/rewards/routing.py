"""Routing a problem to a verifier name: explicit override first, then `data_source` prefix.

Owns: the prefix table (Reasoning360's `default_compute_score` prefixes plus verl's and ours) and
`verifier_name(problem)`. An unknown data_source raises at dataset load time (`check_routable`),
not at reward time. Does not own: the verifiers themselves (`VERIFIERS`) or calling them.
"""

from __future__ import annotations

from reasonrl.errors import InputError
from reasonrl.types import Problem

# (prefix, verifier name); first match wins, so longer / more specific prefixes come first.
# Reasoning360 names: math__*, codegen__*, simulation__*, logic__*, table__*, stem__*, stem_web*,
# reasoning_gym, ood__ifeval; verl names: openai/gsm8k, lighteval/MATH, math_dapo, aime*, numina_*,
# codecontests / apps / codeforces / taco (stdin/stdout or call-based tests: "code"; verl scores
# them with partial credit, set reward.options.code.score_mode=fraction for that), hiyouga/geometry3k
# (verl adds a 0.1 format bonus; here format is a separate reward term), searchR1_*.
PREFIXES: list[tuple[str, str]] = [
    ("reasonrl/arithmetic", "arithmetic"),
    ("reasonrl/countdown", "countdown"),
    # math (verl + Reasoning360); "math" also covers math_dapo and math__*
    ("openai/gsm8k", "gsm8k"),
    ("lighteval/MATH", "math"),
    ("DigitalLearningGmbH/MATH-lighteval", "math"),
    ("HuggingFaceH4/MATH-500", "math"),
    ("hiyouga/geometry3k", "math"),
    ("math", "math"),
    ("aime", "math"),
    ("numina_", "math"),
    ("deepmath", "math"),  # Reasoning360's later router: DeepMath-103K rows
    ("DeepMath", "math"),
    ("zwhe99/DeepMath-103K", "math"),
    ("MATH-TTT", "math"),  # TTRL's test-time sets (its reward manager's own routing)
    ("AIME-TTT", "math"),
    ("AMC-TTT", "math"),
    # code: executed in the sandbox (rewards.verifiers.code, rewards.verifiers.cruxeval); codeio needs no execution
    ("codegen", "code"),
    ("codecontests", "code"),
    ("apps", "code"),
    ("codeforces", "code"),
    ("taco", "code"),
    ("simulation__codeio", "codeio"),
    ("simulation__cruxeval", "cruxeval"),
    # logic
    ("simulation__arcagi", "arc"),
    ("simulation__barc", "arc"),
    ("logic__arcagi", "arc"),
    ("logic__zebra_puzzle", "zebra"),
    ("logic__ordering_puzzle", "ordering"),
    ("logic__graph", "graph"),
    # tables / finance
    ("table", "table"),
    # STEM: multiple choice, and free-form answers graded by an LLM judge (rewards.verifiers.judge)
    ("stem__gpqa", "choice"),
    ("stem__supergpqa", "choice"),
    ("stem__mmlu", "choice"),  # MMLU-Pro (data.prepare.mmlu_pro)
    ("GPQA-TTT", "choice"),  # TTRL's GPQA-diamond: the options in the prompt, the letter as its answer
    ("stem_web", "judge"),
    ("textbook_reasoning", "judge"),  # Reasoning360's later router: free-form STEM (MegaScience), LLM judge
    # other domains
    ("reasoning_gym", "reasoning_gym"),
    ("ood__ifeval", "ifeval"),
    ("ood__livebench", "livebench"),
    ("ood__ifbench", "ifbench"),
    ("searchR1_", "qa_em"),
]

# extra_info.reward_metric (Reasoning360 math rows) selects the scoring variant: (data_source prefix,
# metric) -> verifier. prime_math is PRIME's sympy equivalence; our "math" verifier (math-verify with
# a fast exact path) plays that role. math_llm_judge asks the LLM judge (rewards.verifiers.judge).
REWARD_METRICS: dict[tuple[str, str], str] = {
    ("math", "default"): "math",
    ("math", "prime_math"): "math",
    ("math", "math_dapo"): "math",  # DAPO's answer check; math-verify covers it (Reasoning360's later router)
    ("math", "math_llm_judge"): "judge",
}


def verifier_name(problem: Problem) -> str:
    """Name of the verifier that scores `problem`; raises ValueError naming the data_source if none."""
    if problem.verifier:
        return problem.verifier
    for prefix, name in PREFIXES:
        if problem.data_source.startswith(prefix):
            metric = problem.extra_info.get("reward_metric")
            if metric is None or metric == "":
                return name
            for (metric_prefix, metric_name), routed in REWARD_METRICS.items():
                if problem.data_source.startswith(metric_prefix) and metric == metric_name:
                    return routed
            known = sorted({m for p, m in REWARD_METRICS if problem.data_source.startswith(p)})
            raise ValueError(
                f"extra_info.reward_metric {metric!r} is not known for data_source "
                f"{problem.data_source!r}; known: {', '.join(known) or 'none'}"
            )
    known = ", ".join(p for p, _ in PREFIXES)
    raise ValueError(
        f"no verifier for data_source {problem.data_source!r} (uid {problem.uid!r}); "
        f"known prefixes: {known}; or set extra_info.verifier"
    )


def with_verifier(problems: list[Problem], name: str | None) -> list[Problem]:
    """`problems` routed to verifier `name` (`reward.verifier`) unless a row names its own
    (`extra_info.verifier`); the same list when `name` is empty."""
    if not name:
        return problems
    from dataclasses import replace

    return [p if p.verifier else replace(p, verifier=name) for p in problems]


def check_route(problem: Problem, options: dict | None = None, checked: set[str] | None = None,
                label: bool = True) -> None:  # fmt: skip
    """InputError (the reason alone; callers add where) if `problem` routes to no registered verifier,
    or its verifier cannot work with `options` (per-verifier keyword options, as in `reward.options`).
    `checked`: verifier names whose options were already checked (each is checked once). `label` False:
    the row's ground truth is not checked (it has none; `reward.pseudo_label` votes one)."""
    from reasonrl.rewards import VERIFIERS  # registers all built-in verifiers
    from reasonrl.rewards.base import check_setup

    options = options or {}
    checked = set() if checked is None else checked
    try:
        name = verifier_name(problem)
        VERIFIERS.get(name)
        if name not in checked:
            check_setup(name, options.get(name))
            checked.add(name)
        if label:
            check_setup(name, options.get(name), problem)
    except (ValueError, KeyError) as e:
        raise InputError(str(e)) from None


def check_routable(problems: list[Problem], where: str = "dataset", options: dict | None = None,
                   unverified: bool = False, vote: bool = False) -> None:  # fmt: skip
    """Fail fast (at load time) if any problem cannot be routed (`check_route`), naming its row.
    `unverified`: rows routed to verifier "none" (no checkable answer; `verifiers.unverified`) pass, for a
    caller that trains on the rows' responses alone (SFT); elsewhere they are refused like any other.
    `vote` (`reward.pseudo_label`): every row's verifier must give an answer to vote on, and rows without a
    label of their own (ground truth "") pass."""
    from reasonrl.rewards.pseudo_label import check_voting, unlabelled
    from reasonrl.rewards.verifiers.unverified import NONE

    checked: set[str] = set()
    for i, p in enumerate(problems):
        if unverified and p.verifier == NONE:
            continue
        try:
            if vote:
                check_voting(p)
            check_route(p, options, checked, label=not (vote and unlabelled(p)))
        except ValueError as e:  # (check_voting's; an InputError is one too)
            raise InputError(f"{where} row {i}: {e}") from None
