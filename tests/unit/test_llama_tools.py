"""Llama 3.1 / 3.2's custom tool calls (`rollout.tools.format: llama3_json`): the whole message a JSON object,
`{"name": ..., "parameters": {...}}`, ended by `<|eot_id|>`, answered in an ipython turn; checked against the
Llama templates TRL ships and against transformers' reading of the same messages (`parse_response`)."""

from __future__ import annotations

import copy
from importlib.resources import files

import pytest
from test_function_tools import TOOLS
from test_tool_rollouts import _ALPHABET, LOGP, Scripted

from reasonrl.config import ConfigError, ToolsConfig
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.tool_formats import TOOL_FORMATS, llama_call
from reasonrl.rollout.tool_turns import template_turn, turn_tokens
from reasonrl.rollout.tools import ToolRolloutEngine

SPECIAL = [
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|python_tag|>",
]
CALL = '{"name": "multiply", "parameters": {"a": 6, "b": 7}}<|eot_id|>'


@pytest.fixture(scope="module", params=["llama3_1.jinja", "llama3_2.jinja"])
def llama(request):
    trl = pytest.importorskip("trl")
    t = build_tokenizer(
        [_ALPHABET + ' {"name": "multiply", "parameters": ipython assistant user It is 42.'], 400
    )
    t.add_special_tokens({"additional_special_tokens": SPECIAL})
    t.chat_template = (files(trl) / "chat_templates" / request.param).read_text()
    return t


def test_the_templates_call_is_read_as_transformers_reads_it_and_answered_by_its_turn(llama):
    from trl.chat_template_utils import add_response_schema

    fmt = TOOL_FORMATS.get("llama3_json")
    messages = [{"role": "user", "content": "Q"},
                {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "multiply",
                                                                                          "arguments": {"a": 6, "b": 7}}}]},
                {"role": "tool", "content": "42"}]  # fmt: skip
    text = llama.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    message = text[text.rindex('{"name"') :]  # (the assistant's message: the call, from its start)
    found = fmt.find(message)
    assert llama_call(found.group(1)) == ("multiply", {"a": 6, "b": 7})
    theirs = add_response_schema(copy.deepcopy(llama)).parse_response(CALL, prefix="")["tool_calls"][0][
        "function"
    ]
    assert (theirs["name"], theirs["arguments"]) == llama_call(fmt.find(CALL).group(1))
    # what follows the call: an ipython turn, then the assistant's; the template writes the output as a JSON
    # string (a string is iterable in Jinja, which its test for a structured output takes it for), the format
    # as it is (Meta's reference format), the one deliberate difference
    before, after = fmt.output.split("{output}")
    assert message[found.end() :] == before + '"42"' + after
    assert template_turn(llama, ends_message=True) == before + '"{output}"' + after
    # the whole message is the call: words before it make it text, as a message without its end is no call yet
    assert fmt.find("Let me call it. " + CALL) is None and fmt.find(CALL.removesuffix("<|eot_id|>")) is None
    assert llama_call(fmt.find("<|python_tag|>" + CALL.replace("eot", "eom")).group(1))[0] == "multiply"


def test_a_rollout_calls_the_function_and_goes_on_after_the_ipython_turn(llama, user_module):
    m = user_module(TOOLS, "llama_tools")
    tools = ToolsConfig(enabled=True, format="llama3_json", names=[], functions=[f"{m}.multiply"])
    script = [CALL, '{"name": "multiply", "parameters": {"a": }}<|eot_id|>', "It is 42.<|eot_id|>"]
    loop = ToolRolloutEngine(Scripted(llama, script, marker="ipython"), llama, tools)
    try:
        ((c,),) = loop.generate(
            [llama("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
        )
    finally:
        loop.functions.close()
    assert c.tool_calls == ("success", "invalid")
    before, after = TOOL_FORMATS.get("llama3_json").output.split("{output}")
    ids = [llama(s, add_special_tokens=False)["input_ids"] for s in script]
    error = "error: the tool call is not valid JSON (Expecting value)"
    turns = [turn_tokens(llama, before, "42", after), turn_tokens(llama, before, error, after)]
    assert c.token_ids == ids[0] + turns[0] + ids[1] + turns[1] + ids[2]
    assert c.sampler_logprobs == [LOGP if not m else 0.0 for m in c.tool_mask] and sum(c.tool_mask) == sum(
        map(len, turns)
    )


def test_a_llama_template_asks_for_llama_calls(llama):
    with pytest.raises(ConfigError, match="asks for llama3_json's tool calls"):
        ToolRolloutEngine(Scripted(llama, ["x"]), llama, ToolsConfig(enabled=True, format="hermes"))
