"""Mistral's tool calls (`rollout.tools.format: mistral`, `mistral_v7`; `rollout.mistral_calls`), checked
against Mistral's own tokenizers: `mistral-common` ships real tokenizer files, and its encoding of a
conversation with a tool call and its result is the reference. For each tokenizer version (v3, v7, v11,
v13), the call a model writes is read, and the turn the tool loop answers it with is token for token the
one mistral-common writes for the same call and output."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
from test_tool_rollouts import LOGP, Scripted

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.mistral_calls import parse, results
from reasonrl.rollout.tool_turns import turn_tokens
from reasonrl.rollout.tools import ToolRolloutEngine

mistral_common = pytest.importorskip("mistral_common")

ID = "abcdefghi"
# the call each version's model writes, in mistral-common's own syntax for it
CALLS = {
    "v3": f'[TOOL_CALLS][{{"name": "add", "arguments": {{"a": 2, "b": 2}}, "id": "{ID}"}}]</s>',
    "v7": f'[TOOL_CALLS][{{"name": "add", "arguments": {{"a": 2, "b": 2}}, "id": "{ID}"}}]</s>',
    "v11": f'[TOOL_CALLS]add[CALL_ID]{ID}[ARGS]{{"a": 2, "b": 2}}</s>',
    "v13": '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 2}</s>',
}
FORMAT = {"v3": "mistral", "v7": "mistral_v7", "v11": "mistral", "v13": "mistral"}
TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first
        b: the second
    """
    return a + b
'''


@pytest.fixture(scope="module")
def tekken(tmp_path_factory):
    """{version: tekken.json path}: the file mistral-common ships (v3), and copies of it declaring later
    versions with the control tokens those need."""
    from mistral_common.tokens.tokenizers.base import SpecialTokens
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    shipped = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    data = json.loads(shipped.read_text())
    special = [dict(t) for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    for t in (SpecialTokens.args, SpecialTokens.call_id):
        special.append({"rank": len(special), "token_str": t.value, "is_control": True})
    out = {"v3": shipped}
    for version in ("v7", "v11", "v13"):
        path = tmp_path_factory.mktemp("tekken") / f"tekken_{version}.json"
        path.write_text(
            json.dumps({**data, "config": {**data["config"], "version": version}, "special_tokens": special})
        )
        out[version] = path
    return out


def _reference(path, content: str):
    """(mistral-common's tokens, its text) of a user question, the call to `add` and its result `content`, then
    the assistant's next words."""
    from mistral_common.protocol.instruct.messages import AssistantMessage, ToolMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import FunctionCall, ToolCall

    messages = [UserMessage(content="Q"),
                AssistantMessage(tool_calls=[ToolCall(id=ID, function=FunctionCall(name="add", arguments='{"a": 2, "b": 2}'))]),
                ToolMessage(content=content, tool_call_id=ID), AssistantMessage(content="It is 4.", prefix=True)]  # fmt: skip
    got = _mistral(path).encode_chat_completion(ChatCompletionRequest(messages=messages))
    return got.tokens, got.text


@lru_cache(maxsize=4)
def _mistral(path):
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return MistralTokenizer.from_file(str(path))


@lru_cache(maxsize=4)
def _hf(path):
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer

    return convert_tekken_tokenizer(str(path), chat_template="")


@pytest.mark.parametrize("version", ["v3", "v7", "v11", "v13"])
@pytest.mark.parametrize("content", ["4", 'abc "q" é [/TOOL_RESULTS]', '{"a": [1, 2]}'])
def test_the_results_turn_is_mistral_commons_token_for_token(tekken, version, content):
    tokens, text = _reference(tekken[version], content)
    call = CALLS[version]
    assert call in text  # (mistral-common writes the call this way for this version)
    before, shown, after = results(call[len("[TOOL_CALLS]") : -len("</s>")], content, v7=version == "v7")
    assert text[text.index(call) + len(call) :] == before + shown + after + "It is 4."
    tok = _hf(tekken[version])
    ours = turn_tokens(tok, before, shown, after)
    start = text.index(call) + len(call)  # (where the turn starts: after the call's tokens)
    call_ids = tok(call, add_special_tokens=False)["input_ids"]
    at = next(i for i in range(len(tokens)) if tokens[i : i + len(call_ids)] == call_ids) + len(call_ids)
    assert tokens[at : at + len(ours)] == ours and start > 0
    assert (
        tok.decode(tokens[at + len(ours) :], skip_special_tokens=False) == "It is 4."
    )  # nothing left between


def test_calls_are_read_in_both_syntaxes_and_what_is_wrong_is_said():
    assert parse(CALLS["v3"][12:-4]) == ("add", {"a": 2, "b": 2})
    assert parse(CALLS["v11"][12:-4]) == ("add", {"a": 2, "b": 2})
    assert parse('[{"name": "add", "arguments": "{\\"a\\": 1}"}]') == (
        "add",
        {"a": 1},
    )  # arguments as a string
    for body, error in [
        ('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]', "one tool call at a time"),
        ("a[ARGS]{}[TOOL_CALLS]b[ARGS]{}", "one tool call at a time"),
        ("add{}", "has no [ARGS]"),
        ("add[ARGS]{a: 1}", "not valid JSON"),
        ("add[ARGS][1]", "not an object"),
        ("add[CALL_ID]x[/INST]yz[ARGS]{}", "is not 9 letters or digits"),
    ]:
        with pytest.raises(ValueError, match=re.escape(error)):
            parse(body)
    assert results("add{}", "error: x") == (
        "[TOOL_RESULTS]",
        "error: x",
        "[/TOOL_RESULTS]",
    )  # (no id to answer)


@pytest.mark.parametrize("version", ["v3", "v11", "v13"])
def test_a_rollout_calls_the_function_and_gets_mistral_commons_turn(tekken, version, user_module):
    m = user_module(TOOLS, "mistral_tools")
    tok = _hf(tekken[version])
    script = [CALLS[version], "It is 4.</s>"]
    tools = ToolsConfig(enabled=True, format=FORMAT[version], names=[], functions=[f"{m}.add"])
    loop = ToolRolloutEngine(Scripted(tok, script, marker="[TOOL_RESULTS]"), tok, tools)
    try:
        (c,), = loop.generate([tok("[INST]Q[/INST]", add_special_tokens=False)["input_ids"]],
                              SamplingParams(max_new_tokens=200))  # fmt: skip
    finally:
        loop.functions.close()  # (the scripted engine has nothing to close)
    tokens, text = _reference(tekken[version], "4")
    call_ids = tok(CALLS[version], add_special_tokens=False)["input_ids"]
    at = next(i for i in range(len(tokens)) if tokens[i : i + len(call_ids)] == call_ids)
    assert c.tool_calls == ("success",)
    last = tok("It is 4.</s>", add_special_tokens=False)["input_ids"]
    # the call, the turn answering it, the next words: mistral-common's (the message's end, </s>, generated)
    assert c.token_ids == tokens[at:] + last[-1:] and tokens[-len(last) + 1 :] == last[:-1]
    turn = len(tokens) - at - len(call_ids) - len(last) + 1
    assert c.tool_mask == [False] * len(call_ids) + [True] * turn + [False] * len(
        last
    )  # only the turn masked
    # what the verifiers read: the model's own segments (the call without its control tokens), no tool output
    plain = CALLS[version]
    for control in ("[TOOL_CALLS]", "[CALL_ID]", "[ARGS]", "</s>"):
        plain = plain.replace(control, "")
    assert c.model_text == plain + "\nIt is 4.</s>"  # (the scripted engine's text keeps its own </s>)
    assert c.sampler_logprobs[: len(call_ids)] == [LOGP] * len(call_ids)


def test_the_formats_load_and_a_template_turn_is_refused():
    cfg = load_config(
        None, ["rollout.tools.enabled=true", "rollout.tools.format=mistral", "rollout.tools.names=[python]"]
    )
    assert cfg.rollout.tools.format == "mistral"
    with pytest.raises(ConfigError, match="format mistral_v7's results turn follows each call"):
        load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=mistral_v7",
                           "rollout.tools.names=[python]", "rollout.tools.turn=chat_template"])  # fmt: skip


def test_mistral_commons_own_templates_ask_for_this_format(tekken):
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer

    from reasonrl.rollout.tool_formats import check_template_format, resolve_format, template_format

    # (the chat template transformers writes for the tokenizer, as mistral-common renders it): v7's and v11's
    # answer with [TOOL_CONTENT] (v11's calls say their own turn, so either format reads them)
    expected = {"v3": "mistral", "v7": "mistral_v7", "v11": "mistral_v7", "v13": "mistral"}
    for version, fmt in expected.items():
        tok = convert_tekken_tokenizer(str(tekken[version]))
        assert template_format(tok) == fmt and resolve_format(tok, "auto") == fmt, version
        check_template_format(tok, "mistral")  # (either Mistral format stays allowed by name)
        check_template_format(tok, "mistral_v7")
