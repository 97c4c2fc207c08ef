"""A plugin verifier for tests: 1 when the response's character codes plus the problem's number (uid
"p<k>") sum to an even number. A random model's greedy outputs then score a mix of 0s and 1s across
problems, so an accuracy is only reproduced by evaluating the same problems with the same settings."""

from __future__ import annotations

from reasonrl.rewards.base import VERIFIERS, RewardResult


@VERIFIERS.register("parity")
def parity(response: str, problem) -> RewardResult:
    k = int(problem.uid[1:]) if problem.uid[1:].isdigit() else 0
    return RewardResult(
        float((sum(map(ord, response)) + k) % 2 == 0), {"extracted": response, "reason": "parity"}
    )


@VERIFIERS.register("parity_unless_down")
def parity_unless_down(response: str, problem) -> RewardResult:
    """`parity`, but it raises while the file that extra_info["down_if"] names exists: a verifier whose
    service is down, switched from the test process for the verifier workers too."""
    import os

    if os.path.exists(problem.extra_info["down_if"]):
        raise ConnectionError("the parity service is down")
    return parity(response, problem)
