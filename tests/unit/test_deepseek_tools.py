"""DeepSeek-V3's tool calls (`rollout.tools.format: deepseek_v3`; `rollout.deepseek_calls`): a call's name and
fenced JSON arguments between `<｜tool▁call▁begin｜>` and `<｜tool▁call▁end｜>` runs the tool, and one outputs block
answers a message's calls, as DeepSeek-V3's chat template (the copy TRL ships) writes the exchange; the calls
read as vLLM's parser reads them."""

from __future__ import annotations

import copy
import json
from importlib.resources import files

import pytest
from test_function_tools import TOOLS
from test_tool_rollouts import _ALPHABET, LOGP, Scripted

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.deepseek_calls import AFTER, BEFORE, BETWEEN, parse
from reasonrl.rollout.tool_formats import TOOL_FORMATS, resolve_format
from reasonrl.rollout.tool_turns import answer_tokens
from reasonrl.rollout.tools import ToolRolloutEngine

SPECIAL = ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
           "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>",
           "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]  # fmt: skip
CALLS = [
    ("multiply", {"a": 6, "b": 7}),
    ("lookup", {"city": "Paris"}),
    ("python", {"code": "print(6*7)\nx = {1: 2}"}),
]
FMT = TOOL_FORMATS.get("deepseek_v3")


@pytest.fixture(scope="module")
def tok():
    t = build_tokenizer([_ALPHABET + " function multiply lookup city Paris temperature json"], 400)
    t.add_special_tokens({"additional_special_tokens": SPECIAL, "eos_token": "<｜end▁of▁sentence｜>"})
    return t


def _templates(tok):
    trl = pytest.importorskip("trl")
    for name in ("deepseekv3.jinja", "deepseek_r1_distill.jinja"):
        t = copy.deepcopy(tok)
        t.chat_template = (files(trl) / "chat_templates" / name).read_text()
        yield name, t


def _messages(calls, outputs):
    listed = [{"type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for n, a in calls]
    return [{"role": "user", "content": "Q"}, {"role": "assistant", "content": None, "tool_calls": listed},
            *({"role": "tool", "content": o} for o in outputs)]  # fmt: skip


def test_the_calls_and_their_answers_are_deepseeks_templates_own(tok):
    for name, t in _templates(tok):
        assert resolve_format(t, "auto") == "deepseek_v3", name
        if (
            name == "deepseek_r1_distill.jinja"
        ):  # (it never closes a message of one call: TRL refuses it for tools)
            continue
        for calls, outputs in [(CALLS[:1], ["42"]), (CALLS, ["42", "sunny", "42"])]:
            text = t.apply_chat_template(
                _messages(calls, outputs), tokenize=False, add_generation_prompt=True
            )
            found = list(FMT.call.finditer(text))
            assert [parse(m.group(1)) for m in found] == calls, name
            # what follows the last call: the calls' block closed, the message ended, one block of outputs, the
            # assistant's text going on (the template opens no new turn)
            assert text[found[-1].end() :] == BEFORE + BETWEEN.join(outputs) + AFTER, name
            assert FMT.output.split("{output}") == [BEFORE, AFTER] and FMT.between == BETWEEN


def test_calls_read_as_vllms_parser_reads_them(tok):
    try:
        from vllm.tool_parsers.deepseekv3_tool_parser import DeepSeekV3ToolParser
    except ImportError:
        pytest.skip("vllm is not installed")
    name, t = next(_templates(tok))
    one_line = CALLS[:2]  # (vLLM's pattern reads arguments on one line; json.dumps writes them so)
    text = t.apply_chat_template(_messages(one_line, []), tokenize=False)
    theirs = DeepSeekV3ToolParser(t).extract_tool_calls(text[text.index("<｜tool▁calls▁begin｜>") :], None)
    assert [(c.function.name, json.loads(c.function.arguments)) for c in theirs.tool_calls] == one_line
    assert [parse(m.group(1)) for m in FMT.call.finditer(text)] == one_line


def test_what_is_no_call_is_an_error_the_model_reads():
    for body, error in [("function<｜tool▁sep｜>f\n{\"a\": 1}", "in a ```json block"),
                        ("tool<｜tool▁sep｜>f\n```json\n{}\n```", "type is 'tool', not function"),
                        ("function<｜tool▁sep｜>f\n```json\n{a: 1}\n```", "not valid JSON"),
                        ("function<｜tool▁sep｜>f\n```json\n[1]\n```", "arguments are not an object")]:  # fmt: skip
        with pytest.raises(ValueError, match=error):
            parse(body)


def test_a_rollout_runs_a_messages_two_calls_answered_in_one_block(tok, user_module):
    m = user_module(TOOLS, "deepseek_tools")
    message = ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>multiply\n```json\n{"a": 6, "b": 7}\n```'
               '<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>lookup\n```json\n{"city": "Paris"}\n```'
               "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>")  # fmt: skip
    final = "It is 42.<｜end▁of▁sentence｜>"
    tools = ToolsConfig(enabled=True, format="deepseek_v3", names=[], functions=[f"{m}.multiply", f"{m}.lookup"],
                        parallel_calls=2)  # fmt: skip
    loop = ToolRolloutEngine(Scripted(tok, [message, final], marker="<｜tool▁outputs▁end｜>"), tok, tools)
    try:
        ((c,),) = loop.generate([tok("<｜User｜>Q<｜Assistant｜>", add_special_tokens=False)["input_ids"]],
                                SamplingParams(max_new_tokens=400))  # fmt: skip
    finally:
        loop.functions.close()
    assert c.tool_calls == ("success", "success")
    written = tok(
        message.removesuffix("<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"), add_special_tokens=False
    )["input_ids"]
    turn = answer_tokens(tok, [BEFORE, BETWEEN, AFTER], ["42", "{'city': 'Paris', 'temperature': 21}"])
    ended = tok(final, add_special_tokens=False)["input_ids"]
    # the model's end of its calls' block and of its message are the turn's own, as the template's
    assert c.token_ids == written + turn + ended
    assert c.tool_mask == [False] * len(written) + [True] * len(turn) + [False] * len(ended)
    assert c.sampler_logprobs == [LOGP] * len(written) + [0.0] * len(turn) + [LOGP] * len(ended)


def test_the_templates_turn_is_refused_and_a_deepseek_template_asks_for_its_calls(tok):
    with pytest.raises(ConfigError, match="closes format deepseek_v3's calls as part of the message"):
        load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=deepseek_v3",
                           "rollout.tools.turn=chat_template"])  # fmt: skip
    _, t = next(_templates(tok))
    with pytest.raises(ConfigError, match="asks for deepseek_v3's tool calls"):
        ToolRolloutEngine(Scripted(t, ["x"]), t, ToolsConfig(enabled=True, format="hermes"))
