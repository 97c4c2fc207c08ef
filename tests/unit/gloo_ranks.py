"""Helper for tests that run real gloo ranks on CPU: spawn `n` processes running `target(rank, port,
queue, *args)`, collect one result per rank (sorted by rank; each result's first item is the rank),
and check that every process exited cleanly."""

from __future__ import annotations

import socket

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(target, n: int = 2, *args, timeout: float = 150.0) -> list:
    ctx = mp.get_context("spawn")
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
