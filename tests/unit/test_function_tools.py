"""Python functions as tools (`rollout.tools.functions`, TRL's `tools=[...]`): a Hermes call naming a
function runs it in the tool workers with the call's arguments, and what it returns joins the completion as
TRL shows it (`str(result)`, `{'error': ...}`), masked out of the loss; the functions' schemas reach the
chat template; a function that hangs or crashes costs one call; what cannot work is named at load."""

from __future__ import annotations

import textwrap

import pytest
from test_tool_rollouts import _ALPHABET, Scripted

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.function_tools import FunctionTools, tool_schemas, with_function_schemas
from reasonrl.rollout.tools import ToolRolloutEngine

TOOLS = textwrap.dedent(
    '''
    import asyncio, os, time

    def multiply(a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        return a * b

    async def lookup(city: str) -> dict:
        """The weather in a city.

        Args:
            city: the city's name
        """
        await asyncio.sleep(0)
        return {"city": city, "temperature": 21}

    def fails(x: int) -> int:
        """Always fails.

        Args:
            x: anything
        """
        raise KeyError("no such record")

    def sleeps(x: int) -> int:
        """Sleeps for ever.

        Args:
            x: anything
        """
        time.sleep(60)

    def dies(x: int) -> int:
        """Kills its process.

        Args:
            x: anything
        """
        os._exit(3)

    def undocumented(x):
        return x

    def python(code: str) -> str:
        """Shadows the built-in tool.

        Args:
            code: code
        """
        return code
    '''
)


@pytest.fixture
def tools_module(user_module):
    return user_module(TOOLS, "my_tools")


def test_calls_run_in_the_workers_and_come_back_as_trl_shows_them(tools_module):
    m = tools_module
    tools = FunctionTools([f"{m}.multiply", f"{m}.lookup", f"{m}.fails", f"{m}.sleeps", f"{m}.dies"], 2, 1.0)
    try:
        assert tools.names == ["multiply", "lookup", "fails", "sleeps", "dies"]
        got = tools.run([("multiply", {"a": 6, "b": 7}), ("lookup", {"city": "Oslo"}), ("fails", {"x": 1}),
                         ("multiply", {"a": 6}), ("multiply", {"a": 1, "b": 2, "c": 3}), ("multiply", [6, 7]),
                         ("sleeps", {"x": 1}), ("dies", {"x": 1}), ("multiply", {"a": 2, "b": 3})])  # fmt: skip
    finally:
        tools.close()
    assert got == [
        ("42", "success"),
        ("{'city': 'Oslo', 'temperature': 21}", "success"),  # an async function, run to its end
        ("{'error': \"'no such record'\"}", "error"),  # TRL's {"error": str(e)}
        ("{'error': \"TypeError: missing a required argument: 'b'\"}", "error"),  # the model's mistake, named
        ("{'error': \"TypeError: got an unexpected keyword argument 'c'\"}", "error"),
        ("{'error': 'the arguments must be a JSON object, got [6, 7]'}", "invalid"),
        ("{'error': 'timed out after 1 s'}", "timeout"),  # killed at the limit
        ("{'error': \"the tool's process failed (ProcessExpired)\"}", "error"),
        ("6", "success"),  # the pool goes on after a hang and a crash
    ]


def _engine(tok, script, functions, **cfg):
    tools = ToolsConfig(enabled=True, format="hermes", names=[], functions=functions, **cfg)
    return ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok, tools)


def test_a_hermes_call_naming_a_function_runs_it_and_its_output_takes_no_loss(tools_module):
    tok = build_tokenizer([_ALPHABET + ' <tool_call> </tool_call> <tool_response> </tool_response> "name": '
                           '"multiply", "arguments": "a": "b": 42 no tool named weather tools: lookup error '
                           "im_start im_end user assistant"], 400)  # fmt: skip
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    script = ['<tool_call>\n{"name": "multiply", "arguments": {"a": 6, "b": 7}}\n</tool_call>',
              '<tool_call>{"name": "weather", "arguments": {}}</tool_call>', "So \\boxed{42}."]  # fmt: skip
    engine = _engine(tok, script, [f"{tools_module}.multiply", f"{tools_module}.lookup"])
    try:
        ((c,),) = engine.generate(
            [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=400)
        )
    finally:
        engine.functions.close()  # (the scripted engine has nothing to close)
    assert c.tool_calls == ("success", "invalid")
    outputs = [t.split("\n</tool_response>")[0] for t in c.text.split("<tool_response>\n")[1:]]
    assert outputs == ["42", "error: there is no tool named 'weather' (tools: multiply, lookup)"]
    written = tok.decode([t for t, m in zip(c.token_ids, c.tool_mask) if not m], skip_special_tokens=True)
    shown = tok.decode([t for t, m in zip(c.token_ids, c.tool_mask) if m], skip_special_tokens=True)
    assert "42" in shown and "no tool named" in shown  # the outputs: masked out of the loss
    assert "no tool named" not in written and "<tool_response>" not in written and written.endswith("{42}.")
    assert c.model_text.endswith("So \\boxed{42}.") and "<tool_response>" not in c.model_text


def test_schemas_come_from_type_hints_and_docstrings_and_join_the_template_arguments(tools_module):
    m = tools_module
    (schema,) = tool_schemas([f"{m}.multiply"])
    assert schema == {"type": "function", "function": {
        "name": "multiply", "description": "Multiply two integers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "description": "the first factor"},
            "b": {"type": "integer", "description": "the second factor"}}, "required": ["a", "b"]},
        "return": {"type": "integer"}}}  # fmt: skip
    tools = ToolsConfig(enabled=True, format="hermes", functions=[f"{m}.multiply", f"{m}.lookup"])
    python = {"type": "function", "function": {"name": "python", "parameters": {"type": "object"}}}
    got = with_function_schemas({"enable_thinking": False, "tools": [python]}, tools)
    assert [t["function"]["name"] for t in got["tools"]] == ["python", "multiply", "lookup"]
    assert got["enable_thinking"] is False
    assert with_function_schemas(got, tools) == got  # listed once, however often it is applied
    assert with_function_schemas({"a": 1}, ToolsConfig(enabled=False, functions=[f"{m}.multiply"])) == {
        "a": 1
    }


def test_a_recipe_with_functions_loads_with_their_schemas_in_its_template_arguments(tools_module):
    cfg = load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
                             f"rollout.tools.functions=[{tools_module}.multiply]"])  # fmt: skip
    assert [t["function"]["name"] for t in cfg.data.chat_template_kwargs["tools"]] == ["multiply"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["rollout.tools.functions=[{m}.multiply]"],
            "needs calls that name their tool: format deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, mistral, mistral_v7, muse_glimmer, qwen3_coder, not markdown",
        ),
        (
            ["rollout.tools.format=hermes", "rollout.tools.functions=[{m}.undocumented]"],
            "tool 'undocumented': no schema",
        ),
        (
            ["rollout.tools.format=hermes", "rollout.tools.functions=[{m}.python]"],
            "a function is named 'python'",
        ),
        (
            ["rollout.tools.format=hermes", "rollout.tools.functions=[{m}.multiply,{m}.multiply]"],
            "two tools are named",
        ),
        (
            ["rollout.tools.format=hermes", "rollout.tools.functions=[{m}.nothing]"],
            "defines no function 'nothing'",
        ),
        (["rollout.tools.format=hermes", "rollout.tools.functions=[/no/file.py:f]"], "no such file"),
        (["rollout.tools.format=hermes", "rollout.tools.names=[]"], "rollout.tools.names must name each"),
    ],
)
def test_what_cannot_work_is_named_when_the_recipe_loads(tools_module, extra, message):
    with pytest.raises(ConfigError, match="rollout.tools") as e:
        load_config(None, ["rollout.tools.enabled=true", *(x.format(m=tools_module) for x in extra)])
    assert message in str(e.value)


def test_eval_tool_functions_need_tools_to_join(tools_module):
    from reasonrl.cli.eval_rollout import tools_arg

    with pytest.raises(ConfigError, match="--tool-function: no tools to add it to"):
        tools_arg(None, None, functions=[f"{tools_module}.multiply"])
    with pytest.raises(
        ConfigError,
        match="needs calls that name their tool: format deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, mistral, mistral_v7, muse_glimmer, qwen3_coder, not xml",
    ):
        tools_arg("xml", None, functions=[f"{tools_module}.multiply"])
    got = tools_arg("hermes", None, functions=[f"{tools_module}.multiply", f"{tools_module}.multiply"])
    assert got.functions == [f"{tools_module}.multiply"] and got.format == "hermes"
