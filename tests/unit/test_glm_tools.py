"""GLM-4.5's tool calls (`rollout.tools.format: glm4_moe`; `rollout.glm_calls`): `<tool_call>NAME` with
`<arg_key>` / `<arg_value>` pairs, each value read by the called tool's schema, answered in an observation turn;
checked against GLM's chat template (the copy TRL ships) and against transformers' own reading of the calls
(`parse_response` with the tools' schemas)."""

from __future__ import annotations

import copy
from importlib.resources import files

import pytest
from test_function_tools import TOOLS
from test_tool_rollouts import _ALPHABET, LOGP, Scripted

from reasonrl.config import ConfigError, ToolsConfig
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.glm_calls import parse
from reasonrl.rollout.qwen_calls import typed
from reasonrl.rollout.tool_formats import TOOL_FORMATS
from reasonrl.rollout.tool_turns import answer_tokens, template_turn
from reasonrl.rollout.tools import ToolRolloutEngine

SPECIAL = ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<tool_call>",
           "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<tool_response>",
           "</tool_response>"]  # fmt: skip
SCHEMAS = [
    {"type": "function", "function": {"name": "multiply", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "l": {"type": "array"}, "o": {"type": "object"}, "x": {"type": "number"}, "ok": {"type": "boolean"},
        "code": {"type": "string"}}}}},
]  # fmt: skip
BODIES = [
    "multiply\n<arg_key>a</arg_key>\n<arg_value>6</arg_value>\n<arg_key>b</arg_key>\n<arg_value>7</arg_value>",
    "lookup\n<arg_key>city</arg_key>\n<arg_value>New York</arg_value>",
    'f\n<arg_key>l</arg_key>\n<arg_value>[1, "a"]</arg_value>\n<arg_key>o</arg_key>\n<arg_value>{"k": null}'
    "</arg_value>\n<arg_key>x</arg_key>\n<arg_value>2.5</arg_value>\n<arg_key>ok</arg_key>\n<arg_value>true"
    '</arg_value>\n<arg_key>code</arg_key>\n<arg_value>print("a")\nif 1 < 2:\n    print(2)</arg_value>',
]


@pytest.fixture(scope="module")
def glm():
    trl = pytest.importorskip("trl")
    t = build_tokenizer(
        [_ALPHABET + " multiply lookup city Paris temperature New York assistant observation"], 400
    )
    t.add_special_tokens({"additional_special_tokens": SPECIAL})
    t.chat_template = (files(trl) / "chat_templates" / "glm4moe.jinja").read_text()
    return t


def test_calls_read_as_transformers_reads_them_with_the_schemas(glm):
    from trl.chat_template_utils import add_response_schema

    reader = add_response_schema(copy.deepcopy(glm))
    for body in BODIES:
        (theirs,) = reader.parse_response(f"<tool_call>{body}\n</tool_call>", prefix="", tools=SCHEMAS)[
            "tool_calls"
        ]
        name, args = parse(body)
        schema = next(
            s["function"]["parameters"]["properties"] for s in SCHEMAS if s["function"]["name"] == name
        )
        assert (name, typed(args, schema)) == (theirs["function"]["name"], theirs["function"]["arguments"])
    assert parse(BODIES[0]) == ("multiply", {"a": "6", "b": "7"})  # (as written, before the schema)
    for body, error in [("<arg_key>a</arg_key><arg_value>1</arg_value>", "has no function name"),
                        ("f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key><arg_value>2</arg_value>",
                         "gives argument 'a' twice"),
                        ('f {"a": 1}', "text outside its <arg_key> / <arg_value> pairs")]:  # fmt: skip
        with pytest.raises(ValueError, match=error):
            parse(body)


def test_the_turn_is_glms_own_for_one_call_and_for_several(glm):
    fmt = TOOL_FORMATS.get("glm4_moe")
    before, after = fmt.output.split("{output}")
    assert template_turn(glm) == fmt.output
    assert template_turn(glm, {"enable_thinking": False}) == fmt.output + "\n<think></think>"
    assert template_turn(glm, count=2) == before + "{output}" + fmt.between + "{output}" + after
    messages = [{"role": "user", "content": "Q"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "multiply", "arguments": {"a": 6, "b": 7}}},
                    {"type": "function", "function": {"name": "lookup", "arguments": {"city": "Paris"}}}]},
                {"role": "tool", "content": "42"}, {"role": "tool", "content": "sunny"}]  # fmt: skip
    text = glm.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # the calls as the template writes them are found and read, and what follows them is the turn
    found = list(fmt.call.finditer(text))
    assert [parse(m.group(1)) for m in found] == [
        ("multiply", {"a": "6", "b": "7"}),
        ("lookup", {"city": "Paris"}),
    ]
    assert text[found[-1].end() :] == before + "42" + fmt.between + "sunny" + after


def test_a_rollout_runs_a_messages_two_calls_typed_by_their_schemas(glm, user_module):
    m = user_module(TOOLS, "glm_tools")
    message = ("<think></think>\n<tool_call>multiply\n<arg_key>a</arg_key>\n<arg_value>6</arg_value>\n<arg_key>b"
               "</arg_key>\n<arg_value>7</arg_value>\n</tool_call>\n<tool_call>lookup\n<arg_key>city</arg_key>\n"
               "<arg_value>Paris</arg_value>\n</tool_call><|observation|>")  # fmt: skip
    tools = ToolsConfig(enabled=True, format="glm4_moe", names=[], functions=[f"{m}.multiply", f"{m}.lookup"],
                        parallel_calls=2)  # fmt: skip
    loop = ToolRolloutEngine(
        Scripted(glm, [message, "It is 42.<|user|>"], marker="<|observation|>"), glm, tools
    )
    try:
        ((c,),) = loop.generate([glm("<|assistant|>", add_special_tokens=False)["input_ids"]],
                                SamplingParams(max_new_tokens=300))  # fmt: skip
    finally:
        loop.functions.close()
    # 6 * 7 = 42: the values reached the function as integers ("6" * 7 would be "6666666")
    assert c.tool_calls == ("success", "success")
    fmt = TOOL_FORMATS.get("glm4_moe")
    before, after = fmt.output.split("{output}")
    turn = answer_tokens(glm, [before, fmt.between, after], ["42", "{'city': 'Paris', 'temperature': 21}"])
    written = glm(message.removesuffix("<|observation|>"), add_special_tokens=False)["input_ids"]
    final = glm("It is 42.<|user|>", add_special_tokens=False)["input_ids"]
    assert (
        c.token_ids == written + turn + final
    )  # the model's <|observation|> is the turn's, as the template's
    assert c.sampler_logprobs == [LOGP] * len(written) + [0.0] * len(turn) + [LOGP] * len(final)


def test_a_glm_template_asks_for_glm_calls(glm):
    with pytest.raises(ConfigError, match="asks for glm4_moe's tool calls"):
        ToolRolloutEngine(Scripted(glm, ["x"]), glm, ToolsConfig(enabled=True, format="hermes"))
