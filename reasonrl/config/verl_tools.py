"""verl's multi-turn tool calls as `rollout.tools`, and its interactions as `rollout.interaction`.

Owns: reading `actor_rollout_ref.rollout.multi_turn.*` (enable, format, turns, parallel calls, response length)
and, where the script's `tool_config_path` names a file that is here (as given, or beside the script), verl's
tool configuration: its `SearchTool` becomes the search tool (`retrieval_service_url`, `topk`, `timeout`), its
`SandboxFusionTool` the sandboxed Python interpreter (`default_timeout`, `memory_limit_mb`; the code runs
in reasonrl's sandbox, not on the SandboxFusion server), verl's other tools a note; a file of the user's own
classes alone runs as it is (`rollout.tools.verl_config`); `interaction_config_path`
(its Gsm8kInteraction: the verifier's feedback; other classes: run as they are, `verl_config`) with the
turn limits. Does not own: the rest of a verl
script (`config.from_verl`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reasonrl.config.foreign import Converted

MT = "actor_rollout_ref.rollout.multi_turn."


def verl_tools(take, out: Converted, base: Path | None = None) -> None:
    """verl's multi-turn settings -> rollout.tools and rollout.interaction (module docstring)."""
    enabled, tool_cfg = take(MT + "enable"), take(MT + "tool_config_path")
    fmt, turns, chars = (
        take(MT + "format", "hermes"),
        take(MT + "max_assistant_turns"),
        take(MT + "max_tool_response_length"),
    )
    if (inter := take(MT + "interaction_config_path")) is not None:
        verl_interaction(str(inter), turns, take(MT + "max_user_turns"), out, base)
        if not tool_cfg:  # the turns are the interaction's: no tool
            return
    if not (enabled or tool_cfg):
        return
    out.set("rollout.tools.enabled", True)
    fmt = "hermes" if fmt == "qwen" else fmt  # (verl's earlier name for Qwen's <tool_call> format)
    if fmt == "hermes":  # verl's default: <tool_call> JSON in Qwen's chat turns, as reasonrl's "hermes"
        out.set("rollout.tools.format", "hermes")
        out.set("rollout.tools.turn", "chat_template")  # verl renders tool messages with the chat template
    parallel = int(take(MT + "max_parallel_calls", 1) or 1)  # (verl: the calls run from one assistant turn)
    if (
        parallel > 1
    ):  # (verl runs them side by side, reasonrl in turn: the same where the calls share no state)
        out.set("rollout.tools.parallel_calls", parallel)
    if turns is not None:  # k turns of calls take k + 1 assistant turns
        out.set("rollout.tools.max_calls", max(int(turns) - 1, 1) * parallel)
    if chars is not None:  # verl counts the response's tokens, reasonrl its characters (~4 per token)
        out.set("rollout.tools.max_output_chars", 4 * int(chars))
    path = _here(str(tool_cfg), base) if tool_cfg else None
    read = _read_tools(path, out) if path is not None else []
    how = "hermes: <tool_call>s naming their tool" if fmt == "hermes" else "markdown"
    if read:
        # (the schemas of verl's tool classes and of MCP tools join the prompts by themselves)
        described = all("verl_config" in r or "mcp_servers" in r for r in read)
        out.notes.append(f"{MT}tool_config_path={tool_cfg}: {', '.join(read)} (rollout.tools, format {how})"
                         + ("" if described else "; the prompts must describe the tools to the model "
                            "(docs/rollouts.md)"))  # fmt: skip
        return
    out.notes.append(
        f"{MT}enable / tool_config_path: the code completions write runs in reasonrl's sandbox (rollout.tools, "
        f"format {'hermes: a <tool_call> whose arguments hold the code' if fmt == 'hermes' else 'markdown'})"
        + (
            f"; the tools of {tool_cfg} are not read (no such file here: a search tool would be rollout.tools."
            f"names [search] and rollout.tools.search.url, its retrieval_service_url)"
            if tool_cfg and path is None
            else ""
        )  # fmt: skip
        + ": the prompts must describe the Python tool to the model (docs/rollouts.md)"
    )


def _here(name: str, base: Path | None) -> Path | None:
    """The configuration file `name` names, as given or beside the script (a path starting with a shell
    variable: its tail under one of the script's directories); None if it is not here."""
    from reasonrl.config.verl_hydra import candidates

    return next((p for p in candidates(name, base) if p.is_file()), None)


def verl_interaction(path: str, assistant: Any, user: Any, out: Converted, base: Path | None) -> None:
    """verl's interaction (`multi_turn.interaction_config_path`) -> rollout.interaction: its Gsm8kInteraction
    is the verifier's feedback ("incorrect, try again" until right), other classes run as they are
    (`rollout.interaction.verl_config`); attempts from max_assistant_turns and max_user_turns (each feedback
    is a user turn)."""
    import yaml

    out.set("rollout.interaction.enabled", True)
    limits = [int(assistant)] if assistant else []
    limits += [int(user) + 1] if user else []
    if limits:
        out.set("rollout.interaction.max_turns", max(min(limits), 2))
    else:
        out.set("rollout.interaction.max_turns", 4)
        out.notes.append(f"{MT}max_assistant_turns / max_user_turns unset (verl: attempts until the response "
                         "length) -> rollout.interaction.max_turns=4")  # fmt: skip
    out.notes.append(f"{MT}interaction_config_path -> rollout.interaction: verl scores the last attempt undiscounted; "
                     "reasonrl's reward is x rollout.interaction.decay=0.5 per retry (1.0: verl's), so that guessing "
                     "until the feedback stops does not pay (docs/rollouts.md)")  # fmt: skip
    file = _here(path, base)
    if file is None:
        out.notes.append(f"{MT}interaction_config_path={path}: not here; rollout.interaction gives the verifier's "
                         "feedback (verl's Gsm8kInteraction's)")  # fmt: skip
        return
    try:
        items = (yaml.safe_load(file.read_text(encoding="utf-8")) or {}).get("interaction") or []
    except (yaml.YAMLError, AttributeError) as e:
        out.notes.append(f"{file}: not a verl interaction configuration ({str(e).splitlines()[0]}); not read")
        return
    classes = [str(item.get("class_name", "")).rsplit(".", 1)[-1] if isinstance(item, dict) else "?"
               for item in (items if isinstance(items, list) else [])]  # fmt: skip
    others = [c for c in classes if c != "Gsm8kInteraction"]
    if others:  # run as they are; the built-in feedback is Gsm8kInteraction's alone
        out.set("rollout.interaction.verl_config", str(file))
        out.notes.append(f"{file}: interaction {', '.join(others)} runs as it is (rollout.interaction.verl_config; its "
                         "turn scores are the environment reward term; a class of verl's own package needs verl "
                         "installed)")  # fmt: skip


def _read_tools(path: Path, out: Converted) -> list[str]:
    """Set rollout.tools from verl's tool configuration at `path`; what was read, one phrase per tool."""
    import yaml

    try:
        tools = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("tools") or []
    except (yaml.YAMLError, AttributeError) as e:
        out.notes.append(f"{path}: not a verl tool configuration ({str(e).splitlines()[0]}); not read")
        return []
    names: list[str] = []
    read: list[str] = []
    tools = [t for t in tools if not _mcp_entry(t, path, out, read)] if isinstance(tools, list) else tools
    listed = (
        [str(t.get("class_name", "")) for t in tools if isinstance(t, dict)]
        if isinstance(tools, list)
        else []
    )
    own = [c for c in listed if "." in c and not c.startswith("verl.")]  # the user's classes: run as they are
    if own and len(own) == len(listed) and not read:  # (with MCP tools beside them: noted below)
        out.set("rollout.tools.verl_config", str(path))
        out.set("rollout.tools.names", [])
        return [f"{', '.join(c.rsplit('.', 1)[-1] for c in own)} run as they are (rollout.tools.verl_config; "
                "their step rewards reach a verl_function reward function as extra_info['tool_rewards'], and the "
                "environment term, reward.weights: {environment: w}, sums them)"]  # fmt: skip
    if own:
        out.notes.append(f"{path}: {', '.join(own)} beside other tools: left out (rollout.tools.verl_config "
                         "runs a file of your classes alone: list them in a file of their own)")  # fmt: skip
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and str(tool.get("class_name", "")) in own:
            continue
        cls = str(tool.get("class_name", "")).rsplit(".", 1)[-1] if isinstance(tool, dict) else ""
        cfg: dict[str, Any] = tool.get("config") or {} if isinstance(tool, dict) else {}
        called = ((tool.get("tool_schema") or {}).get("function") or {}).get("name", "?") if cls else "?"
        if cls == "SearchTool" and cfg.get("retrieval_service_url"):
            names.append("search")
            out.set("rollout.tools.search.url", str(cfg["retrieval_service_url"]))
            out.set("rollout.tools.search.topk", int(cfg.get("topk", 3)))
            if "timeout" in cfg:
                out.set("rollout.tools.search.timeout_s", float(cfg["timeout"]))
            read.append(f"{cls} -> the search tool ({cfg['retrieval_service_url']})")
        elif cls == "SandboxFusionTool":
            names.append("python")
            if "default_timeout" in cfg:
                out.set("rollout.tools.timeout_s", float(cfg["default_timeout"]))
            if "memory_limit_mb" in cfg:
                out.set("rollout.tools.memory_mb", int(cfg["memory_limit_mb"]))
            read.append(f"{cls} -> the Python interpreter in reasonrl's sandbox")
        else:
            out.notes.append(f"{path}: tool {cls or '?'} ({called}) has no reasonrl equivalent; left out")
            continue
        if called not in ("search", "python", "code_interpreter"):
            out.notes.append(f"{path}: the model calls {cls} {called!r}; reasonrl's tool is named "
                             f"{names[-1]!r}, and a call naming another tool gets an error")  # fmt: skip
    if names or read:  # (the MCP tools alone: no built-in tool)
        out.set("rollout.tools.names", sorted(set(names), key=names.index))
    return read


def _mcp_entry(tool, path: Path, out: Converted, read: list[str]) -> bool:
    """Whether `tool` is an MCP entry (`config.type: mcp`): its servers file, where it is here (as given or
    beside the tool config), becomes rollout.tools.mcp_servers, its `tool_selected_list` rollout.tools.mcp_tools."""
    if not isinstance(tool, dict) or str((tool.get("config") or {}).get("type", "")).lower() != "mcp":
        return False
    mcp = tool.get("mcp") or {}
    given = str(mcp.get("mcp_servers_config_path", ""))
    file = _here(given, path.parent) if given else None
    if file is None:
        out.notes.append(f"{path}: MCP tool {tool.get('class_name', '?')}: its servers file {given!r} is not here; "
                         "left out (rollout.tools.mcp_servers names one)")  # fmt: skip
        return True
    out.set("rollout.tools.mcp_servers", str(file))
    if mcp.get("tool_selected_list"):
        out.set("rollout.tools.mcp_tools", [str(t) for t in mcp["tool_selected_list"]])
    read.append(f"the MCP servers of {file} -> rollout.tools.mcp_servers (started over stdio, or reached over "
                "streamable HTTP with their auth_token)")  # fmt: skip
    return True
