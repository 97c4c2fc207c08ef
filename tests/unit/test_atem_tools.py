"""Muse Glimmer's ATEM tool calls (`rollout.tools.format: muse_glimmer`; `rollout.atem`): a message addressed to a
tool whose body invokes it runs the tool, and the tool's own message answers it, as Muse Glimmer's chat template
(the copy TRL ships) writes the exchange; the calls read as vLLM's parser reads them; the reasoning (`to=self`)
is never scored."""

from __future__ import annotations

import copy
from dataclasses import replace
from importlib.resources import files

import pytest
from test_function_tools import TOOLS
from test_harmony_tools import Engine
from test_tool_rollouts import _ALPHABET, LOGP

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.atem import CALL, parse, results
from reasonrl.rollout.base import SamplingParams, completion_text
from reasonrl.rollout.qwen_calls import typed
from reasonrl.rollout.tool_formats import resolve_format
from reasonrl.rollout.tool_turns import turn_tokens
from reasonrl.rollout.tools import ToolRolloutEngine

SPECIAL = ["<|start|>", "<|message|>", "<|eom|>", "<|eot|>"]
SCHEMA = {
    "a": {"type": "integer"},
    "b": {"type": "integer"},
    "tags": {"type": "array"},
    "note": {"type": "string"},
}
ARGS = {"a": 6, "b": 7, "tags": ["x", "y"], "note": " spaced 42 "}
CALLED = (' to=self<|message|>Multiply; maybe 41.<|eom|><|start|>assistant to=multiply<|message|><atem:function_calls>\n'
          '<atem:invoke name="multiply">\n<atem:parameter name="a">6</atem:parameter>\n<atem:parameter name="b">7'
          "</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eot|>")  # fmt: skip
FINAL = " to=user<|message|>It is 42.<|eot|>"


@pytest.fixture(scope="module")
def tok():
    t = build_tokenizer([_ALPHABET + " to=self to=user to=multiply assistant tool Multiply; maybe 41. It is 42. "
                         "atem:function_calls atem:invoke atem:parameter name= tool_output"], 500)  # fmt: skip
    t.add_special_tokens({"additional_special_tokens": SPECIAL})
    return t


@pytest.fixture(scope="module")
def muse(tok):
    trl = pytest.importorskip("trl")
    t = copy.deepcopy(tok)
    t.chat_template = (files(trl) / "chat_templates" / "muse_glimmer.jinja").read_text()
    return t


def _messages():
    call = {"id": "c1", "type": "function", "function": {"name": "multiply", "arguments": ARGS}}
    return [{"role": "user", "content": "Q"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}]  # fmt: skip


def test_the_call_and_its_answer_are_muse_glimmers_template(muse):
    text = muse.apply_chat_template(_messages(), tokenize=False, add_generation_prompt=True)
    (found,) = CALL.finditer(text)
    name, args = parse(found.group(1))
    # the template writes a string as it is and any other value as JSON: read by the schema, they are the call's
    assert (name, args["a"], args["note"]) == ("multiply", "6", " spaced 42 ")
    assert typed(args, SCHEMA) == ARGS
    # what follows the call: the end of its message, the tool's message, the assistant's turn opening again
    assert text[found.end() :] == "".join(results(found.group(1), "42"))
    assert resolve_format(muse, "auto") == "muse_glimmer"  # (its template also shows JSON "parameters")


def test_calls_read_as_vllms_parser_reads_them(muse):
    try:
        from vllm.tool_parsers.muse_glimmer_tool_parser import MuseGlimmerToolParser
    except ImportError:
        pytest.skip("vllm is not installed")
    text = muse.apply_chat_template(_messages()[:2], tokenize=False)
    turn = text[text.index("<|start|>assistant") :]
    (theirs,) = MuseGlimmerToolParser(muse).extract_tool_calls(turn, None).tool_calls
    import json

    (found,) = CALL.finditer(turn)
    name, args = parse(found.group(1))
    # (vLLM reads a value as JSON where it parses: " spaced 42 " stays text, 6 is a number, as the schema reads)
    assert (theirs.function.name, json.loads(theirs.function.arguments)) == (name, typed(args, SCHEMA))


def test_a_rollout_calls_the_function_and_reads_the_answer_not_the_reasoning(muse, user_module):
    m = user_module(TOOLS, "atem_tools")
    tools = ToolsConfig(
        enabled=True, format="muse_glimmer", names=[], functions=[f"{m}.multiply", f"{m}.lookup"]
    )
    loop = ToolRolloutEngine(Engine(muse, [CALLED, FINAL], marker="<tool_output"), muse, tools)
    try:
        ((c,),) = loop.generate([muse("<|start|>assistant", add_special_tokens=False)["input_ids"]],
                                SamplingParams(max_new_tokens=400))  # fmt: skip
    finally:
        loop.functions.close()
    assert c.tool_calls == ("success",)  # 6 * 7 = 42: the values reached the function as integers
    written = muse(CALLED.removesuffix("<|eot|>"), add_special_tokens=False)["input_ids"]
    turn = turn_tokens(muse, '<|eot|><|start|>tool multiply<|message|><tool_output name="multiply">\n', "42",
                       "\n</tool_output><|eot|><|start|>assistant")  # fmt: skip
    final = muse(FINAL, add_special_tokens=False)["input_ids"]
    assert c.token_ids == written + turn + final  # the model's <|eot|> is the turn's own, as the template's
    assert c.tool_mask == [False] * len(written) + [True] * len(turn) + [False] * len(final)
    assert c.sampler_logprobs == [LOGP] * len(written) + [0.0] * len(turn) + [LOGP] * len(final)
    assert c.model_text.startswith(
        "<think>Multiply; maybe 41.</think><think>to=multiply <atem:function_calls>"
    )
    assert c.model_text.endswith(
        "</atem:function_calls></think>\nIt is 42."
    )  # (a call is whole at its block's end)
    from reasonrl.rewards.extract import extract

    assert extract(c.model_text).answer == "42"  # not the reasoning's 41


def test_the_verifiers_read_the_answer_never_the_reasoning(tok):
    from reasonrl.rewards.extract import extract

    def read(text: str) -> str | None:
        found = extract(completion_text(tok, tok(text, add_special_tokens=False)["input_ids"]))
        return None if found is None else found.answer

    assert read(" to=self<|message|>Maybe 41.<|eom|><|start|>assistant" + FINAL) == "42"
    assert read(" to=self<|message|>So \\boxed{42}, then") is None  # cut in its reasoning: no answer
    assert read("<|message|>The answer is 42<|eot|>") is None  # (a message to no one is not the answer)
    shown = completion_text(
        tok, tok("<|start|>tool multiply<|message|>42<|eot|>", add_special_tokens=False)["input_ids"]
    )
    assert shown == "<think>tool multiply: 42</think>"


def test_what_is_no_call_is_said_and_reasoning_that_writes_one_is_none(tok):
    param = '<atem:parameter name="a">6</atem:parameter>'
    invoke = f'<atem:function_calls><atem:invoke name="multiply">{param}</atem:invoke></atem:function_calls>'
    assert not list(CALL.finditer(f" to=self<|message|>I could write {invoke}<|eom|>"))
    assert not list(CALL.finditer(f" to=user<|message|>{invoke}<|eot|>"))
    two = invoke.replace("</atem:invoke>", '</atem:invoke><atem:invoke name="multiply"></atem:invoke>')
    for body, error in [(f"to=lookup<|message|>{invoke}", "addressed to 'lookup' but invokes 'multiply'"),
                        (f"to=multiply<|message|>{two}", "invokes one function, not 2"),
                        (f"to=multiply<|message|>{invoke.replace(param, param + 'x')}", "text outside its <atem:parameter>"),
                        (f"to=multiply<|message|>{invoke.replace(param, param * 2)}", "gives parameter 'a' twice")]:  # fmt: skip
        (found,) = CALL.finditer(body)
        with pytest.raises(ValueError, match=error):
            parse(found.group(1))


def test_several_calls_at_once_and_the_templates_turn_are_refused(muse):
    for setting, error in [("rollout.tools.parallel_calls=2", "writes each call as a message of its own"),
                           ("rollout.tools.turn=chat_template", "results turn follows each call")]:  # fmt: skip
        with pytest.raises(ConfigError, match=error):
            load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=muse_glimmer", setting])
    with pytest.raises(ConfigError, match="asks for muse_glimmer's tool calls"):
        ToolRolloutEngine(Engine(muse, ["x"]), muse, ToolsConfig(enabled=True, format="llama3_json"))
    loop = ToolRolloutEngine(Engine(muse, ["x"]), muse, replace(ToolsConfig(enabled=True), format="auto"))
    assert loop.cfg.format == "muse_glimmer"
