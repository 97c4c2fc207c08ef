"""Python functions as tools (`rollout.tools.functions`; TRL's `GRPOTrainer(tools=[...])`): the model calls
a function by name with JSON arguments (a Hermes `<tool_call>`), the function runs, and what it returns
joins the completion as the tool's output.

Owns: loading the functions (`load_tools`: import paths `my_tools.get_weather` with the working directory
on `sys.path`, or files `path.py:name`, named as TRL names them, by `__name__`), their schemas for the chat
template (`tool_schemas`: transformers' `get_json_schema`, which TRL's tools go through too: the type hints
and the docstring's `Args:` give the parameters, so a function without them is refused at load) and their
place in the prompts' template arguments (`with_function_schemas`), the checks of `rollout.tools.functions`
(`check_functions`), and running calls (`FunctionTools`). Does not own: the multi-turn loop, the call format
or the loss mask (`rollout.tools`), the sandbox (`rewards.sandbox`, where the model's own code runs).

Where calls run: a pool of worker processes (pebble), each call under `rollout.tools.timeout_s` (a call past
it is killed with its worker, which is replaced); the functions are the user's code, trusted like a reward
function, so not in the sandbox (a weather API needs the network), but their arguments are the model's,
so a call that hangs or crashes the worker costs one call, never the run. What the model sees, as TRL shows
it: `str(result)`, or `{'error': '...'}` when the function raises (status "error"), the arguments do not
fit it, or no function has that name; `{'error': 'timed out after N s'}` past the limit (status "timeout").
A coroutine function is run to its end.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from reasonrl.user_code import awaited, load_callable


def load_tools(specs: list[str]) -> dict[str, Any]:
    """{name: function} of `specs`; ValueError naming a spec that does not load or a name given twice."""
    out: dict[str, Any] = {}
    for spec in specs:
        fn = load_callable(str(spec))
        name = getattr(fn, "__name__", "")
        if not name or name == "<lambda>":
            raise ValueError(
                f"tool {spec!r} has no name (a function defined with def: its name is the tool's)"
            )
        if name in out:
            raise ValueError(f"two tools are named {name!r} ({spec!r} and another)")
        out[name] = fn
    return out


def tool_schemas(specs: list[str]) -> list[dict]:
    """The JSON schema of each function, as the chat template gets it (`tools=`); ValueError naming the
    function whose type hints or docstring do not describe it."""
    from transformers.utils import get_json_schema

    out = []
    for name, fn in load_tools(specs).items():
        try:
            out.append(get_json_schema(fn))
        except Exception as e:  # transformers' own: a parameter without a type hint or an Args: line
            raise ValueError(f"tool {name!r}: no schema from its type hints and docstring ({e})") from None
    return out


def run_call(spec: str, arguments: dict) -> tuple[str, str]:
    """(what the model sees, status) of one call, in a worker: TRL's `str(result)` or `{'error': ...}`."""
    try:
        fn = load_callable(spec)
        inspect.signature(fn).bind(**arguments)  # arguments that do not fit: the model's mistake, named
        got = awaited(fn(**arguments))  # (an async function: run to its end)
    except Exception as e:  # noqa: BLE001 - the model's call, or the function, failed: the model reads why
        return str({"error": f"{type(e).__name__}: {e}" if isinstance(e, TypeError) else str(e)}), "error"
    return str(got), "success"


def _init_worker(path: list[str]) -> None:
    import sys

    sys.path[:] = path


class FunctionTools:
    """The functions of `rollout.tools.functions`, called in a pool of `workers` processes, each call under
    `timeout_s`. Create once per engine; `close` stops the workers."""

    def __init__(self, specs: list[str], workers: int = 4, timeout_s: float = 5.0) -> None:
        self.specs = {name: spec for name, spec in zip(load_tools(specs), specs)}
        self.workers, self.timeout_s = workers, float(timeout_s)
        self._pool = None

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def _process_pool(self):
        if self._pool is None or not self._pool.active:
            import multiprocessing
            import sys

            from pebble import ProcessPool

            self._pool = ProcessPool(max_workers=self.workers, initializer=_init_worker, initargs=(list(sys.path),),
                                     context=multiprocessing.get_context("forkserver"))  # fmt: skip
        return self._pool

    def run(self, calls: list[tuple[str, Any]]) -> list[tuple[str, str]]:
        """(output, status) of each (name, arguments) call, side by side."""
        from concurrent.futures import TimeoutError as Timeout

        if not calls:
            return []
        pool = self._process_pool()
        futures = []
        for name, args in calls:
            if not isinstance(args, dict):
                futures.append(
                    str({"error": f"the arguments must be a JSON object, got {json.dumps(args)[:80]}"})
                )
            else:
                futures.append(pool.schedule(run_call, args=(self.specs[name], args), timeout=self.timeout_s))
        out = []
        for f in futures:
            if isinstance(f, str):
                out.append((f, "invalid"))
                continue
            try:
                out.append(f.result())
            except Timeout:
                out.append((str({"error": f"timed out after {self.timeout_s:g} s"}), "timeout"))
            except Exception as e:  # noqa: BLE001 - the worker died (os._exit, a segfault): one call's loss
                out.append((str({"error": f"the tool's process failed ({type(e).__name__})"}), "error"))
        return out

    def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.stop()
            try:
                pool.join(timeout=10)
            except TimeoutError:  # (a worker that would not stop: pebble kills it on exit)
                pass


def check_functions(tools) -> None:
    """`rollout.tools.functions`: hermes calls (which name their tool), each function loads and has a schema,
    and no name is taken twice; ConfigError naming the key."""
    from reasonrl.config import ConfigError
    from reasonrl.rollout.tool_formats import TOOL_ALIASES, TOOLS, check_named_calls

    check_named_calls("functions", tools.format)
    try:
        taken = set(load_tools(list(tools.functions))) & {*TOOLS, *TOOL_ALIASES}
        if taken:
            raise ValueError(f"a function is named {sorted(taken)[0]!r}, a built-in tool's name")
        tool_schemas(list(tools.functions))
    except ValueError as e:
        raise ConfigError(f"rollout.tools.functions: {e}") from None


def with_function_schemas(template_kwargs: dict, tools) -> dict:
    """`template_kwargs` (data.chat_template_kwargs) whose `tools` also hold the schemas of
    `rollout.tools.functions` and of the MCP servers' tools (TRL renders every prompt with its tools' schemas;
    one already listed by name is left as it is)."""
    if not (tools.enabled and (tools.functions or tools.mcp_servers is not None)):
        return template_kwargs

    listed = list(template_kwargs.get("tools") or [])
    schemas = tool_schemas(list(tools.functions))
    if tools.mcp_servers is not None:  # (and the MCP servers' tools: rollout.mcp_tools)
        from reasonrl.rollout.mcp_tools import describe

        schemas += [schema for _, schema in describe(str(tools.mcp_servers), tuple(tools.mcp_tools)).values()]
    joined = with_schemas(listed, schemas)
    return {**template_kwargs, "tools": joined} if len(joined) > len(listed) else template_kwargs


def with_schemas(listed: list, schemas: list[dict]) -> list:
    """A template's `tools` list `listed` and then each of `schemas` it does not list by name."""
    names = {(t.get("function") or {}).get("name") for t in listed if isinstance(t, dict)}
    return list(listed) + [t for t in schemas if t["function"]["name"] not in names]
