"""Qwen3-Coder's and Qwen3.5's XML tool calls (`rollout.tools.format: qwen3_coder`; `rollout.qwen_calls`):
`<function=NAME>` with `<parameter=KEY>` values as text inside the Hermes markers, each value read by the
called tool's schema (an `int` parameter gets a number: "2" + "2" would be "22"), checked against vLLM's own
reading of the same calls where vLLM is installed."""

from __future__ import annotations

import pytest
from test_function_tools import TOOLS
from test_tool_rollouts import _ALPHABET, Scripted

from reasonrl.config import ToolsConfig
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.qwen_calls import parse, typed
from reasonrl.rollout.tools import ToolRolloutEngine

CODE = "print(\"a\" + 'b')\nif 1 < 2:\n    print(2)"
BODIES = [
    "<function=multiply>\n<parameter=a>\n6\n</parameter>\n<parameter=b>\n7\n</parameter>\n</function>",
    f"<function=python>\n<parameter=code>\n{CODE}\n</parameter>\n</function>",
    "<function=lookup>\n<parameter=city>\nNew York\n\n</parameter>\n</function>",  # (one newline is markup)
    "<function=f>\n<parameter=x>1<parameter=y>\n[1, 2]\n</parameter>\n</function>",  # an unclosed parameter
    "<function=f>\n</function>",
]


def test_calls_are_read_as_the_template_writes_them():
    assert parse(BODIES[0]) == ("multiply", {"a": "6", "b": "7"})
    assert parse(BODIES[1]) == ("python", {"code": CODE})
    assert parse(BODIES[2]) == ("lookup", {"city": "New York\n"})
    assert parse(BODIES[3]) == ("f", {"x": "1", "y": "[1, 2]"})
    assert parse(BODIES[4]) == ("f", {})
    with pytest.raises(ValueError, match="has no <function=NAME>"):
        parse('{"name": "multiply", "arguments": {}}')  # a Hermes JSON call is not this format's
    with pytest.raises(ValueError, match="gives parameter 'a' twice"):
        parse("<function=f><parameter=a>1</parameter><parameter=a>2</parameter></function>")


def test_values_are_read_by_the_schema_and_text_stays_text():
    schema = {"i": {"type": "integer"}, "n": {"type": "number"}, "f": {"type": "number"}, "b": {"type": "boolean"},
              "o": {"type": "object"}, "a": {"type": "array"}, "s": {"type": "string"},
              "u": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "z": {"type": "integer", "nullable": True},
              "bad": {"type": "integer"}}  # fmt: skip
    got = typed({"i": " 42 ", "n": "3", "f": "2.50", "b": "True", "o": '{"k": [1]}', "a": "[1, 2]", "s": "42",
                 "u": "null", "z": "None", "bad": "many", "extra": "7"}, schema)  # fmt: skip
    assert got == {"i": 42, "n": 3, "f": 2.5, "b": True, "o": {"k": [1]}, "a": [1, 2], "s": "42", "u": None,
                   "z": None, "bad": "many", "extra": "7"}  # fmt: skip
    assert isinstance(got["n"], int) and isinstance(got["f"], float)
    assert typed({"a": "{}"}, {"a": {"type": "array"}}) == {"a": "{}"}  # an object is not an array: text
    assert typed({"x": "1"}, None) == {"x": "1"}  # no schema: as written


def test_vllm_reads_the_same_calls_alike():
    qwen3 = pytest.importorskip("vllm.parser.qwen3")
    response = pytest.importorskip("vllm.parser.chat_parsing.response_parser")
    import json

    for body in BODIES:
        ours = parse(body)[1]
        assert ours == json.loads(qwen3._qwen3_arg_converter(body, partial=False)), body
    schema = (
        {"type": "integer"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "array"},
        {"type": "string"},
    )
    for spec, raw in zip(schema, ("42", "2.50", "true", "[1, 2]", "7")):
        assert typed({"v": raw}, {"v": spec})["v"] == response._coerce(raw, response._schema_types(spec))


def test_a_rollout_calls_a_function_with_typed_values_and_runs_code(user_module):
    m = user_module(TOOLS, "qwen_tools")
    tok = build_tokenizer([_ALPHABET + " <tool_call> </tool_call> <tool_response> </tool_response> <function= "
                           "<parameter= </parameter> </function> multiply python code 42 ab im_start im_end"], 400)  # fmt: skip
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    script = [f"<tool_call>\n{BODIES[0]}\n</tool_call>", f"<tool_call>\n{BODIES[1]}\n</tool_call>", "Done."]
    tools = ToolsConfig(enabled=True, format="qwen3_coder", names=["python"], functions=[f"{m}.multiply"])
    loop = ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok, tools)
    try:
        ((c,),) = loop.generate(
            [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=400)
        )
    finally:
        loop.functions.close()  # (the scripted engine has nothing to close)
    assert c.tool_calls == ("success", "success")
    outputs = [t.split("\n</tool_response>")[0] for t in c.text.split("<tool_response>\n")[1:]]
    assert outputs == ["42", "ab\n2"]  # 6 * 7 as numbers (as text it would fail), and the program's output
    assert c.model_text.endswith("Done.") and "<tool_response>" not in c.model_text


@pytest.mark.parametrize(
    "shown, fmt, wanted",
    [
        (
            "{{ '<tool_call>\\n<function=example>\\n<parameter=x>\\n1\\n</parameter>' }}",
            "hermes",
            "qwen3_coder",
        ),
        ("{{ '<tool_call>\\n{\"name\": <function-name>}\\n</tool_call>' }}", "qwen3_coder", "hermes"),
        ("{{ '[TOOL_CALLS]' }}", "hermes", "mistral"),
        ("{{ '[TOOL_CALLS]' }}", "mistral_v7", None),
        ("{{ '<tool_call>' }}", "hermes", None),
        ("{{ messages }}", "hermes", None),  # (a template that shows no calls: not checked)
    ],
)
def test_a_format_the_models_template_does_not_teach_is_refused(shown, fmt, wanted):
    from reasonrl.config import ConfigError

    tok = build_tokenizer([_ALPHABET], 300)
    tok.chat_template = shown
    tools = ToolsConfig(enabled=True, format=fmt, names=["python"])
    if wanted is None:
        assert ToolRolloutEngine(Scripted(tok, []), tok, tools).format.find("x") is None
        return
    with pytest.raises(ConfigError, match=f"chat template asks for {wanted}'s tool calls.*format={wanted}"):
        ToolRolloutEngine(Scripted(tok, []), tok, tools)


QWEN35_LIKE = (
    r"{% for m in messages %}{% if m.role == 'tool' %}{{ '<|im_start|>user\n<tool_response>\n' + m.content + "
    r"'\n</tool_response><|im_end|>\n' }}{% else %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}"
    r"{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' + OPEN }}{% endif %}"
    r"{# tool calls: <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function> #}"
)


@pytest.mark.parametrize("opens, turn, warned", [("<think>\n", "format", True), ("<think>\n", "chat_template", False),
                                                 ("", "format", False)])  # fmt: skip
def test_a_turn_unlike_the_templates_is_warned_of(caplog, opens, turn, warned):
    """Qwen3.5's template opens the assistant's turn after a tool response with <think>: the format's own
    turn (Hermes's) lacks it, so the run says to take the template's."""
    tok = build_tokenizer([_ALPHABET], 300)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    tok.chat_template = QWEN35_LIKE.replace("OPEN", repr(opens))
    with caplog.at_level("WARNING", logger="reasonrl.rollout.tools"):
        loop = ToolRolloutEngine(
            Scripted(tok, []), tok, ToolsConfig(enabled=True, format="qwen3_coder", turn=turn)
        )
    said = [r.getMessage() for r in caplog.records if "rollout.tools.turn=chat_template" in r.getMessage()]
    assert bool(said) == warned
    assert loop.format.output.endswith("<|im_start|>assistant\n" + (opens if turn == "chat_template" else ""))
