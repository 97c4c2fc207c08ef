"""TRL reward functions, as they are: the verifier `trl_function` calls the Python functions a TRL user
gives `GRPOTrainer(reward_funcs=[...])` or `trl grpo --reward_funcs` (a function
`fn(prompts, completions, completion_ids, **kwargs) -> list[float | None]`), and sums them with their
weights (`reward_weights`) as TRL does.

Options (`reward.options.trl_function`):
- `functions`: what `trl grpo --reward_funcs` takes, one entry each: an import path `my_rewards.format_reward`
  (imported with the working directory on `sys.path`, as TRL imports it), a file `path/to/rewards.py:name`,
  or one of TRL's built-in names (`accuracy_reward`, `reasoning_accuracy_reward`, `think_format_reward`,
  `get_soft_overlong_punishment` with TRL's script's 1280 / 256 tokens; these need `pip install trl`);
- `weights`: one per function (TRL's `reward_weights`; default 1 each);
- `correctness`: the function whose score is the sample's correctness (what `reward/accuracy`, pass@k and
  the curriculum count: its score clipped to [0, 1]); without one, the weighted sum clipped to [0, 1];
- `format`: `conversational` (default: reasonrl's prompts are chat messages, so TRL hands a function the
  prompt's messages and each completion as `[{"role": "assistant", "content": text}]`) or `standard` (the
  prompt's text and the completion's text);
- `tokenizer`: a tokenizer (the policy's path) for `completion_ids`, the completion's token ids; a function
  that requires them is refused at load without one;
- `label_key`: the keyword the row's ground truth is given as (default `solution`, the column TRL's
  `accuracy_reward` and open-r1's functions read), besides `ground_truth`.

How it is called, per completion (each call one row, in the verifier workers under `reward.timeout_s`,
like every verifier): `fn(prompts=[prompt], completions=[completion], completion_ids=[ids],
trainer_state=..., log_metric=..., log_extra=..., **columns)`, the columns being the row's `extra_info`
(a converter's other columns), `data_source`, `ground_truth`, and the ground truth as `label_key` (over the
row's own key of that name: the built-in tasks keep a worked solution in `solution`), each as a one-element list,
as TRL passes a dataset's columns. A coroutine function is run to its end. What comes back is read as TRL
reads it: one number per completion, `None` meaning "does not apply to this row" (left out of the sum,
TRL's nansum; a row no function applies to scores 0, reason `no_function_applies`). A function that
returns anything else (text, NaN, a list of another length) or raises makes the call a verifier error
(scores 0, counted in `verifier/error_rate`). `log_metric(name, value)` values come back as
`reward/function_log/<name>` (the step's mean); `log_extra(column, values)` values are kept in the
result (rollouts.jsonl). `trainer_state` has TRL's `global_step` (the steps done before this one's rollouts)
and `max_steps` (`train.steps`), counted in reasonrl's steps (each of which may hold several optimizer
updates; their ratio, the run's progress, is TRL's); None outside training (`reasonrl eval`).

A function naming an `environments` parameter (TRL's, beside `environment_factory`) is called where the
rollout's own environment instance lives, with `environments=[instance]`, once the rollout ends
(`call_with_environment`, from `rollout.environments`); its value comes with the row (`ENVIRONMENT_VALUES` in
`extra_info`, `rollout.environments.scored_problem`), and a row without it (no environment's rollout) is a
verifier error.

Each function's raw score is in info["functions"] (rollouts.jsonl) and logged as
`reward/function/<name>/{mean, std}` (TRL's `rewards/<name>/mean`).

Owns: loading the functions (`load`), calling them (`call`), reading their values, the load-time checks.
Does not own: routing (`rewards.routing`), time limits (`rewards.runner`), loading a file or an import
path (`user_code.load_callable`).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
from types import SimpleNamespace
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem
from reasonrl.user_code import awaited, load_callable

FORMATS = ("conversational", "standard")
# `trl grpo`'s own names (trl/scripts/grpo.py): the functions of trl.rewards, the overlong one as its script
# builds it
BUILT_IN = (
    "accuracy_reward",
    "reasoning_accuracy_reward",
    "think_format_reward",
    "get_soft_overlong_punishment",
)
# where a row scored against a rollout of an environment holds what its functions taking `environments=`
# gave (`rollout.environments.scored_problem`); not a column the functions get
ENVIRONMENT_VALUES = "_environment_functions"


TERM = "trl_function"  # its name in reward.weights (`reasonrl convert trl` puts the functions there)


def function_weights(options: dict | None) -> dict[str, float]:
    """{name: weight} of the functions of `reward.options.trl_function` (`options`) where there are several (the
    terms GDPO normalises one by one, `trainer.batching.term_scores`), else {}."""
    specs = [str(s) for s in (options or {}).get("functions") or ()]
    ws = [float(w) for w in (options or {}).get("weights") or [1.0] * len(specs)]
    return {label(s): w for s, w in zip(specs, ws)} if len(specs) > 1 else {}


def label(spec: str) -> str:
    """The name a function is logged under: the last part of its spec."""
    return spec.replace(":", ".").rsplit(".", 1)[-1]


def load(spec: str):
    """The function `spec` names (module docstring); ValueError naming the spec and what is wrong."""
    if spec in BUILT_IN:
        try:
            rewards = importlib.import_module("trl.rewards")
            if spec == "get_soft_overlong_punishment":
                return rewards.get_soft_overlong_punishment(max_completion_len=1280, soft_punish_cache=256)
            return getattr(rewards, spec)
        except ImportError as e:
            raise ValueError(f"{spec!r} is TRL's own reward function: pip install trl ({e})") from None
    if ":" not in spec and "." not in spec:
        raise ValueError(f"{spec!r} is neither an import path (module.function), a file (path.py:function) "
                         f"nor one of TRL's names ({', '.join(BUILT_IN)})")  # fmt: skip
    return load_callable(spec)


def columns(problem: Problem, label_key: str = "solution") -> dict[str, Any]:
    """The row's columns as TRL hands them to a reward function (each the row's one value)."""
    out = {str(k): v for k, v in problem.extra_info.items() if k != ENVIRONMENT_VALUES}
    out.setdefault("data_source", problem.data_source)
    out.setdefault("ground_truth", problem.ground_truth)
    if label_key:  # over a row's own key of that name (reasonrl's tasks keep a worked solution there)
        out[label_key] = problem.ground_truth
    return out


def _value(got: Any, spec: str) -> float | None:
    if hasattr(got, "tolist"):  # a tensor / array
        got = got.tolist()
    if not isinstance(got, (list, tuple)):
        raise ValueError(f"{spec} returned {type(got).__name__} {str(got)[:60]!r}, not a list of rewards")
    if len(got) != 1:
        raise ValueError(f"{spec} returned {len(got)} rewards for one completion")
    value = got[0]
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{spec} returned {value!r}, not a finite number or None")
    return float(value)


def _arguments(spec: str, response: str, problem: Problem, fmt: str, tokenizer: str, label_key: str,
               trainer_state: dict | None, environment=None) -> tuple[Any, dict, dict[str, list], dict[str, Any]]:  # fmt: skip
    """(the function, its keyword arguments, where its log_metric values go, where its log_extra values go)."""
    from reasonrl.data.prompts import plain_text

    fn = load(spec)
    if fmt == "conversational":
        prompt: Any = [dict(m) for m in problem.prompt]
        completion: Any = [{"role": "assistant", "content": response}]
    else:
        prompt, completion = plain_text(problem), response
    metrics: dict[str, list] = {}
    extra: dict[str, Any] = {}
    kwargs = {k: [v] for k, v in columns(problem, label_key).items()}
    kwargs.update(
        prompts=[prompt],
        completions=[completion],
        trainer_state=SimpleNamespace(**trainer_state) if trainer_state else None,
        log_metric=lambda name, value: metrics.setdefault(str(name), []).append(float(value)),
        log_extra=lambda column, values: extra.__setitem__(str(column), list(values)[0]),
    )
    if environment is not None:  # the rollout's own environment instance (`rollout.environments`)
        kwargs["environments"] = [environment]
    if tokenizer:
        from reasonrl.rewards.verifiers.openrlhf_reward import policy_tokenizer

        kwargs["completion_ids"] = [
            policy_tokenizer(tokenizer)(response, add_special_tokens=False)["input_ids"]
        ]
    return fn, kwargs, metrics, extra


def call(spec: str, response: str, problem: Problem, fmt: str = "conversational", tokenizer: str = "",
         label_key: str = "solution", trainer_state: dict | None = None,
         ) -> tuple[float | None, dict[str, list], dict[str, Any]]:  # fmt: skip
    """(the function's reward for `response` or None, what it logged with log_metric, with log_extra)."""
    fn, kwargs, metrics, extra = _arguments(spec, response, problem, fmt, tokenizer, label_key, trainer_state)
    return _value(awaited(fn(**kwargs)), spec), metrics, extra  # (an async function: run to its end)


async def call_with_environment(environment, spec: str, response: str, problem: Problem, fmt: str = "conversational",
                                tokenizer: str = "", label_key: str = "solution", trainer_state: dict | None = None,
                                ) -> dict[str, Any]:  # fmt: skip
    """What a function taking `environments=` gives for the rollout whose instance is `environment`, called
    where the instance lives (an environment's worker process, on its event loop): {"value", "metrics",
    "extra"}, or {"error"} when it raised or returned something unreadable (the verifier's error then)."""
    try:
        fn, kwargs, metrics, extra = _arguments(
            spec, response, problem, fmt, tokenizer, label_key, trainer_state, environment
        )
        got = fn(**kwargs)
        if inspect.isawaitable(got):
            got = await got
        return {"value": _value(got, spec), "metrics": metrics, "extra": extra}
    except Exception as e:  # the user's function: its own error, named
        return {"error": f"{spec}: {type(e).__name__}: {e}"}


def takes_environments(spec: str) -> bool:
    """Whether the function names an `environments` parameter (TRL passes the rollouts' environment
    instances there): such a one is called where the instances live (`call_with_environment`)."""
    try:
        return "environments" in inspect.signature(load(spec)).parameters
    except ValueError:  # a builtin without a signature
        return False


def environment_functions(options: dict | None) -> list[str]:
    """The functions of `reward.options.trl_function` that take `environments=`."""
    return [str(s) for s in (options or {}).get("functions") or () if takes_environments(str(s))]


def _given(spec: str, problem: Problem) -> tuple[float | None, dict[str, list], dict[str, Any]]:
    """A function taking `environments=`: what its call beside the rollout's instance gave (ValueError: it
    failed, or the row was no rollout of an environment)."""
    got = problem.extra_info.get(ENVIRONMENT_VALUES)
    if not isinstance(got, dict) or label(spec) not in got:
        raise ValueError(f"{spec} takes environments=, which only a rollout of rollout.tools.environment has "
                         "(TRL passes them with environment_factory)")  # fmt: skip
    entry = got[label(spec)]
    if "error" in entry:
        raise ValueError(entry["error"])
    return entry["value"], {k: list(v) for k, v in entry["metrics"].items()}, dict(entry["extra"])


@VERIFIERS.register("trl_function")
def trl_function(response: str, problem: Problem, functions: list | None = None, weights: list | None = None,
                 correctness: str = "", format: str = "conversational", tokenizer: str = "",
                 label_key: str = "solution", trainer_state: dict | None = None) -> RewardResult:  # fmt: skip
    """The weighted sum of the `functions`' rewards for this completion (module docstring)."""
    specs = [str(s) for s in functions or ()]
    ws = [float(w) for w in weights] if weights else [1.0] * len(specs)
    scores: dict[str, float | None] = {}
    logged: dict[str, float] = {}
    extra: dict[str, Any] = {}
    for spec in specs:
        if takes_environments(spec):  # called beside the rollout's environment instance (its values given)
            value, metrics, more = _given(spec, problem)
        else:
            value, metrics, more = call(spec, response, problem, format, tokenizer, label_key, trainer_state)
        scores[label(spec)] = value
        logged.update({k: sum(v) / len(v) for k, v in metrics.items() if v})
        extra.update(more)
    applied = [(w, v) for w, v in zip(ws, scores.values()) if v is not None]
    total = sum(w * v for w, v in applied)
    if correctness:
        right = scores.get(label(correctness))
        solved = min(max(right or 0.0, 0.0), 1.0)
    else:
        solved = min(max(total, 0.0), 1.0)
    reason = "correct" if solved >= 1 else "wrong" if solved <= 0 else "partial"
    if not applied:
        reason = "no_function_applies"
    info: dict[str, Any] = {"extracted": None, "reason": reason, "correctness": solved, "functions": scores}
    if logged:
        info["function_log"] = logged
    if extra:
        info["logged_extra"] = extra
    return RewardResult(total, info)


def _check_options(options: dict[str, Any]) -> None:
    """Every function loads and can be called TRL's way; the weights, the correctness function, the format
    and the label key make sense: checked when the recipe is read, before any work."""
    if "trainer_state" in options:
        raise ValueError("'trainer_state' is the trainer's (its step, given to every call), not an option")
    specs = options.get("functions")
    if not isinstance(specs, (list, tuple)) or not specs or not all(isinstance(s, str) and s for s in specs):
        raise ValueError(f"option 'functions' (TRL's reward_funcs: import paths, path.py:name or TRL's names) must "
                         f"be a non-empty list of names, got {specs!r}")  # fmt: skip
    labels = [label(s) for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(
            f"option 'functions' names two functions alike ({labels}): each is logged by its name"
        )
    weights = options.get("weights")
    if weights is not None and (
        not isinstance(weights, (list, tuple))
        or len(weights) != len(specs)
        or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in weights
        )
    ):
        raise ValueError(f"option 'weights' must be one number per function ({len(specs)}), got {weights!r}")
    if options.get("correctness") and label(str(options["correctness"])) not in labels:
        raise ValueError(
            f"option 'correctness' {options['correctness']!r} is not one of the functions {labels}"
        )
    if options.get("format", "conversational") not in FORMATS:
        raise ValueError(f"option 'format' must be one of {FORMATS}, got {options.get('format')!r}")
    for spec in specs:
        required, takes_completions = _parameters(spec)
        if "completion_ids" in required and not options.get("tokenizer"):
            raise ValueError(f"{spec} needs completion_ids: set reward.options.trl_function.tokenizer to the "
                             "policy's tokenizer (its model path)")  # fmt: skip
        if not takes_completions:
            raise ValueError(
                f"{spec} takes no 'completions' (TRL calls fn(prompts=..., completions=..., **kwargs))"
            )


def _parameters(spec: str) -> tuple[set[str], bool]:
    """(the function's required keyword parameters, whether it takes `completions`: by name or **kwargs; a
    builtin without a signature is taken to)."""
    fn = load(spec)  # (its own ValueError: the spec loads nothing)
    try:
        params = inspect.signature(fn).parameters
    except ValueError:  # a builtin without a signature: called as it is
        return set(), True
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    required = {n for n, p in params.items() if p.kind in named and p.default is p.empty}
    keywords = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    return required, keywords or ("completions" in params and params["completions"].kind in named)


def _check_setup(options: dict[str, Any], problem: Problem | None = None) -> None:
    """A row routed here gives every column its functions require (a column TRL's dataset would have had:
    here a key of the row's extra_info), so a missing one is an error naming the row before any work."""
    if problem is None:
        return
    given = {
        "prompts",
        "completions",
        "trainer_state",
        "log_metric",
        "log_extra",
        "completion_ids",
        "environments",
    }
    given |= set(columns(problem, str(options.get("label_key", "solution"))))
    for spec in options.get("functions") or ():
        missing = sorted(_parameters(str(spec))[0] - given)
        if missing:
            raise ValueError(f"trl_function {spec} takes {missing}, which the row does not have (TRL passes a "
                             "dataset's columns; here they are the row's extra_info keys)")  # fmt: skip


trl_function.check_options = _check_options  # type: ignore[attr-defined]
trl_function.check_setup = _check_setup  # type: ignore[attr-defined]
# its options (the functions) come from a run's recipe: a converter's rows routed here are checked when it loads
trl_function.configured_by_run = True  # type: ignore[attr-defined]
trl_function.takes_trainer_state = True  # type: ignore[attr-defined]  (the runner passes the step: RewardRunner)
