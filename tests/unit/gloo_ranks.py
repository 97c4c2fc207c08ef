"""Helper for tests that run real gloo ranks on CPU: start `n` processes running `target(rank, port,
queue, *args)`, collect one result per rank (sorted by rank; each result's first item is the rank),
and check that every process exited cleanly.

The ranks fork from multiprocessing's forkserver, which imports torch, transformers and the engines
once (`PRELOAD`) instead of every rank importing them afresh as under "spawn" (measured: a pair of
ranks ready in ~2.5 s instead of ~7 s, and ~10 s less CPU a pair; the suite starts over 40 pairs).
A forkserver forks a process that has only imported modules (no threads, no process group), so each
rank starts as clean as a spawned one. It starts once per process, with the preloads of whoever
starts it first (here, or a verifier pool's `rewards.runner`); the ranks work either way, since they
import what they use themselves."""

from __future__ import annotations

import socket

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(target, n: int = 2, *args, timeout: float = 150.0) -> list:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # no effect once this process's forkserver runs
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, port, out, *args)) for r in range(n)]
    for p in procs:
        p.start()
    results = sorted((out.get(timeout=timeout) for _ in procs), key=lambda x: x[0])
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0, p.exitcode
    return results
