"""verl's tool classes, as they are (`rollout.tools.verl_config`: the file verl's `multi_turn.tool_config_path`
names, `tools: [{class_name, config: {type: native, ...}, tool_schema}]`). Each tool is made once per worker
process, `cls(config=config, tool_schema=schema)`, as verl makes it; its schema (the file's, or the class's
own `get_openai_tool_schema()`) is in every prompt's tool list, and a Hermes call naming it runs as verl's
tool agent loop runs it: `create(create_kwargs=...)` (the row's `extra_info.tools_kwargs[name].create_kwargs`,
verl's `tools_kwargs`), `execute(instance_id, arguments, agent_data=...)`, `release(instance_id)`. What the
model sees is the response's text (cut at `rollout.tools.max_output_chars`), in the template's tool turn; a
call that raises shows verl's "Error when executing tool: ...".

What the reward is: the routed verifier scores the completion, as verl's reward function does; the step
rewards `execute` returns, summed, are the `environment` reward term (`reward.weights: {environment: w}`),
and a `verl_function` reward function finds them in its `extra_info["tool_rewards"]` (with `turn_scores`,
empty here), where verl puts them. `agent_data` holds `request_id` (the rollout's key), `tools_kwargs`,
`tool_rewards`, `turn_scores`, `metrics` and `extra_fields` (kept across the rollout's calls, verl's place
for a tool's session data); not the messages or the token ids. Classes importing `verl.tools.base_tool`,
`verl.tools.schemas` or `verl.utils.rollout_trace` work without verl installed (stand-ins, below); one
importing more of verl needs verl. MCP tools (`type: mcp`) are refused here, naming their servers file:
`rollout.tools.mcp_servers` runs them (`rollout.mcp_tools`).

Where they live: `rollout.tools.workers` processes (`rollout.instance_pool`), a rollout's calls in its process,
each under `rollout.tools.timeout_s`. The calls of different rollouts run side by side on each process's event
loop, as verl's agent loop runs them (an async tool awaiting a server lets the others go on; a plain one runs
them one after another). An awaited call past the limit is cancelled (that call times out); one that blocks the
loop past it, or kills its process, costs the calls of that process's rollouts and their later calls and
rewards (errors), never the run.

Owns: reading the config file (`tool_specs`), the stand-ins, making the tools (`load_tools`, `describe`),
what a worker does with a request. The extra_info verl's reward functions get: `environments.scored_problem`. Does
not own: the tool loop and the call format (`rollout.tools`), the episodes (`rollout.environments`), the
processes, scoring.
"""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

from reasonrl.rollout.environments import Environments
from reasonrl.rollout.instance_pool import InstancePool, finite_number, maybe_awaited, run_in_loop


class _Model:
    """A small stand-in for the pydantic models of `verl.tools.schemas`: fields by keyword (defaults below),
    nested models from mappings, `model_validate` and `model_dump` (unset and None fields left out on request)."""

    _defaults: dict = {}
    _nested: dict = {}

    def __init__(self, **fields):
        for k, v in self._defaults.items():
            setattr(self, k, v() if callable(v) else v)
        for k, v in fields.items():
            sub = self._nested.get(k)
            setattr(self, k, sub.model_validate(v) if sub is not None and isinstance(v, dict) else v)
        self._set = set(fields)

    @classmethod
    def model_validate(cls, value):
        return value if isinstance(value, cls) else cls(**dict(value))

    def model_dump(self, exclude_unset: bool = False, exclude_none: bool = False, **_) -> dict:
        out = {}
        for k in [*self._defaults, *sorted(self._set - set(self._defaults))]:
            v = getattr(self, k)
            if (exclude_unset and k not in self._set) or (exclude_none and v is None):
                continue
            out[k] = v.model_dump(exclude_unset, exclude_none) if isinstance(v, _Model) else v
        return out


class OpenAIFunctionParametersSchema(_Model):
    _defaults = {"type": "object", "properties": dict, "required": list}


class OpenAIFunctionSchema(_Model):
    _defaults = {"name": None, "description": None,
                 "parameters": lambda: OpenAIFunctionParametersSchema(), "strict": False}  # fmt: skip
    _nested = {"parameters": OpenAIFunctionParametersSchema}


class OpenAIFunctionToolSchema(_Model):
    _defaults = {"type": "function", "function": None}
    _nested = {"function": OpenAIFunctionSchema}


class ToolResponse(_Model):
    _defaults = {"text": None, "image": None, "video": None}

    def is_empty(self) -> bool:
        return not self.text and not self.image and not self.video

    def is_text_only(self) -> bool:
        return bool(self.text) and not self.image and not self.video


class BaseTool:  # verl.tools.base_tool's, for classes written against it
    def __init__(self, config: dict, tool_schema=None):
        self.config = config
        self.tool_schema = tool_schema or self.get_openai_tool_schema()
        if self.tool_schema is None:
            raise ValueError(
                "Tool schema is not set! (the file gives no tool_schema, and the class makes none)"
            )
        self.name = self.tool_schema.function.name

    def get_openai_tool_schema(self):
        return getattr(self, "tool_schema", None)

    async def create(self, instance_id=None, **kwargs):
        from uuid import uuid4

        return (instance_id or str(uuid4())), ToolResponse()

    async def execute(self, instance_id, parameters, **kwargs):
        return ToolResponse(text="Updated the tool state."), 0.0, {}

    async def calc_reward(self, instance_id, **kwargs) -> float:
        return 0.0

    async def release(self, instance_id, **kwargs) -> None:
        return None


def rollout_trace_op(fn):  # verl.utils.rollout_trace's decorator: tracing is not kept here
    return fn


def _stand_ins() -> None:
    from reasonrl.user_code import stand_in

    stand_in("verl.tools.schemas", [OpenAIFunctionParametersSchema, OpenAIFunctionSchema,
                                    OpenAIFunctionToolSchema, ToolResponse])  # fmt: skip
    stand_in("verl.tools.base_tool", [BaseTool])
    stand_in("verl.utils.rollout_trace", [rollout_trace_op])


def tool_specs(path: str) -> list[tuple[str, dict, dict | None]]:
    """(class_name, config, tool_schema or None) of each tool of verl's tool config file; ValueError naming
    the file and the entry."""
    from reasonrl.user_code import listed_in

    items = listed_in(path, "tools", "a verl tool configuration")
    if not isinstance(items, list):
        raise ValueError(f"{path}: no `tools:` list of {{class_name, config, tool_schema}}")
    out = []
    for i, item in enumerate(items):
        cls = item.get("class_name") if isinstance(item, dict) else None
        if not isinstance(cls, str) or "." not in cls:
            raise ValueError(f"{path}: tool {i} has no class_name (module.Class)")
        config, schema = item.get("config") or {}, item.get("tool_schema")
        if not isinstance(config, dict) or not (schema is None or isinstance(schema, dict)):
            raise ValueError(f"{path}: tool {i} ({cls}): config and tool_schema must be mappings")
        kind = str(config.get("type", "native")).lower()
        if kind != "native":
            servers = (item.get("mcp") or {}).get("mcp_servers_config_path", "its servers file")
            raise ValueError(f"{path}: tool {i} ({cls}) is of type {kind}; only native tools run from a verl "
                             f"tool config (MCP servers' tools: rollout.tools.mcp_servers={servers})")  # fmt: skip
        out.append((cls, dict(config), schema))
    return out


def load_tools(path: str) -> dict[str, object]:
    """{name: the tool made from its class, config and schema}, as verl makes them; ValueError naming it."""
    import importlib

    from reasonrl.user_code import load_callable

    _stand_ins()
    schema_cls = importlib.import_module("verl.tools.schemas").OpenAIFunctionToolSchema
    made: dict[str, object] = {}
    for i, (cls, config, schema) in enumerate(tool_specs(path)):
        where = f"{path}: tool {i} ({cls})"
        try:
            tool = load_callable(cls)(config=config, tool_schema=None if schema is None
                                      else schema_cls.model_validate(schema))  # fmt: skip
            name = str(tool.name)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        except Exception as e:  # the user's constructor: its own error, named
            raise ValueError(f"{where}: making it failed ({type(e).__name__}: {e})") from None
        if name in made:
            raise ValueError(f"{where}: the tool name {name!r} twice")
        if not callable(getattr(tool, "execute", None)):
            raise ValueError(f"{where} has no execute")
        made[name] = tool
    return made


@lru_cache(maxsize=4)
def describe(path: str) -> dict[str, dict]:
    """{"": {spec, tools, schemas, reward}}: the tools of the file as one environment every row uses
    (`rollout.environments`' shape); ValueError naming the file and the tool."""
    made = load_tools(path)
    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in made.values()]
    return {"": {"spec": path, "tools": list(made), "schemas": schemas, "reward": True}}


async def _call(tool, arguments: dict, data) -> str:
    """One call as verl's tool agent loop makes it: an instance created, executed, released."""
    create_kwargs = (data.tools_kwargs.get(tool.name) or {}).get("create_kwargs", {})
    instance_id = None
    try:
        got = await maybe_awaited(tool.create(create_kwargs=create_kwargs))
        instance_id = got[0] if isinstance(got, tuple) else got  # (older verl: the id alone)
        reply = await maybe_awaited(tool.execute(instance_id, arguments, agent_data=data))
        if not isinstance(reply, (tuple, list)) or len(reply) < 2:
            raise ValueError(f"execute returned {reply!r}, not (response, reward, metrics)")
    finally:
        if instance_id is not None:
            await maybe_awaited(tool.release(instance_id))
    if reply[1] is not None:
        data.tool_rewards.append(finite_number(reply[1], "execute returned the tool reward"))
    text = getattr(reply[0], "text", reply[0])  # a ToolResponse, or (older verl) the text
    return "" if text is None else str(text)


def _handle(op: str, key: int, args: list, named: dict, state: dict):
    """A request in a worker process (`rollout.instance_pool`): "start" makes the tools, once; the others
    run on the process's event loop (`_handle_async`)."""
    if op == "start":
        state["tools"] = load_tools(named[""])
        return None
    return run_in_loop(state, _handle_async(op, key, args, named, state))


async def _handle_async(op: str, key: int, args: list, named: dict, state: dict):  # noqa: ARG001 - the pool's
    """One request: each rollout's `agent_data` by key; the pool runs the requests of different rollouts side
    by side (an async tool awaiting a server lets the others go on, as verl's agent loop runs them)."""
    live = state.setdefault("live", {})
    if op == "reset":
        kwargs = args[1].get("tools_kwargs") or {}
        if not isinstance(kwargs, dict) or not all(isinstance(v, dict) for v in kwargs.values()):
            raise ValueError(f"its tools_kwargs is {kwargs!r}, not {{tool name: {{create_kwargs: {{...}}}}}}")
        live[key] = SimpleNamespace(request_id=str(key), tools_kwargs=kwargs, tool_rewards=[], turn_scores=[],
                                    metrics={}, extra_fields={})  # fmt: skip
        return None
    data = live[key]
    if op == "call":
        method, arguments = args
        tool = state["tools"].get(method)
        if tool is None:
            raise ValueError(f"there is no tool named {method!r}")
        return await _call(tool, arguments, data)
    if op == "reward":
        return list(data.tool_rewards)
    if op == "end":
        del live[key]
        return None
    raise ValueError(f"unknown request {op!r}")


class VerlTools(Environments):
    """The tools of verl's config file `path` in `workers` processes, run as `rollout.environments` runs
    environments (one that every row uses); ValueError when they do not load."""

    trl_environments = False  # (TRL reward functions taking environments= are refused with them at load)

    def __init__(self, path: str, workers: int = 4, timeout_s: float = 5.0) -> None:
        self.described = describe(path)
        InstancePool.__init__(
            self, {"": path}, _handle, _handle_async, workers, timeout_s, "rollout.tools.verl_config"
        )

    @staticmethod
    def shown_error(text: str) -> str:
        return f"Error when executing tool: {text}"  # (verl's words)
