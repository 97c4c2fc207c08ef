"""verl's tool configuration files (`multi_turn.tool_config_path`) read where the file is here: its
SearchTool becomes the search tool, its SandboxFusionTool the sandboxed interpreter, anything else a note;
the converted recipe loads, and a Hermes call with verl's tool names reaches the right tool."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reasonrl.config import load_config
from reasonrl.config.foreign import convert

# verl's examples/sglang_multiturn/config/tool_config/{search,sandbox_fusion,gsm8k}_tool_config.yaml, joined
TOOLS = """tools:
  - class_name: verl.tools.search_tool.SearchTool
    config: {retrieval_service_url: http://127.0.0.1:8000/retrieve, num_workers: 120, rate_limit: 120,
             timeout: 30, type: native}
    tool_schema:
      type: function
      function: {name: search, description: Searches the web., parameters: {type: object, properties: {
        query_list: {type: array, item: {type: string}}}, required: [query_list]}}
  - class_name: "verl.tools.sandbox_fusion_tools.SandboxFusionTool"
    config: {sandbox_fusion_url: "https://xxx/run_code", default_timeout: 30, memory_limit_mb: 1024, type: native}
    tool_schema:
      type: function
      function: {name: code_interpreter, description: A tool for executing code., parameters: {type: object,
        properties: {code: {type: string}}, required: [code]}}
  - class_name: verl.tools.gsm8k_tool.Gsm8kTool
    config: {type: native}
    tool_schema: {type: function, function: {name: calc_gsm8k_reward}}
"""
SCRIPT = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=5 "
          "actor_rollout_ref.rollout.multi_turn.enable=True actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2 "
          "actor_rollout_ref.rollout.multi_turn.tool_config_path={path}\n")  # fmt: skip


def test_a_tool_configuration_beside_the_script_is_read(tmp_path):
    (tmp_path / "tool_config").mkdir()
    (tmp_path / "tool_config" / "tools.yaml").write_text(TOOLS)
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(path="tool_config/tools.yaml"))
    out = convert("verl", script)
    tools, notes = out.recipe["rollout"]["tools"], "\n".join(out.notes)
    assert tools["names"] == ["search", "python"] and tools["format"] == "hermes" and tools["max_calls"] == 1
    assert tools["search"] == {"url": "http://127.0.0.1:8000/retrieve", "topk": 3, "timeout_s": 30.0}
    assert (tools["timeout_s"], tools["memory_mb"]) == (30.0, 1024)
    assert "SearchTool -> the search tool (http://127.0.0.1:8000/retrieve)" in notes
    assert "tool Gsm8kTool (calc_gsm8k_reward) has no reasonrl equivalent; left out" in notes
    assert "code_interpreter" not in notes.split("left out")[-1]  # verl's name for the interpreter is known
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    cfg = load_config(recipe)
    assert cfg.rollout.tools.names == ["search", "python"] and cfg.rollout.tools.search.topk == 3


def test_a_file_that_is_not_here_is_noted(tmp_path):
    script = tmp_path / "run.sh"
    for given in ("$CONFIG_PATH/tool_config/search_tool_config.yaml", "elsewhere/tools.yaml"):
        script.write_text(SCRIPT.format(path=given))
        out = convert("verl", script)
        assert "names" not in out.recipe["rollout"]["tools"]
        assert (
            "are not read (no such file here: a search tool would be rollout.tools.names [search]"
            in "\n".join(out.notes)
        )


def test_verls_name_for_the_interpreter_runs_python(tmp_path):
    from test_tool_rollouts import _ALPHABET, Scripted

    from reasonrl.config import SearchToolConfig, ToolsConfig
    from reasonrl.models.tiny import build_tokenizer
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.tools import ToolRolloutEngine

    tok = build_tokenizer([_ALPHABET + " <tool_call> </tool_call> <tool_response> </tool_response>"], 300)
    script = [
        '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}</tool_call>',
        "done",
    ]
    cfg = ToolsConfig(
        enabled=True, format="hermes", names=["python", "search"], search=SearchToolConfig(url="http://x")
    )
    engine = ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok, cfg)
    ((c,),) = engine.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    assert c.tool_calls == ("success",) and "<tool_response>\n42\n</tool_response>" in c.text


OWN = """
from verl.tools.base_tool import BaseTool


class Lookup(BaseTool):
    async def execute(self, instance_id, parameters, **kwargs):
        return "found", 0.0, {}
"""


def test_a_file_of_the_users_own_tool_classes_runs_as_it_is(tmp_path, user_module):
    """A file listing only the user's classes -> rollout.tools.verl_config (the recipe loads, its schemas in
    the prompts); beside verl's own tools, the user's are left out with a note saying why."""
    m = user_module(OWN, "my_lookup")
    schema = {"type": "function", "function": {"name": "lookup", "description": "Look it up."}}
    own = {"class_name": f"{m}.Lookup", "config": {"type": "native"}, "tool_schema": schema}
    (tmp_path / "own.yaml").write_text(yaml.safe_dump({"tools": [own]}))
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(path="own.yaml"))
    out = convert("verl", script)
    tools, notes = out.recipe["rollout"]["tools"], "\n".join(out.notes)
    assert Path(tools["verl_config"]).resolve() == tmp_path / "own.yaml" and tools["names"] == []
    assert "Lookup run as they are (rollout.tools.verl_config" in notes and "must describe" not in notes
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    cfg = load_config(recipe)  # (the class loads, its schema is read, nothing clashes)
    assert cfg.rollout.tools.verl_config == tools["verl_config"]
    mixed = yaml.safe_load(TOOLS)["tools"][:1] + [own]
    (tmp_path / "own.yaml").write_text(yaml.safe_dump({"tools": mixed}))
    out = convert("verl", script)
    tools, notes = out.recipe["rollout"]["tools"], "\n".join(out.notes)
    assert "verl_config" not in tools and tools["names"] == ["search"]
    assert f"{m}.Lookup beside other tools: left out" in notes


def test_an_mcp_entry_names_its_servers_file(tmp_path):
    """verl's MCP entry (`type: mcp`, verl's own example's shape) -> rollout.tools.mcp_servers (the servers file
    beside the tool config) and mcp_tools (its tool_selected_list); the converted recipe loads, the server's
    picked tool in its prompts."""
    pytest.importorskip("mcp")
    from test_mcp_tools import servers_file

    servers = servers_file(tmp_path)
    entry = {"class_name": "verl.tools.mcp_search_tool.MCPSearchTool", "config": {"rate_limit": 120, "timeout": 120,
             "type": "mcp"}, "mcp": {"mcp_servers_config_path": "./servers.json", "tool_selected_list": ["add"]}}  # fmt: skip
    (tmp_path / "mcp_tool_config.yaml").write_text(yaml.safe_dump({"tools": [entry]}))
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(path="mcp_tool_config.yaml"))
    out = convert("verl", script)
    tools, notes = out.recipe["rollout"]["tools"], "\n".join(out.notes)
    assert Path(tools["mcp_servers"]).resolve() == Path(servers) and tools["mcp_tools"] == ["add"]
    assert tools["names"] == [] and "-> rollout.tools.mcp_servers" in notes and "must describe" not in notes
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    cfg = load_config(recipe)
    assert [t["function"]["name"] for t in cfg.data.chat_template_kwargs["tools"]] == ["add"]
    (tmp_path / "servers.json").unlink()
    out = convert("verl", script)
    assert "mcp_servers" not in out.recipe["rollout"]["tools"]
    assert "its servers file './servers.json' is not here; left out" in "\n".join(out.notes)
