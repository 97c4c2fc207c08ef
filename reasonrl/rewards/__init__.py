"""Rewards: verifiers, routing by data_source, batch scoring.

Layout: `verifiers/` (one module per domain; each registers its verifiers in `VERIFIERS`), `sandbox/`
(running model code: the local bubblewrap sandbox and harness, and the SandboxFusion client),
`extract.py` (answer extraction and the one think-block policy), `ground_truth.py` (the one decoder of
row fields), `routing.py` (data_source -> verifier), `runner.py` (batch scoring with time limits).

Importing this package registers the built-in verifiers in `VERIFIERS` (domain modules import their
heavy libraries lazily, inside the functions that need them).

Owns: that registration and `score(response, problem)`, one in-process call without a time limit.
Does not own: verifier logic (the domain modules) or batch scoring with time limits (`rewards.runner`).
"""

from reasonrl.rewards.base import VERIFIERS, RewardResult, VerifierFn
from reasonrl.rewards.routing import check_routable, verifier_name
from reasonrl.rewards.verifiers import (
    choice,  # noqa: F401  (registers choice)
    code,  # noqa: F401  (registers code)
    cruxeval,  # noqa: F401  (registers cruxeval)
    environment,  # noqa: F401  (registers environment: a TRL environment's reward, given by the rollout)
    format,  # noqa: F401  (registers format_think_answer, overlong)
    gym,  # noqa: F401  (registers reasoning_gym)
    ifbench,  # noqa: F401  (registers ifbench; its checkers join ifeval's)
    ifbench_format,  # noqa: F401  (IFBench's OOD layout / task / copy checkers join ifeval's)
    ifbench_text,  # noqa: F401  (IFBench's OOD count / word / sentence checkers join ifeval's)
    ifeval,  # noqa: F401  (registers ifeval)
    judge,  # noqa: F401  (registers judge)
    livebench,  # noqa: F401  (registers livebench)
    logic,  # noqa: F401  (registers zebra, ordering, graph, arc, codeio)
    math,  # noqa: F401  (registers math, gsm8k)
    openrlhf_reward,  # noqa: F401  (registers openrlhf_function, openrlhf_remote: OpenRLHF's remote rewards)
    procedural,  # noqa: F401  (registers arithmetic, countdown)
    qa,  # noqa: F401  (registers qa_em)
    reward_model,  # noqa: F401  (registers reward_model: a scalar reward model as a reward term)
    table,  # noqa: F401  (registers table)
    trl_function,  # noqa: F401  (registers trl_function: TRL's reward functions, as they are)
    unverified,  # noqa: F401  (registers none: a row with no checkable answer, SFT only)
    verl_function,  # noqa: F401  (registers verl_function: a verl reward function file, as it is)
)


def score(response: str, problem) -> RewardResult:
    """Score one response in-process with the verifier routed from `problem` (no time limit)."""
    return VERIFIERS.get(verifier_name(problem))(response, problem)


__all__ = ["VERIFIERS", "RewardResult", "VerifierFn", "check_routable", "score", "verifier_name"]
