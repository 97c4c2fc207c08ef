"""What runs in a verifier worker process (and, for inline verifiers, in the caller).

Owns: `init_worker` (each (re)started pool worker: the parent's import path, the registrations, and
`die_with_parent`), `call_verifier` (one call: an exception, a result that is not a `RewardResult`, or
a score that is not a finite number becomes a 0 score with reason "error: ..."), `call_many` (several
calls in one pool task), `call_batch` (a batch verifier's one call over many rows, checked the same
way), `failure`, and `noop` (a task that starts the workers). Does not own:
scheduling, time limits, batching or combining terms (`rewards.runner`).
"""

from __future__ import annotations

import math
import numbers
import sys
import time
from collections.abc import Sequence
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem


def init_worker(paths: Sequence[str], modules: Sequence[str]) -> None:
    """Runs once in every (re)started worker: same import path as the parent, registrations loaded."""
    import importlib

    die_with_parent()
    for p in paths:
        if p not in sys.path:
            sys.path.append(p)
    importlib.import_module("reasonrl.rewards")
    for m in modules:
        importlib.import_module(m)


def noop() -> None:
    return None


def die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent process dies (the trainer, or the forkserver that
    dies with it), so no verifier worker outlives a killed trainer.

    A forkserver exits when every holder of its "alive" pipe has closed it, and CPython hands each
    process it forks a copy (so that one could ask the server for more). A worker keeping that copy
    kept the forkserver alive after the trainer was SIGKILLed, and the forkserver kept the worker
    alive: one stuck in a long call (pebble's time limit died with the trainer) ran on. Workers never
    start processes through the forkserver, so they close it."""
    import os
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    alive = getattr(server, "_forkserver_alive_fd", None)
    if alive is not None:
        try:
            os.close(alive)
        except OSError:
            pass
        server._forkserver_alive_fd = None
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the signal was armed
        os._exit(0)


def checked(res: Any) -> RewardResult:
    """`res` if it is a `RewardResult` with a finite number for a score, else ValueError / TypeError."""
    if not isinstance(res, RewardResult):
        raise TypeError(f"verifier returned {type(res).__name__}, not RewardResult")
    if not isinstance(res.score, numbers.Real):  # a str or None score broke the whole batch later
        raise TypeError(f"verifier returned a score of type {type(res.score).__name__}, not a number")
    if not math.isfinite(res.score):  # NaN would make its group's advantages NaN, and the gradient
        raise ValueError(f"verifier returned a non-finite score ({res.score})")
    return res


def call_verifier(
    name: str, response: str, problem: Problem, options: dict[str, Any] | None = None
) -> tuple[RewardResult, float]:
    """One verifier call; exceptions become a 0 score with the reason. Returns (result, seconds)."""
    t0 = time.perf_counter()
    try:
        res = checked(VERIFIERS.get(name)(response, problem, **(options or {})))
    except Exception as e:  # noqa: BLE001 - a verifier bug must not kill the batch
        res = failure(f"error: {type(e).__name__}: {e}")
    return res, time.perf_counter() - t0


def call_batch(
    name: str, responses: Sequence[str], problems: Sequence[Problem], options: dict[str, Any] | None = None
) -> list[tuple[RewardResult, float]]:
    """A batch verifier's one call over many rows (`fn.score_batch(responses, problems, **options)`, e.g. a
    reward model scoring them a forward at a time). If it raises or returns the wrong number of results,
    every row scores 0 with the reason; each result is checked as `call_verifier` checks one. Each row is
    charged an equal share of the call's seconds."""
    t0 = time.perf_counter()
    try:
        out = list(VERIFIERS.get(name).score_batch(list(responses), list(problems), **(options or {})))
        if len(out) != len(responses):
            raise ValueError(f"score_batch returned {len(out)} results for {len(responses)} rows")
    except Exception as e:  # noqa: BLE001 - a verifier bug must not kill the batch
        out = [failure(f"error: {type(e).__name__}: {e}")] * len(responses)
    results = []
    for res in out:
        try:
            results.append(checked(res))
        except (TypeError, ValueError) as e:
            results.append(failure(f"error: {type(e).__name__}: {e}"))
    each = (time.perf_counter() - t0) / max(len(results), 1)
    return [(res, each) for res in results]


def call_many(calls: Sequence[tuple]) -> list[tuple[RewardResult, float]]:
    """Calls in one task, in order (several quick ones in a pool task: one message each way instead of
    one per call)."""
    return [call_verifier(*c) for c in calls]


def failure(reason: str) -> RewardResult:
    """A 0 score with `reason` (cut to 500 characters)."""
    return RewardResult(0.0, {"extracted": None, "reason": reason[:500]})
