"""The cost of verl's tool classes (`rollout.tools.verl_config`): one batch of `--rollouts` rollouts, each making
`--calls` calls (verl's create / execute / release each) and its reward read, through
`rollout.verl_tools.VerlTools` (the tools in worker processes, every call under a time limit) against the same
calls made in this process the way verl's agent loop makes them: every rollout's call of a round awaited
together on one event loop (no limit, no isolation). Two tools: one that costs nothing (what is left is the
processes' messaging) and one that awaits `--io-ms` (a search server, an API). Ends with one JSON line.

    python bench/verl_tool_calls.py [--rollouts 64] [--calls 4] [--io-ms 5] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

TOOLS = """
import asyncio

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse


class Count(BaseTool):
    async def execute(self, instance_id, parameters, **kwargs):
        data = kwargs["agent_data"]
        data.extra_fields["count"] = data.extra_fields.get("count", 0) + 1
        return ToolResponse(text=str(data.extra_fields["count"])), 1.0, {}


class Fetch(BaseTool):
    async def execute(self, instance_id, parameters, **kwargs):
        await asyncio.sleep(parameters["ms"] / 1000)
        return ToolResponse(text="fetched"), 1.0, {}
"""


def _schema(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": name}}


def _config(tmp: Path) -> str:
    import yaml

    tools = [{"class_name": f"bench_verl_tools.{c}", "config": {"type": "native"}, "tool_schema": _schema(c.lower())}
             for c in ("Count", "Fetch")]  # fmt: skip
    (tmp / "tools.yaml").write_text(yaml.safe_dump({"tools": tools}))
    return str(tmp / "tools.yaml")


def in_process(path: str, rollouts: int, calls: int, name: str, io_ms: int) -> float:
    """verl's way: a round's calls awaited together on one loop (`rollout.verl_tools._call` makes each)."""
    from types import SimpleNamespace

    from reasonrl.rollout.verl_tools import load_tools

    tool = load_tools(path)[name]
    data = [SimpleNamespace(tools_kwargs={}, tool_rewards=[], extra_fields={}) for _ in range(rollouts)]

    async def one(d) -> str:
        instance_id, _ = await tool.create()
        response, reward, _ = await tool.execute(instance_id, {"ms": io_ms}, agent_data=d)
        await tool.release(instance_id)
        d.tool_rewards.append(reward)
        return response.text

    async def batch() -> None:
        for _ in range(calls):
            await asyncio.gather(*(one(d) for d in data))

    t0 = time.perf_counter()
    asyncio.run(batch())
    assert all(d.tool_rewards == [1.0] * calls for d in data)
    return time.perf_counter() - t0


def through_workers(path: str, rollouts: int, calls: int, name: str, io_ms: int, workers: int) -> float:
    from reasonrl.rollout.verl_tools import VerlTools

    tools = VerlTools(path, workers, 10.0)
    try:
        tools.end(tools.begin([("", {})] * workers)[0])  # the processes started (not counted)
        t0 = time.perf_counter()
        keys, _ = tools.begin([("", {})] * rollouts)
        for _ in range(calls):
            assert all(s == "ok" for s, _ in tools.ask([("call", k, name, {"ms": io_ms}) for k in keys]))
        rewards = tools.ask([("reward", k) for k in keys])
        tools.end(keys)
        assert rewards == [("ok", [1.0] * calls)] * rollouts
        return time.perf_counter() - t0
    finally:
        tools.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rollouts", type=int, default=64)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--io-ms", type=int, default=5)
    ap.add_argument("--workers", default="1,2,4,8")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "bench_verl_tools.py").write_text(TOOLS)
    sys.path.insert(0, str(tmp))
    path = _config(tmp)
    out = {"rollouts": args.rollouts, "calls": args.calls, "io_ms": args.io_ms}
    for name in ("count", "fetch"):
        base = in_process(path, args.rollouts, args.calls, name, args.io_ms)
        print(f"{name}: in this process, each round awaited together (verl's way): {base * 1e3:.1f} ms")
        out[name] = {"in_process_s": base}
        for w in map(int, args.workers.split(",")):
            s = through_workers(path, args.rollouts, args.calls, name, args.io_ms, w)
            print(f"{name}: {w} worker processes: {s * 1e3:.1f} ms ({s / base:.2f}x the in-process time)")
            out[name][f"workers_{w}_s"] = s
    print(json.dumps(out))


if __name__ == "__main__":
    main()
