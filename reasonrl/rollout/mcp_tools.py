"""MCP servers' tools (`rollout.tools.mcp_servers`): the tools of Model Context Protocol servers, called by
name from Hermes calls like any other tool, as verl's MCP tools (`type: mcp`) and agent frameworks call them.

`rollout.tools.mcp_servers` names a JSON or YAML file in the servers format MCP clients share (Claude
Desktop's, verl's `mcp_servers_config_path`): `{"mcpServers": {name: {"command": ..., "args": [...],
"env": {...}, "cwd": ...} or {"url": ..., "headers": {...}}}}` (a server started over stdio, or one reached
over streamable HTTP; verl's `auth_token` is sent as a bearer token). Each server is reached once when the
recipe loads, to list its tools (their names, descriptions and input schemas become the prompts' tool
schemas), and once from each worker process, which keeps its sessions open for the run (a stdio server: one
started per process). `rollout.tools.mcp_tools` picks some of the tools (verl's `tool_selected_list`;
empty: all).

A call is `session.call_tool(name, arguments)`; the model sees the result's text contents joined (an image or
other content as `[image]`; structured content as JSON where there is no text), or, when the server says
the call failed (`isError`), `{'error': ...}` (status `error`), as a function tool's. Every call runs under
`rollout.tools.timeout_s`, the calls of one round side by side in each process (`rollout.instance_pool`'s
concurrent handler): an awaited call past the limit is cancelled, a process that dies is replaced with its
servers. The servers are the user's code, trusted like a reward function (not in the sandbox); their
arguments are the model's. Their outputs are tool tokens: no loss on them, never the model's answer.

Owns: reading the servers file (`servers`), listing the tools (`describe`), the worker processes' sessions
and calls (`McpTools`), and the checks (`check_mcp`). Does not own: the tool loop and the call format
(`rollout.tools`), the processes (`rollout.instance_pool`). The only module importing `mcp` (the optional
extra `mcp`).
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from functools import lru_cache

from reasonrl.rollout.instance_pool import InstancePool

INSTALL = "pip install 'reasonrl[mcp]'"


def servers(path: str) -> dict[str, dict]:
    """{name: {command, args, env, cwd}} of the servers file; ValueError naming the file and the server."""
    from reasonrl.user_code import listed_in

    got = listed_in(path, "mcpServers", "an MCP servers file")  # (YAML reads JSON too)
    if not isinstance(got, dict):
        raise ValueError(
            f'{path}: no "mcpServers" mapping of server name to {{command, args, env}} or {{url}}'
        )
    return {str(name): _server(path, str(name), spec) for name, spec in got.items()}


def _server(path: str, name: str, spec) -> dict:
    """One server's entry: {command, args, env, cwd} (stdio) or {url, headers} (streamable HTTP; verl's
    `auth_token` as a bearer token); ValueError naming it."""
    if isinstance(spec, dict) and (spec.get("url") or spec.get("serverUrl")):
        kind = str(spec.get("type") or spec.get("transport") or "http").lower().replace("_", "-")
        if kind not in ("http", "streamable-http", "streamablehttp"):
            raise ValueError(f"{path}: server {name!r} uses the {kind} transport; URLs are served over streamable "
                             f"HTTP here (MCP's SSE transport is deprecated)")  # fmt: skip
        headers = spec.get("headers") or {}
        if not isinstance(headers, dict):
            raise ValueError(f"{path}: server {name!r}: headers must be a mapping")
        headers = {str(k): str(v) for k, v in headers.items()}
        if spec.get("auth_token"):  # (verl's servers file)
            headers.setdefault("Authorization", f"Bearer {spec['auth_token']}")
        return {"url": str(spec.get("url") or spec["serverUrl"]), "headers": headers}
    if not isinstance(spec, dict) or not isinstance(spec.get("command"), str):
        raise ValueError(f"{path}: server {name!r} has no command (a server started over stdio) or url")
    args, env = spec.get("args") or [], spec.get("env") or {}
    if not isinstance(args, list) or not isinstance(env, dict):
        raise ValueError(f"{path}: server {name!r}: args must be a list and env a mapping")
    return {"command": spec["command"], "args": [str(a) for a in args],
            "env": {str(k): str(v) for k, v in env.items()}, "cwd": spec.get("cwd")}  # fmt: skip


async def _open(stack: AsyncExitStack, spec: dict):
    """An initialized session with the server `spec`, open until `stack` closes."""
    import os

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if "url" in spec:
        streams = await stack.enter_async_context(_http(spec))
    else:
        env = {**os.environ, **spec["env"]} if spec["env"] else None
        params = StdioServerParameters(command=spec["command"], args=spec["args"], env=env, cwd=spec["cwd"])
        streams = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


def _http(spec: dict):
    """The streamable-HTTP transport to `spec["url"]` with its headers (mcp 2's client, or mcp 1's)."""
    from mcp.client import streamable_http

    if hasattr(streamable_http, "streamable_http_client"):
        client = streamable_http.create_mcp_http_client(headers=spec["headers"])
        return streamable_http.streamable_http_client(spec["url"], http_client=client)
    return streamable_http.streamablehttp_client(spec["url"], headers=spec["headers"])


def _schema(tool) -> dict:
    """An MCP tool as the chat template's tool schema (OpenAI's function format)."""
    d = tool.model_dump(by_alias=True)
    params = d.get("inputSchema") or {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": d["name"], "description": d.get("description") or "",
                                             "parameters": params}}  # fmt: skip


async def _listed(path: str) -> dict[str, tuple[str, dict]]:
    """{tool name: (server, schema)} of every server's tools, each server started (or reached) once."""
    named = servers(path)
    found: list[tuple[str, list]] = []
    trying: str | None = None  # the server being started
    try:
        async with AsyncExitStack() as stack:
            for trying, spec in named.items():
                session = await _open(stack, spec)
                found.append((trying, (await session.list_tools()).tools))
            trying = None
    except Exception as e:  # noqa: BLE001 - the user's server (its client's errors come grouped): named
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        if trying is not None:
            raise ValueError(f"{path}: server {trying!r} did not start or list its tools "
                             f"({type(e).__name__}: {e})") from None  # fmt: skip
    out: dict[str, tuple[str, dict]] = {}
    for server, tools in found:
        for tool in tools:
            if tool.name in out:
                raise ValueError(f"{path}: servers {out[tool.name][0]!r} and {server!r} both have a tool "
                                 f"named {tool.name!r}")  # fmt: skip
            out[tool.name] = (server, _schema(tool))
    return out


@lru_cache(maxsize=4)
def describe(path: str, selected: tuple[str, ...] = ()) -> dict[str, tuple[str, dict]]:
    """{tool name: (server, schema)} of the servers' tools (`selected` of them, where given), listed by
    starting each server once; ValueError naming the file, the server or the tool."""
    import asyncio

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ValueError(f"MCP servers need the mcp package: {INSTALL}") from None
    listed = asyncio.run(_listed(path))
    missing = [t for t in selected if t not in listed]
    if missing:
        raise ValueError(f"{path}: no server has the tool {missing[0]!r} (tools: {', '.join(listed)})")
    return {name: listed[name] for name in (selected or listed)}


def _handle(op: str, key: int, args: list, named: dict, state: dict):
    """At "start" (a worker process, before it is ready): its sessions with every server, opened by a task
    that holds them for the process's life on its one event loop; the other requests run there too."""
    import asyncio

    if op != "start":
        from reasonrl.rollout.instance_pool import run_in_loop

        return run_in_loop(state, _handle_async(op, key, args, named, state))
    loop = state.setdefault("loop", asyncio.new_event_loop())
    ready = loop.create_future()

    async def hold() -> None:  # (an MCP client's streams belong to the task that opened them)
        try:
            async with AsyncExitStack() as stack:
                opened = {name: await _open(stack, spec) for name, spec in servers(named[""]).items()}
                server_of = {t.name: name for name, s in opened.items() for t in (await s.list_tools()).tools}
                ready.set_result((opened, server_of))
                await asyncio.Event().wait()  # until the process ends
        except Exception as e:  # noqa: BLE001 - a server that does not start: the process says so
            if not ready.done():
                ready.set_exception(e)

    state["holder"] = loop.create_task(hold())
    state["sessions"], state["server_of"] = loop.run_until_complete(ready)
    return None


async def _handle_async(op: str, key: int, args: list, named: dict, state: dict):  # noqa: ARG001 - the pool's
    """One call: the tool's server's session calls it; its text, or ValueError with the server's error."""
    if op != "call":
        raise ValueError(f"unknown request {op!r}")
    name, arguments = args
    result = await state["sessions"][state["server_of"][name]].call_tool(name, arguments)
    d = result.model_dump(by_alias=True)
    texts = [
        c.get("text", "") if c.get("type") == "text" else f"[{c.get('type')}]" for c in d.get("content") or []
    ]
    text = "\n".join(texts) if texts else json.dumps(d.get("structuredContent"), ensure_ascii=False)
    if d.get("isError"):
        raise ValueError(text or "the tool failed")
    return text


class McpTools(InstancePool):
    """The tools of the servers file `path` (`selected` of them), called in `workers` processes, each holding
    its own sessions; each call under `timeout_s`. Create once per engine; `close` stops the processes (and
    so their servers, whose input ends)."""

    def __init__(self, path: str, selected=(), workers: int = 4, timeout_s: float = 5.0) -> None:
        self.described = describe(path, tuple(selected))
        super().__init__({"": path}, _handle, _handle_async, workers, timeout_s, "rollout.tools.mcp_servers")

    @property
    def names(self) -> list[str]:
        return list(self.described)

    def run(self, calls: list[tuple[str, object]]) -> list[tuple[str, str]]:
        """(output, status) of each (name, arguments) call, side by side."""
        out: list = [None] * len(calls)
        todo = [i for i, (_, a) in enumerate(calls) if isinstance(a, dict)]
        for i in set(range(len(calls))) - set(todo):
            out[i] = (str({"error": f"the arguments must be a JSON object, got {json.dumps(calls[i][1])[:80]}"}),
                      "invalid")  # fmt: skip
        keys = self.new_keys(len(todo))  # (no state: each call a key of its own, spread over the processes)
        replies = self.ask([("call", k, *calls[i]) for k, i in zip(keys, todo)])
        for i, (status, text) in zip(todo, replies):
            out[i] = (text, "success") if status == "ok" else (str({"error": text}), status)
        return out


def check_mcp(tools) -> None:
    """`rollout.tools.mcp_servers`: hermes calls, the servers start and list the tools picked, and no tool
    has another tool's name; ConfigError naming the key."""
    from reasonrl.config import ConfigError
    from reasonrl.rollout.function_tools import load_tools
    from reasonrl.rollout.tool_formats import TOOL_ALIASES, TOOLS, check_named_calls

    if tools.mcp_tools and tools.mcp_servers is None:
        raise ConfigError(
            "rollout.tools.mcp_tools picks tools of rollout.tools.mcp_servers, which is not set"
        )
    if tools.mcp_servers is None:
        return
    check_named_calls("mcp_servers", tools.format)
    try:
        described = describe(str(tools.mcp_servers), tuple(tools.mcp_tools))
    except ValueError as e:
        raise ConfigError(f"rollout.tools.mcp_servers: {e}") from None
    taken = {*TOOLS, *TOOL_ALIASES, *(load_tools(list(tools.functions)) if tools.functions else ())}
    if tools.environment is not None or tools.verl_config is not None:  # their tools are called by name too
        from reasonrl.rollout import environments, verl_tools

        try:
            own = (environments.describe(tools.environment) if tools.environment is not None
                   else verl_tools.describe(tools.verl_config))  # fmt: skip
        except ValueError:  # (named by their own check)
            own = {}
        taken |= {name for d in own.values() for name in d["tools"]}
    clash = sorted(set(described) & taken)
    if clash:
        raise ConfigError(f"rollout.tools.mcp_servers: the tool {clash[0]!r} has the name of another tool "
                          f"(pick others with rollout.tools.mcp_tools)")  # fmt: skip
