"""Rewards: verifiers, routing by data_source, batch scoring.

Importing this package registers the built-in verifiers in `VERIFIERS` (domain modules import their
heavy libraries lazily, inside the functions that need them).
"""

from reasonrl.rewards import procedural  # noqa: F401  (registers arithmetic, countdown)
from reasonrl.rewards import judge  # noqa: F401  (registers judge)
from reasonrl.rewards.base import VERIFIERS, RewardResult, VerifierFn
from reasonrl.rewards.routing import check_routable, verifier_name


def score(response: str, problem) -> RewardResult:
    """Score one response in-process with the verifier routed from `problem` (no time limit)."""
    return VERIFIERS.get(verifier_name(problem))(response, problem)


__all__ = ["VERIFIERS", "RewardResult", "VerifierFn", "check_routable", "score", "verifier_name"]
