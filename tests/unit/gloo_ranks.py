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

import socket
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
    results = sorted((out.get(timeout=timeout) for _ in procs), key=lambda x: x[0])
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0, p.exitcode
    return results
