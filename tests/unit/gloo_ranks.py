"""Helper for tests that run real gloo ranks on CPU: start `n` processes running `target(rank, port,
queue, *args)`, collect one result per rank (sorted by rank; each result's first item is the rank),
and check that every process exited cleanly.

The ranks fork from a forkserver of this helper's own, which imported torch, transformers and the
engines once (`PRELOAD`), instead of every rank importing them afresh as under "spawn" (measured: the
rank tests 165 s -> 36 s; the suite starts over 40 pairs of ranks). A forkserver forks a process that has
only imported modules (no threads, no process group), so each rank starts as clean as a spawned one.
Its own server, not multiprocessing's: that one starts once per process with the preloads of whoever
starts it first, and in a test worker that is usually a verifier pool (`rewards.runner`) preloading
only the verifiers' libraries."""

from __future__ import annotations

import queue
import socket
import time
from multiprocessing import forkserver
from unittest import mock

import torch.multiprocessing as mp

PRELOAD = [
    "torch",
    "torch.distributed.fsdp",
    "transformers",
    "transformers.modeling_utils",
    "reasonrl.engines.fsdp2",
    "reasonrl.engines.single",
    "reasonrl.trainer.step",
]
_SERVER = forkserver.ForkServer()
_SERVER.set_forkserver_preload(PRELOAD)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(target, n: int = 2, *args, timeout: float = 150.0) -> list:
    ctx = mp.get_context("forkserver")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, port, out, *args)) for r in range(n)]
    # a forkserver Process asks the module-level server for its child at start(): this one, here
    with mock.patch.object(forkserver, "connect_to_new_process", _SERVER.connect_to_new_process):
        for p in procs:
            p.start()
    try:
        results = sorted(_results(out, procs, timeout), key=lambda x: x[0])
    except BaseException:  # a failed rank's peers are not left waiting on their next collective
        for p in procs:
            p.kill()
            p.join(timeout=30)
        raise
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0, p.exitcode
    return results


def _results(out, procs, timeout: float) -> list:
    """One result per process; fails as soon as a rank has died (its peers would otherwise wait for
    the whole `timeout`), naming the rank and its exit code."""
    results, deadline = [], time.monotonic() + timeout
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=1.0))
        except queue.Empty:
            dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if dead:
                raise AssertionError(f"rank {dead[0][0]} exited with status {dead[0][1]}") from None
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no result from {len(procs) - len(results)} rank(s) in {timeout} s"
                ) from None
    return results
