"""MCP servers' tools (`rollout.tools.mcp_servers`): a stdio server (written here in plain JSON-RPC, the
protocol and no SDK) is started once to list its tools, whose schemas join every prompt, and once per worker
process, whose session serves the calls of its rollouts side by side; a failed call, a slow one and bad
arguments cost one call; what cannot work is named when the recipe loads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_tool_rollouts import _ALPHABET, Scripted

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.mcp_tools import McpTools, describe
from reasonrl.rollout.tools import ToolRolloutEngine

pytest.importorskip("mcp")
SERVER = str(Path(__file__).parents[1] / "mcp_server.py")  # (run by the tests' MCP clients)


def servers_file(tmp_path, servers: dict | None = None) -> str:
    servers = servers or {"calc": {"command": sys.executable, "args": [SERVER]}}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def test_the_servers_tools_are_listed_with_their_schemas(tmp_path):
    path = servers_file(tmp_path)
    listed = describe(path)
    assert list(listed) == ["add", "fail", "pid", "slow", "answer"]
    server, schema = listed["add"]
    assert server == "calc" and schema == {"type": "function", "function": {
        "name": "add", "description": "Add two numbers.", "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}  # fmt: skip
    assert list(describe(path, ("pid", "add"))) == ["pid", "add"]  # picked, in the order picked


@pytest.fixture
def http_mcp():
    """The URL of a streamable-HTTP MCP server (tests/mcp_server.py's) that wants the bearer token "tok"."""
    sys.path.insert(0, str(Path(SERVER).parent))
    try:
        from mcp_server import http_server
    finally:
        sys.path.remove(str(Path(SERVER).parent))
    url, server = http_server("tok")
    yield url
    server.shutdown()
    server.server_close()


def test_a_server_reached_over_http_serves_its_tools_with_verls_auth_token(tmp_path, http_mcp):
    """verl's servers file shape ({url, auth_token}): the token travels as a bearer token (the server refuses
    requests without it), the tools are listed and called from the worker processes."""
    path = servers_file(tmp_path, {"remote": {"url": http_mcp, "auth_token": "tok"}})
    assert list(describe(path, ("add",))) == ["add"]
    tools = McpTools(path, ("add", "fail"), 2, 5.0)
    try:
        assert tools.run([("add", {"a": 2, "b": 40}), ("fail", {})]) == [
            ("42", "success"), ("{'error': 'the service is down'}", "error")]  # fmt: skip
    finally:
        tools.close()


def test_calls_run_in_each_process_own_session_side_by_side(tmp_path):
    tools = McpTools(servers_file(tmp_path), (), 2, 3.0)
    try:
        got = tools.run([("add", {"a": 2, "b": 3}), ("fail", {}), ("add", [1]), ("pid", {}), ("pid", {})])
        assert got[:3] == [("5", "success"), ("{'error': 'the service is down'}", "error"),
                           ("{'error': 'the arguments must be a JSON object, got [1]'}", "invalid")]  # fmt: skip
        assert got[3][1] == got[4][1] == "success" and got[3][0] != got[4][0]  # two processes, two servers
        slow = tools.run([("slow", {"s": 4}), ("slow", {"s": 0})])
        # the first is cancelled at the limit; the second, on the other process, answers (an image shown as such)
        assert slow == [("{'error': 'timed out after 3 s'}", "timeout"), ("[image]\nslept", "success")]
        # the processes go on (the server, one call at a time, answers once its sleep ends)
        assert tools.run([("add", {"a": 1, "b": 1})] * 2) == [("2", "success")] * 2
    finally:
        tools.close()


def _tokenizer():
    tok = build_tokenizer([_ALPHABET + ' <tool_call> </tool_call> <tool_response> </tool_response> "name": '
                           '"arguments": add answer boxed'], 400)  # fmt: skip
    return tok


def test_a_hermes_call_names_an_mcp_tool_and_its_output_is_no_answer_of_the_models(tmp_path):
    from reasonrl.rewards.runner import RewardRunner
    from reasonrl.rollout.scored import score_groups
    from reasonrl.types import Problem, RolloutGroup

    tok = _tokenizer()
    script = ['<tool_call>{"name": "add", "arguments": {"a": 20, "b": 22}}</tool_call>',
              '<tool_call>{"name": "answer", "arguments": {}}</tool_call>', "So."]  # fmt: skip
    cfg = ToolsConfig(enabled=True, format="hermes", names=["python"], mcp_servers=servers_file(tmp_path),
                      mcp_tools=["add", "answer"])  # fmt: skip
    loop = ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok, cfg)
    unpicked = ['<tool_call>{"name": "pid", "arguments": {}}</tool_call>', "x"]
    other = ToolRolloutEngine(Scripted(tok, unpicked, marker="<tool_response>"), tok, cfg)
    q = [tok("Q", add_special_tokens=False)["input_ids"]]
    try:
        ((c,),) = loop.generate(q, SamplingParams(max_new_tokens=400))
        ((d,),) = other.generate(q, SamplingParams(max_new_tokens=400))
    finally:
        loop.mcp.close()  # (the scripted engines have nothing to close)
        other.mcp.close()
    outputs = [t.split("\n</tool_response>")[0] for t in c.text.split("<tool_response>\n")[1:]]
    assert c.tool_calls == ("success", "success") and outputs == ["42", "it is \\boxed{7}"]
    assert d.tool_calls == ("invalid",) and "no tool named 'pid'" in d.text  # not picked: not a tool here
    g = RolloutGroup(Problem([{"role": "user", "content": "Q"}], "7", "math"), [], [c])
    with RewardRunner(workers=1) as r:
        score_groups([g], tok, r)
    assert g.results[0].correctness == 0.0  # the server wrote \boxed{7}; the model did not


@pytest.mark.parametrize(
    "servers, extra, message",
    [
        (
            None,
            ["rollout.tools.format=markdown"],
            "mcp_servers needs calls that name their tool: format deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, mistral, mistral_v7, muse_glimmer, qwen3_coder, not markdown",
        ),
        (None, ["rollout.tools.mcp_tools=[add, nothing]"], "no server has the tool 'nothing'"),
        (
            {
                "a": {"command": sys.executable, "args": ["{script}"]},
                "b": {"command": sys.executable, "args": ["{script}"]},
            },
            [],
            "servers 'a' and 'b' both have a tool named 'add'",
        ),  # fmt: skip
        (
            {"web": {"url": "http://localhost:1/sse", "type": "sse"}},
            [],
            "server 'web' uses the sse transport; URLs are served over streamable HTTP here",
        ),
        (
            {"web": {"url": "{url}", "auth_token": "wrong"}},
            [],
            "server 'web' did not start or list its tools",
        ),
        ({"odd": {"args": ["x"]}}, [], "server 'odd' has no command (a server started over stdio) or url"),
        (
            {"gone": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}},
            [],
            "server 'gone' did not start or list its tools",
        ),  # fmt: skip
        (
            {"x": {"command": sys.executable, "args": ["{script}", "python"]}},
            ["rollout.tools.mcp_tools=[python]"],
            "the tool 'python' has the name of another tool",
        ),  # fmt: skip
    ],
)
def test_what_cannot_work_is_named_when_the_recipe_loads(tmp_path, http_mcp, servers, extra, message):
    if servers is not None:
        servers = json.loads(json.dumps(servers).replace("{script}", SERVER).replace("{url}", http_mcp))
    path = servers_file(tmp_path, servers)
    args = ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
            f"rollout.tools.mcp_servers={path}", *extra]  # fmt: skip
    with pytest.raises(ConfigError, match="rollout.tools.mcp_servers") as e:
        load_config("demo", args)
    assert message in str(e.value)


def test_an_mcp_tool_named_as_an_environments_method_is_refused(tmp_path, user_module):
    m = user_module(
        "class Env:\n    def reset(self, **row):\n        return None\n\n"
        '    def add(self, a: int) -> int:\n        """Add.\n\n        Args:\n            a: a number\n        """\n'
        "        return a\n",
        "env_with_add",
    )
    args = ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
            f"rollout.tools.mcp_servers={servers_file(tmp_path)}", f"rollout.tools.environment={m}.Env"]  # fmt: skip
    with pytest.raises(
        ConfigError, match="rollout.tools.mcp_servers: the tool 'add' has the name of another tool"
    ):
        load_config("demo", args)


def test_the_recipe_puts_the_picked_tools_schemas_in_every_prompt(tmp_path):
    path = servers_file(tmp_path)
    cfg = load_config("demo", ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
                               f"rollout.tools.mcp_servers={path}", "rollout.tools.mcp_tools=[add]"])  # fmt: skip
    assert [t["function"]["name"] for t in cfg.data.chat_template_kwargs["tools"]] == ["add"]
    with pytest.raises(ConfigError, match="rollout.tools.mcp_tools picks tools of rollout.tools.mcp_servers"):
        load_config("demo", ["rollout.tools.enabled=true", "rollout.tools.mcp_tools=[add]"])


@pytest.mark.parametrize(
    "text, message",
    [
        ("mcpServers: [unclosed", "not an MCP servers file (while parsing"),
        ('{"mcpServers": {}}', "no 'mcpServers' entry"),
        ('{"mcpServers": ["calc"]}', 'no "mcpServers" mapping of server name to'),
    ],
)
def test_a_servers_file_that_is_not_one_is_named(tmp_path, text, message):
    from reasonrl.rollout.mcp_tools import servers

    (tmp_path / "servers.json").write_text(text)
    with pytest.raises(ValueError, match="servers.json: ") as e:
        servers(str(tmp_path / "servers.json"))
    assert message in str(e.value)
