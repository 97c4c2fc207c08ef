"""The checks of the recipe's `rollout.tools`, before a run loads its model: `check_tools` (the settings, a
ConfigError naming the key that is wrong) and `probe_tools` (each tool works: the sandbox runs a test
program, the search service answers a test query, the functions and environments load).

Owns: those checks. Does not own: the tool loop (`rollout.tools`), the functions (`rollout.function_tools`),
the environments (`rollout.environments`), the search service's API (`rollout.search_tool`).
"""

from __future__ import annotations

from dataclasses import replace

from reasonrl.rollout.tool_formats import AUTO, TOOL_FORMATS, TOOLS, answers_several, check_named_calls
from reasonrl.rollout.tools import ToolRolloutEngine, cell_program


def probe_tools(tools) -> str:
    """A line per tool saying it works (the sandbox runs a test program; the search service answers a
    test query), or ConfigError naming `rollout.tools` and why not, before a run loads its model."""
    from reasonrl.config import ConfigError

    lines = []
    if "python" in tools.names:
        lines.append(_probe_sandbox(tools))
    if "search" in tools.names:
        from reasonrl.rollout.search_tool import probe

        try:
            lines.append(probe(tools.search))
        except ValueError as e:
            raise ConfigError(f"{e}; no model was loaded") from None
    if tools.functions:  # (loaded and described when the recipe was read: rollout.function_tools)
        lines.append(f"rollout.tools: the functions {', '.join(map(str, tools.functions))}")
    if tools.environment is not None:  # (one instance of each made here, as TRL probes them)
        from reasonrl.rollout.environments import describe

        try:
            described = describe(tools.environment)
        except ValueError as e:
            raise ConfigError(f"rollout.tools.environment: {e}") from None
        for d in described.values():
            reward = ", get_reward" if d["reward"] else ""
            lines.append(f"rollout.tools: the environment {d['spec']} ({', '.join(d['tools'])}{reward})")
    if tools.mcp_servers is not None:  # (started and listed when the recipe was read: rollout.mcp_tools)
        from reasonrl.rollout.mcp_tools import describe as describe_mcp

        listed = describe_mcp(str(tools.mcp_servers), tuple(tools.mcp_tools))
        lines.append(f"rollout.tools: the MCP tools of {tools.mcp_servers} ({', '.join(listed)})")
    if tools.verl_config is not None:
        from reasonrl.rollout.verl_tools import describe as describe_verl

        try:
            named = describe_verl(tools.verl_config)[""]["tools"]
        except ValueError as e:
            raise ConfigError(f"rollout.tools.verl_config: {e}") from None
        lines.append(f"rollout.tools: verl's tools of {tools.verl_config} ({', '.join(named)})")
    return "\n".join(lines)


def _probe_sandbox(tools) -> str:
    from reasonrl.config import ConfigError
    from reasonrl.rewards.sandbox import ENV_VAR, SandboxUnavailable
    from reasonrl.rewards.sandbox.process import isolation_mode

    try:
        probe = ToolRolloutEngine(
            None,
            None,
            replace(
                tools,
                turn="format",
                functions=[],
                environment=None,
                verl_config=None,
                mcp_servers=None,
                format="markdown" if tools.format == AUTO else tools.format,
            ),  # (no model: no template yet)
        )
        ((text, status),) = probe._run([cell_program(["print(6 * 7)"])])
    except SandboxUnavailable as e:
        raise ConfigError(f"rollout.tools: {e}") from None
    if (text, status) != ("42", "success"):
        raise ConfigError(f"rollout.tools: the sandbox did not run a test program ({status}: {text!r}); "
                          f"{ENV_VAR}=unisolated runs model code without isolation")  # fmt: skip
    return f"rollout.tools: the {isolation_mode()} sandbox runs the programs completions write"


def check_format(tools) -> None:
    """ConfigError where the settings do not fit the format (`rollout.tools.format`, resolved where it is auto)."""
    from reasonrl.config import ConfigError

    fmt = TOOL_FORMATS.get(tools.format)
    if tools.turn == "chat_template" and fmt.results is not None:
        raise ConfigError(f"rollout.tools.turn=chat_template: format {tools.format}'s results turn follows each call "
                          "(its id, its tool), as the format writes it; use turn: format")  # fmt: skip
    if tools.turn == "chat_template" and not fmt.template_turn:
        raise ConfigError(f"rollout.tools.turn=chat_template: the model's template closes format {tools.format}'s "
                          "calls as part of the message holding them, so its tool turn after a plain message is not "
                          "the format's; use turn: format (the template's own turn, as tests check)")  # fmt: skip
    if tools.parallel_calls > 1 and not fmt.several:
        raise ConfigError(f"rollout.tools.parallel_calls={tools.parallel_calls}: format {tools.format} writes each call "
                          "as a message of its own, answered one at a time; use parallel_calls: 1")  # fmt: skip
    if tools.parallel_calls > 1 and not answers_several(fmt, tools.turn):
        raise ConfigError(f"rollout.tools.parallel_calls={tools.parallel_calls}: format {tools.format} answers one "
                          "call at a time (it gives no `between` for two outputs); use turn: chat_template")  # fmt: skip
    names = list(tools.names)
    if fmt.tool and fmt.tool not in names:
        raise ConfigError(f"rollout.tools.format={tools.format} calls the {fmt.tool} tool, which rollout.tools.names "
                          f"({', '.join(names)}) does not hold")  # fmt: skip


def check_tools(tools, max_new_tokens: int) -> None:
    """ConfigError naming the `rollout.tools` key that is wrong."""
    from reasonrl.config import ConfigError

    if not tools.enabled:
        return
    if tools.format != AUTO and tools.format not in TOOL_FORMATS.names():
        raise ConfigError(f"rollout.tools.format={tools.format!r} is not one of {', '.join(TOOL_FORMATS.names())} "
                          f"or {AUTO}")  # fmt: skip
    if tools.turn not in ("format", "chat_template"):
        raise ConfigError(f"rollout.tools.turn must be format or chat_template, got {tools.turn!r}")
    for key in ("max_calls", "parallel_calls", "workers", "memory_mb", "max_output_chars"):
        if getattr(tools, key) < 1:
            raise ConfigError(f"rollout.tools.{key} must be >= 1, got {getattr(tools, key)}")
    if tools.timeout_s <= 0:
        raise ConfigError(f"rollout.tools.timeout_s must be > 0, got {tools.timeout_s}")
    if max_new_tokens < 2:
        raise ConfigError("rollout.tools needs rollout.max_new_tokens >= 2 (a call and its output)")
    names = list(tools.names)
    if tools.functions:
        from reasonrl.rollout.function_tools import check_functions

        check_functions(tools)
    from reasonrl.rollout.mcp_tools import check_mcp

    check_mcp(tools)
    for key in ("environment", "verl_config"):
        if getattr(tools, key) is not None:
            check_named_calls(key, tools.format)
    if tools.parallel_calls > 1:
        check_named_calls("parallel_calls", tools.format)
    if tools.environment is not None and tools.verl_config is not None:
        raise ConfigError("rollout.tools: set environment (TRL's) or verl_config (verl's tools), not both")
    if (
        (
            not names
            and not tools.functions
            and tools.environment is None
            and tools.verl_config is None
            and tools.mcp_servers is None
        )
        or any(n not in TOOLS for n in names)
        or len(set(names)) != len(names)
    ):
        raise ConfigError(f"rollout.tools.names must name each of its tools once, from {', '.join(TOOLS)}; "
                          f"got {names}")  # fmt: skip
    if tools.format != AUTO:  # (auto: checked once the model's template says which, `check_format`)
        check_format(tools)
    if "search" in names:
        s = tools.search
        if not s.url:
            raise ConfigError("rollout.tools.names holds search: set rollout.tools.search.url (the retrieval "
                              "service, Search-R1's API)")  # fmt: skip
        if s.topk < 1 or s.retries < 0 or s.timeout_s <= 0:
            raise ConfigError(f"rollout.tools.search: topk >= 1, retries >= 0 and timeout_s > 0; got topk={s.topk}, "
                              f"retries={s.retries}, timeout_s={s.timeout_s}")  # fmt: skip
