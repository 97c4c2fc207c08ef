"""What an eval's rollouts run with, from `reasonrl eval`'s options and, for a run directory or checkpoint,
its recipe: the tools (`--tools`, `--tool-function`, `--tool-environment`, `--tool-verl-config`,
`--tool-mcp-servers`, `--search-url`; rollout.tools),
feedback between attempts (`--interaction`; rollout.interaction) and an OpenRLHF agent (`--agent`;
rollout.agent). Each is checked here, a ConfigError naming the option before any model loads. Does not own:
the features themselves (`rollout`), or the rest of the eval's options (`cli.evaluate`).
"""

from __future__ import annotations


def tool_args(args) -> dict:
    """`--tool-function`s, `--tool-environment`s, `--tool-verl-config` and `--tool-mcp-servers`, as `tools_arg`
    takes them."""
    return {
        "functions": getattr(args, "tool_function", ()),
        "environments": getattr(args, "tool_environment", ()),
        "verl_config": getattr(args, "tool_verl_config", None),
        "mcp_servers": getattr(args, "tool_mcp_servers", None),
    }


def tools_arg(given: str | None, cfg=None, search_url: str | None = None, final: bool = True,
              functions: list[str] = (), environments: list[str] = (), verl_config: str | None = None,
              mcp_servers: str | None = None):  # fmt: skip
    """The tool settings of an eval (`--tools`): the named format, else the run's own `rollout.tools`
    (`cfg`), else None (off); 'off' turns a run's off. `--search-url` adds the search tool (a format
    with a tool of its own, search_r1, calls that one alone); with no tools to add it to, a ConfigError
    (`final`: `cfg` is the run's config, or the model is not a run). `--tool-function`s join the tools' own;
    `--tool-environment` (SPEC, or NAME=SPEC each) is the environment (rollout.tools.environment);
    `--tool-verl-config` verl's tool classes (rollout.tools.verl_config); `--tool-mcp-servers` MCP servers'
    tools (rollout.tools.mcp_servers)."""
    from dataclasses import replace

    from reasonrl.config import ConfigError, ToolsConfig
    from reasonrl.rollout.tool_checks import check_tools, probe_tools
    from reasonrl.rollout.tool_formats import AUTO, TOOL_FORMATS

    if given is None:
        tools = cfg.rollout.tools if cfg is not None and cfg.rollout.tools.enabled else None
    elif given == "off":
        tools = None
    elif given not in TOOL_FORMATS and given != AUTO:
        raise ConfigError(
            f"--tools {given!r} is not a tool format; known: off, {AUTO}, {', '.join(TOOL_FORMATS.names())}"
        )
    else:
        base = cfg.rollout.tools if cfg is not None else ToolsConfig()
        tools = ToolsConfig(**{**vars(base), "enabled": True, "format": given})
        if given != AUTO and (own := TOOL_FORMATS.get(given).tool):
            tools = replace(tools, names=[own])
    if tools is None and search_url and (final or given == "off"):
        raise ConfigError("--search-url: no tools to search with (--tools search_r1 or hermes, or a run with "
                          "rollout.tools)")  # fmt: skip
    flags = {"--tool-function": functions, "--tool-environment": environments, "--tool-verl-config": verl_config,
             "--tool-mcp-servers": mcp_servers}  # fmt: skip
    if any(flags.values()) and tools is None and final:
        flag = next(k for k, v in flags.items() if v)
        raise ConfigError(f"{flag}: no tools to add it to (--tools hermes, or a run with rollout.tools)")
    if functions and tools is not None:
        tools = replace(tools, functions=list(dict.fromkeys([*tools.functions, *functions])))
    if environments and tools is not None:
        named = dict(e.split("=", 1) if "=" in e else ("", e) for e in environments)
        tools = replace(tools, environment=named[""] if list(named) == [""] else named)
    if verl_config and tools is not None:
        tools = replace(tools, verl_config=verl_config, environment=None)
    if mcp_servers and tools is not None:
        tools = replace(tools, mcp_servers=mcp_servers)
    if tools is not None and search_url:
        names = tools.names if "search" in tools.names else [*tools.names, "search"]
        tools = replace(tools, names=names, search=replace(tools.search, url=search_url))
    if tools is not None:
        check_tools(tools, 2)  # (--search-url missing for search_r1: named here)
        # a sandbox or a search service that does not work: an error before the model loads
        probe_tools(tools)
    return tools


def interaction_arg(turns: int | None, cfg=None):
    """`--interaction TURNS`: the run's own rollout.interaction (its message, turn, feedback) or the defaults,
    with TURNS attempts; None without the option (one attempt, even for a run trained with feedback)."""
    from dataclasses import replace

    from reasonrl.config import ConfigError, InteractionConfig

    if turns is None:
        return None
    if turns < 2:
        raise ConfigError(f"--interaction {turns}: the attempts an answer may take, >= 2 (without it: one)")
    own = cfg.rollout.interaction if cfg is not None else InteractionConfig()
    return replace(own, enabled=True, max_turns=turns)


def agent_arg(given: str | None, cfg=None, tools=None):
    """`--agent PATH`: an OpenRLHF agent file (rollout.agent) whose episodes the rollouts are; without it, the
    run's own rollout.agent (`cfg`); 'off' turns a run's off. ConfigError when the file does not load or the
    eval runs tools too (`tools`)."""
    from dataclasses import replace

    from reasonrl.config import AgentConfig, ConfigError

    own = cfg.rollout.agent if cfg is not None and cfg.rollout.agent.path is not None else None
    if given == "off":
        return None
    agent = replace(own or AgentConfig(), path=given) if given else own
    if agent is None:
        return None
    from reasonrl.rollout.agents import agent_class

    try:
        agent_class(agent.path)
    except ValueError as e:
        raise ConfigError(f"--agent: {e}") from None
    if tools is not None:
        raise ConfigError("--agent with tools (--tools, or a run's own rollout.tools): the agent answers each turn "
                          "itself; use --tools off")  # fmt: skip
    return agent
