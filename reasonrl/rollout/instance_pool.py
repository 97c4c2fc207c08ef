"""Worker processes holding each rollout's own instance of a user's class: TRL's environments
(`rollout.environments`), OpenRLHF's agents (`rollout.agents`), verl's interactions and tools
(`rollout.verl_interactions`, `rollout.verl_tools`) and MCP sessions (`rollout.mcp_tools`), stateful across the
calls of one rollout, the user's code kept out of the trainer's process.

Owns: the processes (forkserver, started when first asked, each saying it is ready before its first request's
time limit starts), a rollout's requests all going to one process (its key modulo the processes), each
process's requests of one `ask` sent at once and run side by side on its one event loop (each rollout's in
order; a reply as each ends), the time limit of each request (an awaited one past it is cancelled: that
request times out, the process goes on), and a process that blocks past it or dies: killed and replaced, the
rollouts whose instances it held lost (their later requests answer `LOST`), never the run; and what its users
share: `run_in_loop` (the process's one event loop), `maybe_awaited` (a user's method, async or plain),
`shared_reset` (the one prompt a row's resets agree on) and `finite_number` (a number a user's class
returned). Does not own: what a request does (each user of the pool passes its own handlers, module
functions: `handler(op, key, args, named, state)`, called once with op "start" before the process says it
is ready, to import the classes, where `named` is {name: spec} of the classes and `state` a dict the handlers
keep in the process; and the coroutine function `concurrent(op, key, args, named, state)` for every request)
or the keys' meaning.
"""

from __future__ import annotations

import itertools
import math
import numbers
import sys
from concurrent.futures import ThreadPoolExecutor

STARTUP_S = 120  # for a worker process to start (the forkserver's first start imports Python's own modules)
STARTS = "reset"  # the request that makes a rollout's instance: its key now lives in that process
BATCH = "batch"  # a worker's requests of one `ask`, sent at once
MARGIN_S = 2.0  # beyond a request's time limit, for its reply to arrive (a batch: since the last reply)
LOST = "the state of this rollout was lost (an earlier request of it timed out or killed its process)"


def _serve(conn, handler, concurrent, named: dict[str, str], path: list[str]) -> None:
    """A worker process: the instances of its rollouts, by key; a batch of requests at a time (`_serve_batch`)."""
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
            op, *args = conn.recv()
        except (EOFError, OSError):
            return
        if op != BATCH:  # "stop"
            return
        _serve_batch(conn, concurrent, *args, named, state)


def _error(e: Exception) -> tuple[str, str]:
    """The reply of a request that raised (the user's code, or the model's arguments): its error, named where
    its text alone says little (a missing key's is the key)."""
    named = isinstance(e, (TypeError, KeyError, IndexError, AttributeError)) or not str(e)
    return "error", f"{type(e).__name__}: {e}".rstrip(": ") if named else str(e)


def _serve_batch(conn, concurrent, requests: list[tuple], timeout_s: float, named: dict, state: dict) -> None:
    """A batch of requests on the process's event loop: each rollout's in order, the rollouts' side by side
    (an async tool waiting on a server lets the others run), each under `timeout_s` (an awaited call past it
    is cancelled: that request times out, the process goes on); a reply sent as each ends, then "done"."""
    import asyncio

    async def one(i: int, msg: tuple) -> None:
        op, key, *args = msg
        try:
            reply = ("ok", await asyncio.wait_for(concurrent(op, key, args, named, state), timeout_s))
        except TimeoutError:
            reply = ("timeout", f"timed out after {timeout_s:g} s")
        except Exception as e:  # noqa: BLE001 - the user's code, or the model's arguments: named in the reply
            reply = _error(e)
        conn.send((i, *reply))

    async def rollout(items: list[tuple[int, tuple]]) -> None:
        for i, msg in items:
            await one(i, msg)

    by_key: dict[int, list] = {}
    for i, msg in enumerate(requests):
        by_key.setdefault(msg[1], []).append((i, msg))

    async def every() -> None:
        await asyncio.gather(*(rollout(items) for items in by_key.values()))

    loop = state.get("loop") or state.setdefault("loop", asyncio.new_event_loop())
    loop.run_until_complete(every())
    conn.send(("done",))


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


async def maybe_awaited(value):
    """`value`, awaited where it is awaitable (an async method's), as it is otherwise (a plain one's): what a
    concurrent handler calls a user's method through."""
    import inspect

    return await value if inspect.isawaitable(value) else value


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
    """One worker process and its pipe; a batch that passes the time limit, or a process that dies, restarts it
    (the keys it held are lost)."""

    def __init__(self, named: dict[str, str], handler, concurrent, ctx, what: str) -> None:
        self.named, self.handler, self.concurrent, self.ctx, self.what = named, handler, concurrent, ctx, what
        self.keys: set[int] = set()
        self._start()

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        args = (child, self.handler, self.concurrent, self.named, list(sys.path))
        self.proc = self.ctx.Process(target=_serve, args=args, daemon=True)
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

    def _restart(self) -> set[int]:
        """A fresh process; the keys the old one held (lost)."""
        lost, self.keys = self.keys, set()
        self.stop(kill=True)
        self._start()
        return lost

    def ask_batch(self, msgs: list[tuple], timeout_s: float) -> tuple[list[tuple[str, object]], set[int]]:
        """((status, value) of each request, keys lost) of a batch (`_serve_batch`). A process that sends no
        reply within a time limit (a call blocking its event loop) or dies is replaced: the first request of
        each rollout left unanswered gets the timeout or the failure, its later ones are lost."""
        out: list = [None] * len(msgs)
        try:
            self.conn.send((BATCH, msgs, timeout_s))
            while True:
                if not self.conn.poll(timeout_s + MARGIN_S):
                    status, value = "timeout", f"timed out after {timeout_s:g} s"
                    break
                got = self.conn.recv()
                if got[0] == "done":
                    return out, set()
                out[got[0]] = got[1:]
        except (EOFError, OSError):
            status, value = "error", f"the process of {self.what} failed"
        seen: set[int] = set()
        for i, msg in enumerate(msgs):
            if out[i] is None:
                out[i] = (status, value) if msg[1] not in seen else ("error", LOST)
                seen.add(msg[1])
        return out, self._restart()

    def stop(self, kill: bool = False) -> None:
        if not kill:
            try:
                self.conn.send(("stop",))
            except OSError:
                pass
            self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


class InstancePool:
    """`workers` processes serving the handlers `handler` ("start") and `concurrent` (every request, a coroutine
    function) for the classes `named` ({name: spec}), each request under `timeout_s`; `what` names the setting
    in errors. Create once per engine; `close` stops the processes."""

    def __init__(self, named: dict[str, str], handler, concurrent, workers: int = 4, timeout_s: float = 5.0,
                 what: str = "rollout.tools.environment") -> None:  # fmt: skip
        self.named, self.handler, self.concurrent, self.what = named, handler, concurrent, what
        self.workers, self.timeout_s = workers, float(timeout_s)
        self._pool: list[_Worker] | None = None
        self._keys = itertools.count()
        self.lost: set[int] = set()

    def _workers(self) -> list[_Worker]:
        if self._pool is None:
            import multiprocessing

            ctx = multiprocessing.get_context("forkserver")
            self._pool = [_Worker(self.named, self.handler, self.concurrent, ctx, self.what)
                          for _ in range(self.workers)]  # fmt: skip
        return self._pool

    def new_keys(self, count: int) -> list[int]:
        return [next(self._keys) for _ in range(count)]

    def ask(self, requests: list[tuple]) -> list[tuple[str, object]]:
        """(status, value) of each request (op, key, ...): each process's at once (each rollout's in order, the
        rollouts' side by side), the processes side by side."""
        pool = self._workers()
        out: list = [None] * len(requests)

        def serve(w: int) -> None:
            mine = [i for i, msg in enumerate(requests) if msg[1] % len(pool) == w]
            todo = [i for i in mine if requests[i][1] not in self.lost]
            for i in set(mine) - set(todo):
                out[i] = ("error", LOST)
            pool[w].keys |= {requests[i][1] for i in todo if requests[i][0] == STARTS}
            if todo:
                replies, lost = pool[w].ask_batch([requests[i] for i in todo], self.timeout_s)
                self.lost |= lost
                for i, reply in zip(todo, replies):
                    out[i] = reply

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
