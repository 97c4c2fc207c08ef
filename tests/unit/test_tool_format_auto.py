"""`rollout.tools.format: auto`: the format of calls the model's chat template asks for, read from the real
templates TRL ships (as TRL picks its reader of a model's tool calls by the template); a template that shows no
calls reasonrl reads is an error naming what it looked for, and what the resolved format cannot do is refused
when the engine is built."""

from __future__ import annotations

from importlib.resources import files

import pytest
from test_function_tools import TOOLS
from test_tool_rollouts import _ALPHABET, Scripted

from reasonrl.cli.eval_rollout import tools_arg
from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.tool_formats import resolve_format
from reasonrl.rollout.tools import ToolRolloutEngine

EXPECTED = {"qwen2_5.jinja": "hermes", "qwen3.jinja": "hermes", "qwen3_5_think.jinja": "qwen3_coder",
            "glm4moe.jinja": "glm4_moe", "gptoss.jinja": "harmony", "llama3_1.jinja": "llama3_json",
            "llama3_2.jinja": "llama3_json", "gemma4_v5.jinja": "gemma4", "lfm2.jinja": "lfm2",
            "lfm2_2_5.jinja": "lfm2", "deepseekv3.jinja": "deepseek_v3", "muse_glimmer.jinja": "muse_glimmer",
            "nemotron_3_nano.jinja": "qwen3_coder", "qwen3_6.jinja": "qwen3_coder"}  # fmt: skip


@pytest.fixture(scope="module")
def tok():
    t = build_tokenizer([_ALPHABET + ' <tool_call> </tool_call> <tool_response> </tool_response> "name": '
                         '"multiply", "arguments": im_start im_end user assistant'], 400)  # fmt: skip
    t.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    return t


def _with(tok, template: str | None):
    import copy

    t = copy.deepcopy(tok)
    t.chat_template = template
    return t


def _template(name: str) -> str:
    return (files(pytest.importorskip("trl")) / "chat_templates" / name).read_text()


def trl_templates(prefix: str) -> list[tuple[str, str]]:
    """(file name, text) of every chat template TRL ships whose name starts with `prefix`, its training
    variants left out (skipped without trl)."""
    folder = files(pytest.importorskip("trl")) / "chat_templates"
    chosen = [p for p in folder.iterdir() if p.name.startswith(prefix) and "training" not in p.name]
    return sorted((p.name, p.read_text()) for p in chosen)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_auto_is_the_format_each_template_asks_for(tok, name):
    assert resolve_format(_with(tok, _template(name)), "auto") == EXPECTED[name]
    assert resolve_format(_with(tok, _template(name)), "markdown") == "markdown"  # (a named format is itself)


def test_an_engine_with_auto_runs_the_templates_format(tok, user_module):
    m = user_module(TOOLS, "auto_tools")
    qwen = _with(tok, _template("qwen2_5.jinja"))
    tools = ToolsConfig(enabled=True, format="auto", names=[], functions=[f"{m}.multiply"])
    script = ['<tool_call>\n{"name": "multiply", "arguments": {"a": 6, "b": 7}}\n</tool_call>', "done"]
    loop = ToolRolloutEngine(Scripted(qwen, script, marker="<tool_response>"), qwen, tools)
    try:
        ((c,),) = loop.generate(
            [qwen("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=200)
        )
    finally:
        loop.functions.close()
    assert loop.cfg.format == "hermes" and c.tool_calls == ("success",)
    assert "<tool_response>\n42\n</tool_response>" in c.text


def test_what_auto_cannot_do_is_said(tok):
    chatml = "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    with pytest.raises(ConfigError, match=r"format=auto: the model's chat template shows no tool calls .*<tool_call> "
                       r"\(hermes\).*; name the format"):  # fmt: skip
        ToolRolloutEngine(Scripted(tok, ["x"]), _with(tok, chatml), ToolsConfig(enabled=True, format="auto"))
    # gpt-oss's harmony answers each call by its tool's name: the template's turn cannot
    with pytest.raises(ConfigError, match="format harmony's results turn follows each call"):
        gptoss = _with(tok, _template("gptoss.jinja"))
        ToolRolloutEngine(
            Scripted(gptoss, ["x"]), gptoss, ToolsConfig(enabled=True, format="auto", turn="chat_template")
        )
    # a recipe and an eval take auto with tools called by name; an unknown format lists it
    cfg = load_config(
        None, ["rollout.tools.enabled=true", "rollout.tools.format=auto", "rollout.tools.parallel_calls=2"]
    )
    assert cfg.rollout.tools.format == "auto"
    assert tools_arg("auto", final=False).format == "auto"
    with pytest.raises(ConfigError, match=r"not one of .* or auto"):
        load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=jsonl"])
