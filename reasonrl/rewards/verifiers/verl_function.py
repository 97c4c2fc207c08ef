"""A verl reward function, as it is: `compute_score(data_source, solution_str, ground_truth, extra_info)`
from a Python file (verl's `custom_reward_function.path` / `.name` / `.reward_kwargs`), as the verifier
`verl_function`.

Options (`reward.options.verl_function`): `path` (the .py file), `name` (the function, default
"compute_score"), `kwargs` (keyword arguments of every call, verl's `reward_kwargs`). Route rows to it
with `reward.verifier: verl_function` (every row of the run's data, whatever its data_source, as verl
calls its custom function for every row) or a row's `extra_info.verifier`. The function runs in the
verifier workers like every verifier: under `reward.timeout_s`, a crash or an exception scoring 0 with
the reason recorded. What it returns, as verl reads it: a number is the score; a mapping gives its
"score", and its "acc" (when there is one) is the sample's correctness (what accuracy and pass@k count;
otherwise the score clipped to [0, 1], so DAPO's -1 / +1 count as wrong / right), its "pred" the
extracted answer; its other keys are kept in the result's info.

Owns: reading what the function returns. Does not own: loading the file (`user_code.load_function`),
routing (`rewards.routing`), time limits (`rewards.runner`).
"""

from __future__ import annotations

import inspect
import math
import numbers
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem
from reasonrl.user_code import load_function


def _number(value: Any, what: str) -> float:
    """A finite number (True / False as 1 / 0, as verl's tensor of rewards reads them)."""
    if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{what} is {value!r}, not a finite number")
    return float(value)


def _reason(score: float) -> str:
    return "correct" if score >= 1 else "wrong" if score <= 0 else "partial"


def read_return(value: Any) -> RewardResult:
    """A verl reward function's return value as a RewardResult (module docstring)."""
    if hasattr(value, "item") and not isinstance(value, dict):  # a numpy / torch scalar
        value = value.item()
    if not isinstance(value, dict):
        score = _number(value, "the function's return value")
        return RewardResult(score, {"reason": _reason(score)})
    if "score" not in value:
        raise ValueError(f"the function returned a mapping without 'score' (keys: {sorted(map(str, value))})")
    score = _number(value["score"], "its 'score'")
    info = {str(k): v for k, v in value.items() if k not in ("score", "acc", "pred")}
    reason = _reason(score)
    if "acc" in value:
        acc = value["acc"]
        solved = bool(acc) if isinstance(acc, bool) or not isinstance(acc, numbers.Real) else float(acc) > 0
        info["correctness"], reason = (1.0, "correct") if solved else (0.0, "wrong")
    pred = value.get("pred")
    return RewardResult(score, {**info, "extracted": None if pred is None else str(pred), "reason": reason})


@VERIFIERS.register("verl_function")
def verl_function(response: str, problem: Problem, path: str | None = None, name: str = "compute_score",
                  kwargs: dict | None = None) -> RewardResult:  # fmt: skip
    """`name` of the file `path` called verl's way on this row (module docstring)."""
    fn = load_function(str(path), name)
    got = fn(
        problem.data_source, response, problem.ground_truth, dict(problem.extra_info), **dict(kwargs or {})
    )
    return read_return(got)


def _check_options(options: dict[str, Any]) -> None:
    """The file exists and defines the function, taking (data_source, solution_str, ground_truth,
    extra_info) and the `kwargs` given: checked when the recipe is read, before any work."""
    if not options.get("path") or not isinstance(options["path"], str):
        raise ValueError(f"option 'path' (the Python file holding the reward function) is required, got "
                         f"{options.get('path')!r}")  # fmt: skip
    kwargs = options.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ValueError(f"option 'kwargs' must be a mapping, got {kwargs!r}")
    fn = load_function(str(options["path"]), str(options.get("name", "compute_score")))
    try:
        inspect.signature(fn).bind("data_source", "solution", "truth", {}, **kwargs)
    except TypeError as e:
        raise ValueError(
            f"{options.get('name', 'compute_score')} in {options['path']} cannot be called as verl calls it, "
            f"fn(data_source, solution_str, ground_truth, extra_info, **kwargs): {e}"
        ) from None
    except ValueError:  # a builtin without a signature: called as it is
        pass


verl_function.check_options = _check_options  # type: ignore[attr-defined]
