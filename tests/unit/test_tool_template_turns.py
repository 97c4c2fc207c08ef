"""rollout.tools.turn: chat_template: what follows a tool call is a `tool` message as the tokenizer's own
chat template renders it (ChatML's equals the hermes format's built-in turn; Llama 3's is an ipython
turn), with the prompts' template arguments; a template that cannot render one is an error before any
engine is built."""

from __future__ import annotations

import copy

import pytest
from test_tool_rollouts import _ALPHABET, Scripted

from reasonrl.config import ConfigError, ToolsConfig
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.factory import build_rollout_engine
from reasonrl.rollout.tool_formats import TOOL_FORMATS
from reasonrl.rollout.tool_turns import template_turn
from reasonrl.rollout.tools import ToolRolloutEngine

# Qwen2.5's structure (newlines written as strings, as real templates do: transformers trims a newline
# after a block tag): tool messages in a user turn, each in <tool_response> tags
CHATML = (
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{%- else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{%- endif %}"
)
# Llama 3.1's: a tool result is an ipython turn
LLAMA3 = (
    "{{ bos_token }}{%- for m in messages %}"
    "{{ '<|start_header_id|>' + ('ipython' if m.role == 'tool' else m.role) + '<|end_header_id|>\\n\\n' }}"
    "{{ m.content + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
# Gemma's: only user and model turns, alternating
STRICT = (
    "{%- for m in messages %}{%- if m.role not in ['user', 'assistant'] %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}"
    "{{ m.content }}{%- endfor %}"
)


@pytest.fixture(scope="module")
def base_tok():
    return build_tokenizer(
        [_ALPHABET + " <tool_call> </tool_call> <tool_response> </tool_response> ipython"], 300
    )


def _with(tok, template: str):
    t = copy.deepcopy(tok)
    t.chat_template = template
    return t


def test_chatml_renders_the_hermes_formats_own_turn(base_tok):
    hermes = TOOL_FORMATS.get("hermes").output
    assert template_turn(_with(base_tok, CHATML)) == hermes
    # the prompts' template arguments reach the turn's generation prompt (Qwen3 without thinking)
    quiet = template_turn(_with(base_tok, CHATML), {"enable_thinking": False})
    assert quiet == hermes + "<think>\n\n</think>\n\n"


def test_llama3_renders_an_ipython_turn(base_tok):
    assert template_turn(_with(base_tok, LLAMA3)) == (
        "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{output}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_a_call_that_closes_the_message_is_not_closed_again(base_tok):
    """python_tag's call ends with <|eom_id|>, which ends the assistant's message: the template's turn
    then starts at the tool's header, as the format's own turn does (not with a second <|eot_id|>)."""
    assert template_turn(_with(base_tok, LLAMA3), ends_message=True) == TOOL_FORMATS.get("python_tag").output
    # ChatML: the turn after an assistant message has no closing of its own to drop when nothing matches
    want = "<|im_start|>user\n<tool_response>\n{output}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert template_turn(_with(base_tok, CHATML), ends_message=True) == want
    tok = _with(base_tok, LLAMA3)
    marks = ["<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
    tok.add_special_tokens({"additional_special_tokens": marks})
    script = ["<|python_tag|>print(6*7)<|eom_id|>", "So 42."]
    engine = ToolRolloutEngine(Scripted(tok, script, marker="ipython"), tok,
                               ToolsConfig(enabled=True, format="python_tag", turn="chat_template"))  # fmt: skip
    ((c,),) = engine.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    output = [t for t, m in zip(c.token_ids, c.tool_mask) if m]
    assert c.tool_calls == ("success",) and tok.decode(output).startswith("<|start_header_id|>ipython")
    assert [t for t in c.token_ids if t == tok.convert_tokens_to_ids("<|eot_id|>")] == [
        tok.convert_tokens_to_ids("<|eot_id|>")
    ]


def test_templates_that_cannot_render_a_tool_turn_are_refused(base_tok):
    with pytest.raises(ConfigError, match="cannot render a tool message.*Conversation roles must alternate"):
        template_turn(_with(base_tok, STRICT))
    with pytest.raises(ConfigError, match="cannot render a tool message"):
        template_turn(_with(base_tok, None))  # no chat template at all
    drops = "{% for m in messages %}{% if m.role != 'tool' %}{{ m.content }}{% endif %}{% endfor %}"
    with pytest.raises(
        ConfigError, match="does not show an assistant message and then a tool message's content"
    ):
        template_turn(_with(base_tok, drops))
    tools = ToolsConfig(enabled=True, format="hermes", turn="chat_template")
    with pytest.raises(ConfigError, match="rollout.tools.turn=chat_template"):  # before the engine is built
        build_rollout_engine("no-such-engine", None, _with(base_tok, STRICT), tools=tools)


def test_the_engine_answers_a_call_in_the_templates_turn(base_tok):
    tok = _with(base_tok, LLAMA3)
    tok.add_special_tokens(
        {"additional_special_tokens": ["<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]}
    )
    eot, start = tok.convert_tokens_to_ids(["<|eot_id|>", "<|start_header_id|>"])
    script = ['<tool_call>{"name": "python", "arguments": {"code": "print(6*7)"}}</tool_call>', "done"]
    engine = ToolRolloutEngine(Scripted(tok, script, marker="ipython"), tok,
                               ToolsConfig(enabled=True, format="hermes", turn="chat_template"))  # fmt: skip
    ((c,),) = engine.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    assert c.tool_calls == ("success",)
    output = [t for t, m in zip(c.token_ids, c.tool_mask) if m]
    # the whole turn is the tool's (no loss): its markers are the tokenizer's special tokens
    assert tok.decode(output) == (
        "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n42<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert output.count(eot) == 2 and output.count(start) == 2
    assert c.model_text.endswith("done") and "42" not in c.model_text


def test_llama_python_tag_calls_run_and_are_answered_in_an_ipython_turn(base_tok):
    """Llama 3.1's built-in code interpreter: the call's markers are special tokens (invisible in the text
    the engines return), found in the text that keeps them; the code runs; the ipython turn is the tool's."""
    tok = copy.deepcopy(base_tok)
    marks = ["<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
    tok.add_special_tokens({"additional_special_tokens": marks})
    tag, eom = tok.convert_tokens_to_ids(marks[:2])
    script = ["Let me compute. <|python_tag|>x = 6\nprint(x*7)<|eom_id|>", "So 42."]
    engine = ToolRolloutEngine(Scripted(tok, script, marker="ipython"), tok,
                               ToolsConfig(enabled=True, format="python_tag"))  # fmt: skip
    ((c,),) = engine.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    assert c.tool_calls == ("success",)
    model = [t for t, m in zip(c.token_ids, c.tool_mask) if not m]
    assert model.count(tag) == 1 and model.count(eom) == 1  # the call, whole, is the model's
    output = [t for t, m in zip(c.token_ids, c.tool_mask) if m]
    assert tok.decode(output) == ("<|start_header_id|>ipython<|end_header_id|>\n\n42<|eot_id|>"
                                  "<|start_header_id|>assistant<|end_header_id|>\n\n")  # fmt: skip
    assert c.model_text == "Let me compute. x = 6\nprint(x*7)\nSo 42." and "42" not in c.model_text[:-3]
    # the same text without the special tokens calls nothing (the markdown and hermes formats find none)
    plain = ToolRolloutEngine(
        Scripted(tok, script, marker="ipython"), tok, ToolsConfig(enabled=True, format="hermes")
    )
    ((c,),) = plain.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    assert c.tool_calls == ()


def test_turn_is_checked_with_the_other_tool_settings():
    from reasonrl.config import load_config

    with pytest.raises(ConfigError, match="rollout.tools.turn must be format or chat_template, got 'jinja'"):
        load_config(None, ["rollout.tools.enabled=true", "rollout.tools.turn=jinja"])
    assert load_config(
        None, ["rollout.tools.enabled=true", "rollout.tools.turn=chat_template"]
    ).rollout.tools.turn == ("chat_template")
