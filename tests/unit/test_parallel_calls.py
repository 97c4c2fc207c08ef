"""Several tool calls in one message (`rollout.tools.parallel_calls`; verl's `max_parallel_calls`, TRL's tool
loop, which runs every call of a message): the message's first calls run in turn, the message is cut after
the last that runs, and one turn answers them all, as the model's own chat template writes a message's tool
results (checked against the real Qwen templates TRL ships and against mistral-common's encoding)."""

from __future__ import annotations

import copy
from importlib.resources import files

import pytest
from test_function_tools import TOOLS
from test_mistral_tools import ID, _hf, _mistral, tekken  # noqa: F401 (the fixture)
from test_tool_rollouts import _ALPHABET, LOGP, Scripted

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.config.foreign import convert
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.tool_formats import TOOL_FORMATS
from reasonrl.rollout.tool_turns import answer_tokens, template_turn
from reasonrl.rollout.tools import ToolRolloutEngine

TURN = "<|im_start|>user"  # once in each turn answering a message's calls (the scripted engine counts them)


def _call(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


@pytest.fixture(scope="module")
def tok():
    t = build_tokenizer([_ALPHABET + ' <tool_call> </tool_call> <tool_response> </tool_response> "name": '
                         '"multiply", "lookup", "arguments": "city": Paris temperature im_start im_end user '
                         "assistant set holds tool calls at most can run now (none ran)"], 400)  # fmt: skip
    t.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    return t


def _run(tok, script, max_new=400, **cfg):
    loop = ToolRolloutEngine(
        Scripted(tok, script, marker=TURN), tok, ToolsConfig(enabled=True, format="hermes", **cfg)
    )
    try:
        ((c,),) = loop.generate(
            [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=max_new)
        )
    finally:
        if loop.functions is not None:
            loop.functions.close()  # (the scripted engine has nothing to close)
    return c


def _masked(c, masked: bool) -> list[int]:
    return [t for t, m in zip(c.token_ids, c.tool_mask) if m == masked]


def test_a_messages_calls_run_and_one_turn_answers_them(tok, user_module):
    m = user_module(TOOLS, "parallel_tools")
    message = "\n".join([_call("multiply", '{"a": 6, "b": 7}'), _call("lookup", '{"city": "Paris"}'),
                         _call("multiply", '{"a": 1, "b": 1}')])  # fmt: skip
    script = [message, "So \\boxed{42}."]
    functions = [f"{m}.multiply", f"{m}.lookup"]
    c = _run(tok, script, names=[], functions=functions, parallel_calls=2)
    assert c.tool_calls == ("success", "success")  # the first two; the message is cut after the second
    both = "\n".join(message.split("\n")[:6])
    outputs = ["42", "{'city': 'Paris', 'temperature': 21}"]
    hermes = TOOL_FORMATS.get("hermes")
    before, after = hermes.output.split("{output}")
    # the turn answering both: one user turn with a <tool_response> each (Qwen's template; checked below)
    assert _masked(c, True) == answer_tokens(tok, [before, hermes.between, after], outputs)
    assert tok.decode(_masked(c, False)) == both + "So \\boxed{42}."
    assert c.text == (f"{both}\nuser\n<tool_response>\n42\n</tool_response>\n<tool_response>\n{outputs[1]}\n"
                      "</tool_response>\nassistant\nSo \\boxed{42}.")  # fmt: skip
    assert c.model_text == both + "\nSo \\boxed{42}."
    assert c.sampler_logprobs == [0.0 if m else LOGP for m in c.tool_mask]
    # one at a time (the default): the first call runs, the rest of the message is cut, the model goes on
    one = _run(tok, script, names=[], functions=functions)
    assert (
        one.tool_calls == ("success",)
        and one.model_text == _call("multiply", '{"a": 6, "b": 7}') + "\nSo \\boxed{42}."
    )


def test_calls_run_in_turn_and_max_calls_still_counts_each(tok):
    first = "\n".join(
        [_call("python", '{"code": "x = 6\\nprint(\\"set\\")"}'), _call("python", '{"code": "print(x * 7)"}')]
    )
    second = "\n".join(
        [_call("python", '{"code": "print(x + 1)"}'), _call("python", '{"code": "print(x + 2)"}')]
    )
    c = _run(tok, [first, second, "done"], max_calls=3, parallel_calls=2)
    # the second call saw the first's variable (run after it, its cell replayed); the third message ran one
    # call, the completion's last (max_calls), and was cut after it
    assert c.tool_calls == ("success", "success", "success")
    answers = [t.split("\n</tool_response>")[0] for t in c.text.split("<tool_response>\n")[1:]]
    assert answers == ["set", "42", "7"]
    assert "x + 2" not in c.text and c.model_text.endswith('print(x + 1)"}}\n</tool_call>\ndone')


@pytest.mark.parametrize("template", ["qwen2_5.jinja", "qwen3.jinja", "qwen3_instruct_2507.jinja"])
def test_the_hermes_turn_for_several_calls_is_qwens_own(tok, template):
    """TRL ships the Qwen chat templates: rendered with two tool messages after an assistant one, they write
    what hermes's own turn writes for two outputs; with `turn: chat_template` the loop uses theirs."""
    trl = pytest.importorskip("trl")
    qwen = copy.deepcopy(tok)  # (the module's tokenizer keeps its own template)
    qwen.chat_template = (files(trl) / "chat_templates" / template).read_text()
    hermes = TOOL_FORMATS.get("hermes")
    before, after = hermes.output.split("{output}")
    kwargs = {"enable_thinking": False} if template == "qwen3.jinja" else {}
    think = "<think>\n\n</think>\n\n" if template == "qwen3.jinja" else ""
    assert (
        template_turn(qwen, kwargs, count=2)
        == before + "{output}" + hermes.between + "{output}" + after + think
    )
    assert template_turn(qwen, kwargs, count=3).count(hermes.between) == 2
    loop = ToolRolloutEngine(Scripted(qwen, [_call("python", '{"code": "print(1)"}') * 2, "done"], marker=TURN),
                             qwen, ToolsConfig(enabled=True, format="hermes", turn="chat_template", parallel_calls=2),
                             kwargs)  # fmt: skip
    ((c,),) = loop.generate(
        [qwen("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    pieces = (before + "{output}" + hermes.between + "{output}" + after + think).split("{output}")
    assert c.tool_calls == ("success", "success") and _masked(c, True) == answer_tokens(
        qwen, pieces, ["1", "1"]
    )


def _reference(path, calls: list[tuple[str, str, str]], outputs: list[str]):
    """mistral-common's tokens of a question, one assistant message with `calls` (id, name, arguments), a tool
    message per output, and the assistant's next words."""
    from mistral_common.protocol.instruct.messages import AssistantMessage, ToolMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import FunctionCall, ToolCall

    messages = [UserMessage(content="Q"),
                AssistantMessage(tool_calls=[ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for i, n, a in calls]),
                *(ToolMessage(content=o, tool_call_id=i) for (i, _, _), o in zip(calls, outputs)),
                AssistantMessage(content="It is 4.", prefix=True)]  # fmt: skip
    return _mistral(path).encode_chat_completion(ChatCompletionRequest(messages=messages)).tokens


MISTRAL = {  # a message with two calls to `add`, as each version's model writes it
    "v3": f'[TOOL_CALLS][{{"name": "add", "arguments": {{"a": 2, "b": 2}}, "id": "{ID}"}}, '
    '{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "jklmnopqr"}]</s>',
    "v11": f'[TOOL_CALLS]add[CALL_ID]{ID}[ARGS]{{"a": 2, "b": 2}}[TOOL_CALLS]add[CALL_ID]jklmnopqr[ARGS]{{"a": 1, "b": 2}}</s>',
}
THIRD = {"v3": ', {"name": "add", "arguments": {"a": 0, "b": 0}, "id": "stuvwxyz1"}]</s>',
         "v11": '[TOOL_CALLS]add[CALL_ID]stuvwxyz1[ARGS]{"a": 0, "b": 0}</s>'}  # fmt: skip


@pytest.mark.parametrize("version", ["v3", "v11"])
def test_a_mistral_message_with_two_calls_gets_mistral_commons_two_turns(tekken, version, user_module):  # noqa: F811
    from test_mistral_tools import TOOLS as ADD

    m = user_module(ADD, "mistral_parallel")
    tok = _hf(tekken[version])
    tools = ToolsConfig(enabled=True, format="mistral", names=[], functions=[f"{m}.add"], parallel_calls=2)
    loop = ToolRolloutEngine(Scripted(tok, [MISTRAL[version], "It is 4.</s>"], marker="</s>"), tok, tools)
    try:
        ((c,),) = loop.generate(
            [tok("[INST]Q[/INST]", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=200)
        )
    finally:
        loop.functions.close()
    assert c.tool_calls == ("success", "success")
    calls = [(ID, "add", '{"a": 2, "b": 2}'), ("jklmnopqr", "add", '{"a": 1, "b": 2}')]
    tokens = _reference(tekken[version], calls, ["4", "3"])
    call_ids = tok(MISTRAL[version], add_special_tokens=False)["input_ids"]
    at = next(i for i in range(len(tokens)) if tokens[i : i + len(call_ids)] == call_ids)
    last = tok("It is 4.</s>", add_special_tokens=False)["input_ids"]
    assert c.token_ids == tokens[at:] + last[-1:]  # the message, both results turns, the next words: theirs
    # three calls where two may run: the message cannot be cut (its </s> ends it), so none runs
    three = MISTRAL[version].replace("]</s>" if version == "v3" else "</s>", THIRD[version])
    loop = ToolRolloutEngine(Scripted(tok, [three, "It is 4.</s>"], marker="</s>"), tok, tools)
    try:
        ((c,),) = loop.generate(
            [tok("[INST]Q[/INST]", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
        )
    finally:
        loop.functions.close()
    assert c.tool_calls == ("invalid",)
    assert "error: the message holds 3 tool calls; at most 2 can run now (none ran)" in tok.decode(
        _masked(c, True)
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["rollout.tools.parallel_calls=0"], "rollout.tools.parallel_calls must be >= 1, got 0"),
        (["rollout.tools.format=markdown", "rollout.tools.parallel_calls=2"],
         "rollout.tools.parallel_calls needs calls that name their tool: format deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, mistral, mistral_v7, muse_glimmer, qwen3_coder, not markdown"),
    ],
)  # fmt: skip
def test_settings_that_cannot_work_are_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=hermes", *extra])


def test_verls_max_parallel_calls_converts(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4 "
                      "actor_rollout_ref.rollout.multi_turn.enable=True actor_rollout_ref.rollout.multi_turn."
                      "max_assistant_turns=3 actor_rollout_ref.rollout.multi_turn.max_parallel_calls=2\n")  # fmt: skip
    tools = convert("verl", script).recipe["rollout"]["tools"]
    assert (tools["parallel_calls"], tools["max_calls"]) == (2, 4)  # two turns of calls, two calls each
