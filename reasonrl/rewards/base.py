"""The verifier interface: `(response: str, problem: Problem) -> RewardResult`, and its registry.

Owns: the `VERIFIERS` registry and the `result` shorthand (`RewardResult` is a record in `types`). Does not own: routing by data_source
(`rewards.routing`), time limits and process isolation (`rewards.runner`, `rewards.sandbox`).
A verifier is deterministic and side-effect free; it never calls `eval()` on model output.

Load-time checks: a verifier may carry `fn.check_setup(options: dict, problem: Problem | None)`, which
raises ValueError when the route cannot work (an option value that does not exist, a judge with no
endpoint, SandboxFusion with no server). `check_setup` runs it once per options dict (problem None)
and once per routed problem, before any work (`routing.check_routable`, `runner.RewardRunner`).
"""

from __future__ import annotations

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


def check_setup(name: str, options: dict[str, Any] | None = None, problem: Problem | None = None) -> None:
    """Run verifier `name`'s load-time check, if it has one (see the module docstring)."""
    check = getattr(VERIFIERS.get(name), "check_setup", None)
    if check is not None:
        check(dict(options or {}), problem)


def checks_ground_truth(verifier: VerifierFn, gold: Callable[[Problem], Any]) -> VerifierFn:
    """Give `verifier` a load-time check that reads each routed problem's ground truth with `gold`, the
    reader the verifier itself scores with (raising ValueError on one it cannot use), so a malformed
    row fails at load time, naming its row, instead of scoring every sample 0 as a verifier error."""

    def check(options: dict[str, Any], problem: Problem | None = None) -> None:  # noqa: ARG001
        if problem is not None:
            gold(problem)

    verifier.check_setup = check  # type: ignore[attr-defined]
    return verifier
