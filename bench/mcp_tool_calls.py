"""The cost of MCP servers' tools (`rollout.tools.mcp_servers`): `--rollouts` x `--calls` calls of a tool that
waits `--io-ms` on a streamable-HTTP MCP server (the tests' server, `tests/mcp_server.py`, threaded, in a
process of its own), through
`rollout.mcp_tools.McpTools` (sessions in worker processes, each call under a time limit, a round's calls sent
at once) against the bare MCP client: one session in this process, each round's calls awaited together.
Ends with one JSON line.

    python bench/mcp_tool_calls.py [--rollouts 64] [--calls 4] [--io-ms 5] [--workers 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path


def bare(url: str, rollouts: int, calls: int, io_ms: int) -> float:
    from contextlib import AsyncExitStack

    from reasonrl.rollout.mcp_tools import _open

    async def run() -> float:
        async with AsyncExitStack() as stack:
            session = await _open(stack, {"url": url, "headers": {"Authorization": "Bearer tok"}})
            t0 = time.perf_counter()
            for _ in range(calls):
                got = await asyncio.gather(
                    *(session.call_tool("slow", {"s": io_ms / 1000}) for _ in range(rollouts))
                )
                assert all(not r.model_dump(by_alias=True)["isError"] for r in got)
            return time.perf_counter() - t0

    return asyncio.run(run())


def through_workers(path: str, rollouts: int, calls: int, io_ms: int, workers: int) -> float:
    from reasonrl.rollout.mcp_tools import McpTools

    tools = McpTools(path, (), workers, 10.0)
    try:
        tools.run([("pid", {})] * workers)  # the processes started and connected (not counted)
        t0 = time.perf_counter()
        for _ in range(calls):
            got = tools.run([("slow", {"s": io_ms / 1000})] * rollouts)
            assert all(status == "success" for _, status in got), [g for g in got if g[1] != "success"][:2]
        return time.perf_counter() - t0
    finally:
        tools.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rollouts", type=int, default=64)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--io-ms", type=int, default=5)
    ap.add_argument("--workers", default="1,2,4")
    args = ap.parse_args()
    import subprocess

    script = Path(__file__).resolve().parents[1] / "tests" / "mcp_server.py"
    server = subprocess.Popen(
        [sys.executable, str(script), "--http", "tok"], stdout=subprocess.PIPE, text=True
    )
    url = server.stdout.readline().strip()  # (a process of its own: the clients here do not slow it)
    path = Path(tempfile.mkdtemp()) / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"bench": {"url": url, "auth_token": "tok"}}}))
    out = {"rollouts": args.rollouts, "calls": args.calls, "io_ms": args.io_ms}
    try:
        base = bare(url, args.rollouts, args.calls, args.io_ms)
        print(f"bare MCP client, one session, each round awaited together: {base * 1e3:.0f} ms")
        out["bare_s"] = base
        for w in map(int, args.workers.split(",")):
            s = through_workers(str(path), args.rollouts, args.calls, args.io_ms, w)
            print(f"rollout.tools.mcp_servers, {w} worker processes: {s * 1e3:.0f} ms ({base / s:.2f}x the bare "
                  f"client's speed)")  # fmt: skip
            out[f"workers_{w}_s"] = s
    finally:
        server.kill()
        server.wait()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
