"""Test-only verifiers for tests/unit/test_rewards_runner*.py, and `prob` (a problem routed to one).

Owns: misbehaving verifiers (hang, blow up in sympy, os._exit, segfault, raise) and small well-behaved
ones. They register on import, so runner workers (separate processes) get them by importing this
module (`RewardRunner(modules=[__name__])`). Not part of the library.
"""

from __future__ import annotations

import ctypes
import math
import os
import time

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem

P = "_runner_test/"


def prob(verifier: str | None, gt: object = "a", data_source: str = "test") -> Problem:
    """A problem routed to `verifier` (by name) with ground truth `gt`."""
    return Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth=gt, data_source=data_source, verifier=verifier
    )


@VERIFIERS.register(P + "echo")
def echo(response: str, problem) -> RewardResult:
    """Score = float(ground_truth == response); extracted = the response ('' -> None)."""
    return RewardResult(
        float(str(problem.ground_truth) == response),
        {"extracted": response or None, "reason": "ok", "pid": os.getpid()},
    )


@VERIFIERS.register(P + "sleep_forever")
def sleep_forever(response: str, problem) -> RewardResult:
    while True:
        time.sleep(3600)


@VERIFIERS.register(P + "sympy_explode")
def sympy_explode(response: str, problem) -> RewardResult:
    import sympy

    x, y, z = sympy.symbols("x y z")
    sympy.simplify(sympy.expand((x + y + z + 1) ** 300) - sympy.factorial(300))
    return RewardResult(1.0, {"extracted": "done", "reason": "ok"})


@VERIFIERS.register(P + "os_exit")
def os_exit(response: str, problem) -> RewardResult:
    os._exit(3)


@VERIFIERS.register(P + "segfault")
def segfault(response: str, problem) -> RewardResult:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return RewardResult(1.0, {"extracted": "unreachable", "reason": "ok"})


@VERIFIERS.register(P + "raise")
def boom(response: str, problem) -> RewardResult:
    raise RuntimeError("boom")


@VERIFIERS.register(P + "not_a_result")
def not_a_result(response: str, problem):
    return 1.0


@VERIFIERS.register(P + "has_answer")
def has_answer(response: str, problem) -> RewardResult:
    """Shaping term: 1 if the response has an <answer> tag; reports no extraction."""
    return RewardResult(float("<answer>" in response), {"reason": "ok", "pid": os.getpid()})


has_answer.run_mode = "inline"


@VERIFIERS.register(P + "length_penalty")
def length_penalty(response: str, problem) -> RewardResult:
    """Shaping term: -len(response) / 100 (negative scores are allowed for terms)."""
    return RewardResult(-len(response) / 100, {"reason": "ok"})


@VERIFIERS.register(P + "threaded")
def threaded(response: str, problem) -> RewardResult:
    return RewardResult(1.0, {"extracted": response, "reason": "ok", "pid": os.getpid()})


threaded.run_mode = "thread"


@VERIFIERS.register(P + "bad_mode")
def bad_mode(response: str, problem) -> RewardResult:
    return RewardResult(0.0, {})


bad_mode.run_mode = "gpu"


@VERIFIERS.register(P + "preloaded")
def preloaded(response: str, problem) -> RewardResult:
    """1 when the worker imported `response` (a module name) before this call, as `fn.preload` asks."""
    import sys

    return RewardResult(float(response in sys.modules), {"reason": "ok", "pid": os.getpid()})


preloaded.preload = ("_preload_marker",)  # a test module nothing else imports


@VERIFIERS.register(P + "echo_or_die")
def echo_or_die(response: str, problem) -> RewardResult:
    """echo, except that the response "hang" never returns and "exit" kills the worker: a quick
    verifier with one bad input, the case batched pool tasks must survive."""
    if response == "hang":
        while True:
            time.sleep(3600)
    if response == "exit":
        os._exit(3)
    return echo(response, problem)


@VERIFIERS.register(P + "as_number")
def as_number(response: str, problem) -> RewardResult:
    """Score = float(response), whatever its range (a verifier scoring outside [0, 1])."""
    return RewardResult(float(response), {"reason": "ok"})


as_number.run_mode = "inline"


WARMED_IN: list[int] = []  # the processes this module's warm-up ran in (a forked worker inherits it)


def _record_warm_up() -> None:
    WARMED_IN.append(os.getpid())


def _failing_warm_up() -> None:
    raise RuntimeError("a warm-up that fails must not break the pool")


@VERIFIERS.register(P + "warm_state")
def warm_state(response: str, problem) -> RewardResult:
    """Where the warm-ups of this module and of the math verifiers ran, as seen from the worker; a
    response "exit" kills the worker first (its replacement must fork warm too)."""
    if response == "exit":
        os._exit(3)
    from reasonrl.rewards import warm_up
    from reasonrl.rewards.verifiers import math_warm_up

    info = {"pid": os.getpid(), "warmed_in": list(WARMED_IN), "math": math_warm_up.warm_up in warm_up._warmed}
    return RewardResult(1.0, {"reason": "ok", **info})


warm_state.preload = ("_preload_marker",)
warm_state.warm_up = _record_warm_up


@VERIFIERS.register(P + "warm_fails")
def warm_fails(response: str, problem) -> RewardResult:
    return RewardResult(1.0, {"reason": "ok"})


warm_fails.warm_up = _failing_warm_up


@VERIFIERS.register(P + "bad_score")
def bad_score(response: str, problem) -> RewardResult:
    """A verifier bug: the score is whatever the response names (nan, inf, a string, None)."""
    return RewardResult({"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "str": "1", "none": None,
                         "int": 1, "bool": True}[response], {"reason": "ok"})  # fmt: skip
