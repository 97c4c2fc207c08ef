"""Worker processes holding each rollout's own instance of a user's class: TRL's environments
(`rollout.environments`) and OpenRLHF's agents (`rollout.agents`), stateful across the calls of one
rollout, the user's code kept out of the trainer's process.

Owns: the processes (forkserver, started when first asked, each saying it is ready before its first request's
time limit starts), one request at a time per process and one reply each, a rollout's requests all going to
one process (its key modulo the processes), the time limit of each request, and a process that passes it or
dies: killed and replaced, the rollouts whose instances it held lost (their later requests answer `LOST`),
never the run; and what its users share: `run_in_loop` (the process's one event loop), `shared_reset` (the one prompt a row's resets agree on) and
`finite_number` (a number a user's class returned). Does not own: what a request does (each user of the pool passes its own handler: a module
function `handler(op, key, args, named, state)`, where `named` is {name: spec} of the classes and `state` a
dict the handler keeps in its process; op "start" comes once, before the process says it is ready, to
import the classes) or the keys' meaning.
"""

from __future__ import annotations

import itertools
import math
import numbers
import sys
from concurrent.futures import ThreadPoolExecutor

STARTUP_S = 120  # for a worker process to start (the forkserver's first start imports Python's own modules)
STARTS = "reset"  # the request that makes a rollout's instance: its key now lives in that process
LOST = "the state of this rollout was lost (an earlier request of it timed out or killed its process)"


def _serve(conn, handler, named: dict[str, str], path: list[str]) -> None:
    """A worker process: the instances of its rollouts, by key; one request at a time, one reply each."""
    sys.path[:] = path
    state: dict = {}
    try:  # the user's classes imported before the first request's time limit starts
        handler("start", -1, [], named, state)
    except Exception as e:  # noqa: BLE001 - the user's module: its error, named by the pool
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            op, key, *args = conn.recv()
        except (EOFError, OSError):
            return
        if op == "stop":
            return
        try:
            reply = ("ok", handler(op, key, args, named, state))
        except Exception as e:  # noqa: BLE001 - the user's code, or the model's arguments: named in the reply
            # (an error whose text alone says little: a missing key's is the key)
            named = isinstance(e, (TypeError, KeyError, IndexError, AttributeError)) or not str(e)
            reply = ("error", f"{type(e).__name__}: {e}".rstrip(": ") if named else str(e))
        conn.send(reply)


def finite_number(value, what: str) -> float:
    """`value` (a number, or a tensor / numpy value holding one) as a float; ValueError naming `what` otherwise."""
    if hasattr(value, "item") and callable(value.item):  # a tensor (OpenRLHF's) or a numpy value
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{what}={value!r}, not a finite number")
    return float(value)


def run_in_loop(state: dict, value):
    """`value`, or what it gives once awaited: run on the worker process's one event loop (kept in the handler's
    `state`), so what a user's instance opens on it (an aiohttp session) lasts across its requests."""
    import asyncio
    import inspect

    if not inspect.iscoroutine(value):
        return value
    loop = state.get("loop") or state.setdefault("loop", asyncio.new_event_loop())
    return loop.run_until_complete(value)


def shared_reset(replies: list[tuple[str, object]], where: str, noun: str, whose: str):
    """The one value a row's n resets returned (its rollouts share one prompt); ValueError naming `where` when
    one failed or they differ (`noun`: what they return; `whose`: whose task to seed from the row)."""
    failed = next((v for status, v in replies if status != "ok"), None)
    if failed is not None:
        raise ValueError(f"{where}: reset failed ({failed})")
    if len({v for _, v in replies}) > 1:
        raise ValueError(f"{where}: its {len(replies)} resets returned different {noun}; the rollouts of a row "
                         f"share one prompt (seed {whose} task from the row)")  # fmt: skip
    return replies[0][1]


class _Worker:
    """One worker process and its pipe; a request past the time limit, or a process that dies, restarts it
    (the keys it held are lost)."""

    def __init__(self, named: dict[str, str], handler, ctx, what: str) -> None:
        self.named, self.handler, self.ctx, self.what, self.keys = named, handler, ctx, what, set()
        self._start()

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_serve, args=(child, self.handler, self.named, list(sys.path)),
                                     daemon=True)  # fmt: skip
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(STARTUP_S):
            self.stop(kill=True)
            raise RuntimeError(f"{self.what}: a worker process did not start in {STARTUP_S} s")
        status, why = parent.recv()
        if status != "ready":
            self.stop(kill=True)
            raise RuntimeError(f"{self.what}: a worker process could not load it ({why})")

    def ask(self, msg: tuple, timeout_s: float) -> tuple[str, object, set[int]]:
        """(status, value, keys lost) of one request."""
        try:
            self.conn.send(msg)
            if self.conn.poll(timeout_s):
                status, value = self.conn.recv()
                return status, value, set()
            status, value = "timeout", f"timed out after {timeout_s:g} s"
        except (EOFError, OSError):
            status, value = "error", f"the process of {self.what} failed"
        lost, self.keys = self.keys, set()
        self.stop(kill=True)
        self._start()
        return status, value, lost

    def stop(self, kill: bool = False) -> None:
        if not kill:
            try:
                self.conn.send(("stop", 0))
            except OSError:
                pass
            self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


class InstancePool:
    """`workers` processes serving `handler` for the classes `named` ({name: spec}), each request under
    `timeout_s`; `what` names the setting in errors. Create once per engine; `close` stops the processes."""

    def __init__(self, named: dict[str, str], handler, workers: int = 4, timeout_s: float = 5.0,
                 what: str = "rollout.tools.environment") -> None:  # fmt: skip
        self.named, self.handler, self.what = named, handler, what
        self.workers, self.timeout_s = workers, float(timeout_s)
        self._pool: list[_Worker] | None = None
        self._keys = itertools.count()
        self.lost: set[int] = set()

    def _workers(self) -> list[_Worker]:
        if self._pool is None:
            import multiprocessing

            ctx = multiprocessing.get_context("forkserver")
            self._pool = [_Worker(self.named, self.handler, ctx, self.what) for _ in range(self.workers)]
        return self._pool

    def new_keys(self, count: int) -> list[int]:
        return [next(self._keys) for _ in range(count)]

    def ask(self, requests: list[tuple]) -> list[tuple[str, object]]:
        """(status, value) of each request (op, key, ...): each worker's in order, the workers side by side."""
        pool = self._workers()
        out: list = [None] * len(requests)

        def serve(w: int) -> None:
            for i, msg in enumerate(requests):
                if msg[1] % len(pool) != w:
                    continue
                if msg[1] in self.lost:
                    out[i] = ("error", LOST)
                    continue
                if msg[0] == STARTS:
                    pool[w].keys.add(msg[1])
                status, value, lost = pool[w].ask(msg, self.timeout_s)
                self.lost |= lost
                out[i] = (status, value)

        with ThreadPoolExecutor(len(pool)) as threads:
            list(threads.map(serve, range(len(pool))))
        return out

    def end(self, keys: list[int]) -> None:
        """The rollouts `keys` are over: each instance's process is told ("end"), and the keys forgotten."""
        self.ask([("end", k) for k in keys if k not in self.lost])
        for w in self._pool or ():
            w.keys -= set(keys)
        self.lost -= set(keys)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        for w in pool or ():
            w.stop()
