"""Verifier "none": the route of a row with no checkable answer (a chat turn, a code trace without tests,
a distilled explanation), which supervised fine-tuning (`algo.objective: sft`) can still train on.

Owns: the reserved name `NONE` (`checkable` leaves such rows out) (a row's `extra_info.verifier: none`, or `reward.verifier: none` for a
whole recipe's rows; `reasonrl data prepare sft --option answer=none` writes it) and its refusal: every
load-time check (`routing.check_routable`) refuses such a row, naming it, unless the caller trains on
responses alone (the SFT trainer's training and validation rows: those rows give `eval/nll`, not
accuracy). Scoring one anyway (a path that skipped the check) is a verifier error scoring 0, never a
reward: an empty ground truth must not let any answer score.
Does not own: routing (`rewards.routing`) or the SFT trainer (`trainer.sft`).
"""

from __future__ import annotations

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem

NONE = "none"
WHY = (
    "the row has no checkable answer (verifier 'none'): it can train algo.objective=sft on its response, "
    "but nothing can score it; give it a ground truth and a data_source that routes to a verifier"
)


def checkable(problems: list[Problem]) -> list[Problem]:
    """The problems that have a checkable answer (not routed to "none")."""
    return [p for p in problems if p.verifier != NONE]


@VERIFIERS.register(NONE)
def unverified(response: str, problem: Problem) -> RewardResult:  # noqa: ARG001
    return RewardResult(0.0, {"extracted": None, "reason": f"error: {WHY}"})


def _refuse(options: dict, problem: Problem | None = None) -> None:  # noqa: ARG001
    if problem is not None:
        raise ValueError(WHY)


unverified.check_setup = _refuse  # type: ignore[attr-defined]
