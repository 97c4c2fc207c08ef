"""A verifier that keeps failing stops the run, before its broken scores train the policy.

Owns: `VerifierWatch`, which reads each step's `verifier/<name>/error_rate` (calls that ended in an
error rather than a score: a verifier that raised, a worker that died, a judge endpoint that refused or
kept answering 5xx through its retries) and `VerifierFailing`, the one-line error that stops the run.
A step where some verifier's error rate is above `reward.max_error_rate` logs a warning (the first of a
streak); `reward.error_patience` such steps in a row stop the run before that step's update, so the
last checkpoint holds only updates from measured rewards up to the streak (0: warn only, never stop).
Every rank decides alike (one collective per step). Timeouts are not counted: a program that loops is
the policy's own, and its timeout is its score (a judge that never answers reports an error, not a
timeout: `rewards.verifiers.judge`). Does not own: measuring the rates (`rewards.health`).

Why: a failed call scores 0, so a dead judge or a broken verifier turns the reward signal into noise
while the run goes on looking healthy (before this, only `verifier/.../error_rate` in the metrics said
so).
"""

from __future__ import annotations

import re

from reasonrl import distributed as dist
from reasonrl.errors import InputError
from reasonrl.rewards.health import most_common_error

_RATE = re.compile(r"^verifier/(?P<name>[^/]+)/error_rate$")


class VerifierFailing(InputError):
    """A verifier failed on most of its calls for `reward.error_patience` steps in a row."""


class VerifierWatch:
    def __init__(self, max_error_rate: float, patience: int, log=print):
        self.limit, self.patience, self.log = float(max_error_rate), int(patience), log
        self.streak: list[int] = []  # the failing steps in a row, up to the current one

    def check(self, step: int, reward_metrics: dict[str, float], groups=()) -> None:
        """Warn on the first failing step of a streak; raise `VerifierFailing` on its `patience`-th."""
        rates = {m["name"]: v for k, v in reward_metrics.items() if (m := _RATE.match(k)) and v > self.limit}
        if not dist.any_rank(bool(rates)):  # the same decision on every rank
            self.streak = []
            return
        self.streak.append(step)
        what = _describe(rates, groups)
        if len(self.streak) == 1 and dist.is_main():
            then = (f"reward.error_patience={self.patience}: the run stops when this lasts that many steps in a row"
                    if self.patience > 0 else "reward.error_patience=0: the run goes on")  # fmt: skip
            self.log(f"warning: step {step}: {what}: those calls score 0 without being measured; {then}")
        if self.patience > 0 and len(self.streak) >= self.patience:
            first = self.streak[0]
            when = (
                f"for {len(self.streak)} steps in a row (steps {first}-{step})"
                if step > first
                else f"at step {step}"
            )
            raise VerifierFailing(
                f"{what}, above reward.max_error_rate={self.limit:g} {when}; stopped before step {step}'s update. "
                "Fix the verifier or its service and resume from the last checkpoint (--resume), or set "
                "reward.error_patience=0 to train on"
            )


def _describe(rates: dict[str, float], groups) -> str:
    """ "verifier 'judge' failed on 100% of its calls (e.g. 'error: connection: ...')", this rank's."""
    if not rates:
        return "a verifier failed on most of its calls on another rank"
    failed = "; ".join(f"verifier '{n}' failed on {r:.0%} of its calls" for n, r in sorted(rates.items()))
    common = most_common_error(res.reason for g in groups for res in getattr(g, "results", ()))
    example = f" (e.g. {common!r})" if common else ""
    return f"{failed}{example}"


__all__ = ["VerifierFailing", "VerifierWatch"]
