"""The verifier interface: `(response: str, problem: Problem) -> RewardResult`, and its registry.

Owns: the `VERIFIERS` registry and the `result` shorthand (`RewardResult` is a record in `types`). Does not own: routing by data_source
(`rewards.routing`), time limits and process isolation (`rewards.runner`, `rewards.sandbox`).
A verifier is deterministic and side-effect free; it never calls `eval()` on model output.

Load-time checks: an option's value must have its default's kind (`check_options`); a verifier
may carry `fn.check_options(options: dict)` for what else its options must satisfy, and
`fn.check_setup(options: dict, problem: Problem | None)`, which raises ValueError when the route
cannot work (an option value that does not exist, a judge with no endpoint, SandboxFusion with no
server). `check_setup` runs them once per options dict (problem None) and `fn.check_setup` once per
routed problem, before any work (`routing.check_routable`, `runner.RewardRunner`); the recipe's
`reward.options` are checked with `check_options` when it is read (`config.checks`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from reasonrl.registry import Registry
from reasonrl.types import Problem, RewardResult  # noqa: F401  (RewardResult: re-exported)

VerifierFn = Callable[[str, Problem], RewardResult]
VERIFIERS: Registry[VerifierFn] = Registry("verifier", positional=2)


def result(correct: bool, extracted: Any, reason: str | None = None, **info: Any) -> RewardResult:
    """Shorthand for a 0/1 result with the standard info keys."""
    if reason is None:
        reason = "no_answer" if extracted is None else ("correct" if correct else "wrong")
    return RewardResult(float(bool(correct)), {"extracted": extracted, "reason": reason, **info})


def _fits(value: Any, default: Any) -> bool:
    """Whether an option value has its default's kind (an int where a float goes; no bool for a
    number; a finite number, not negative where the default is not)."""
    if isinstance(default, (bool, str)):
        return isinstance(value, type(default))
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if isinstance(default, int) and not isinstance(value, int):
        return False
    return math.isfinite(value) and (value >= 0 or default < 0)


_KINDS = {bool: "true or false", str: "a text", int: "a whole number >= 0", float: "a number >= 0"}


def kind_error(value: Any, default: Any) -> str | None:
    """None if an option's `value` has its `default`'s kind (`_fits`; any value where the default is
    None or of another type), else what the value must be ("a number >= 0")."""
    if type(default) not in _KINDS or _fits(value, default):
        return None
    return _KINDS[type(default)]


def check_options(name: str, options: dict[str, Any]) -> None:
    """ValueError naming the first option of verifier `name` whose value it cannot take: not of its
    default's kind (`_fits`), or refused by the verifier's own `check_options(options)`."""
    fn = VERIFIERS.get(name)
    params = inspect.signature(fn).parameters
    for key, value in options.items():
        want = kind_error(value, params[key].default if key in params else None)
        if want:
            raise ValueError(f"option {key!r} of {name!r} must be {want}, got {value!r}")
    own = getattr(fn, "check_options", None)
    if own is not None:
        own(options)


def relative_tolerance_below_one(options: dict[str, Any]) -> None:
    """A `check_options` for verifiers with `rel_tol`: 1 or more would accept any number of the same
    sign (|a - b| <= max(|a|, |b|))."""
    rel_tol = options.get("rel_tol", 0)
    if rel_tol >= 1:
        raise ValueError(
            f"rel_tol must be < 1 (1 or more accepts any number of the same sign), got {rel_tol!r}"
        )


def check_setup(name: str, options: dict[str, Any] | None = None, problem: Problem | None = None) -> None:
    """Run verifier `name`'s load-time checks (see the module docstring): its options' values
    (`check_options`) when `problem` is None, then its own `check_setup`, if it has one."""
    options = dict(options or {})
    if problem is None:
        check_options(name, options)
    check = getattr(VERIFIERS.get(name), "check_setup", None)
    if check is not None:
        check(options, problem)


def checks_ground_truth(verifier: VerifierFn, gold: Callable[[Problem], Any]) -> VerifierFn:
    """Give `verifier` a load-time check that reads each routed problem's ground truth with `gold`, the
    reader the verifier itself scores with (raising ValueError on one it cannot use), so a malformed
    row fails at load time, naming its row, instead of scoring every sample 0 as a verifier error."""

    def check(options: dict[str, Any], problem: Problem | None = None) -> None:  # noqa: ARG001
        if problem is not None:
            gold(problem)

    verifier.check_setup = check  # type: ignore[attr-defined]
    return verifier
