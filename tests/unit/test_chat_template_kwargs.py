"""Chat-template arguments (`data.chat_template_kwargs`, a row's `chat_template_kwargs`, eval's
`--chat-template-kwarg`): Qwen3's `enable_thinking=false` and the like reach the template for every
prompt of a run (files, built-in tasks, mixture sources, validation benchmarks) and of an eval; a row's
own win; bad keys are one-line errors naming where they are; an eval's fingerprint holds them."""

from __future__ import annotations

import copy
import json

import pytest

from reasonrl.config import ConfigError, load_config
from reasonrl.data.prompts import _render, encode_prompt, prompt_opens_think, with_template_kwargs
from reasonrl.errors import InputError
from reasonrl.types import Problem

# Qwen3's switch, reduced: thinking on unless enable_thinking is false, then an empty closed think block
QWEN3_LIKE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)


@pytest.fixture
def tok(tiny_model_and_tokenizer):
    t = copy.deepcopy(tiny_model_and_tokenizer[1])
    t.chat_template = QWEN3_LIKE
    return t


def _problem(kwargs=None, text="What is 2 + 3?"):
    return Problem(
        [{"role": "user", "content": text}], "5", "math", "math", {}, chat_template_kwargs=kwargs or {}
    )


def test_the_arguments_reach_the_template_and_decide_the_open_think_block(tok):
    thinking, plain = _problem(), _problem({"enable_thinking": False})
    assert prompt_opens_think(tok, thinking) is True
    assert prompt_opens_think(tok, plain) is False  # the closed block: the answer is scored as written
    assert _render(tok, plain, tokenize=False).endswith("<|assistant|><think>\n\n</think>\n\n")
    assert _render(tok, thinking, tokenize=False).endswith("<|assistant|><think>\n")
    assert len(encode_prompt(tok, plain)) > len(encode_prompt(tok, thinking))  # the ids the engine gets


def test_defaults_go_under_each_rows_own():
    rows = [_problem(), _problem({"enable_thinking": True, "x": 1})]
    got = with_template_kwargs(rows, {"enable_thinking": False, "y": 2})
    assert [p.chat_template_kwargs for p in got] == [
        {"enable_thinking": False, "y": 2},
        {"enable_thinking": True, "x": 1, "y": 2},
    ]
    assert rows[0].chat_template_kwargs == {}  # the rows given are not changed
    assert with_template_kwargs(rows, {}) is rows


def test_a_rows_own_arguments_round_trip_and_bad_ones_name_the_row():
    p = Problem.from_row(
        {**_problem().to_row(), "chat_template_kwargs": {"enable_thinking": False}}, "f.jsonl row 3"
    )
    assert p.chat_template_kwargs == {"enable_thinking": False}
    assert p.to_row()["chat_template_kwargs"] == {"enable_thinking": False}
    assert (
        "chat_template_kwargs" not in _problem().to_row()
    )  # none: no column (an empty struct has no parquet type)
    as_json = Problem.from_row({**_problem().to_row(), "chat_template_kwargs": '{"enable_thinking": false}'})
    assert as_json.chat_template_kwargs == {"enable_thinking": False}
    for bad, why in (({"tokenize": False}, "'tokenize'"), ({"1x": 1}, "'1x'"), ([1], "must be a mapping")):
        with pytest.raises(InputError, match=rf"^f.jsonl row 3: field 'chat_template_kwargs' .*{why}"):
            Problem.from_row({**_problem().to_row(), "chat_template_kwargs": bad}, "f.jsonl row 3")


def test_the_recipe_key_is_checked_and_reaches_every_training_prompt(tmp_path):
    from reasonrl.trainer.setup import load_data

    with pytest.raises(ConfigError, match=r"^data\.chat_template_kwargs has the key 'add_generation_prompt'"):
        load_config(None, ["data.chat_template_kwargs={add_generation_prompt: true}"])
    cfg = load_config(None, ["data.chat_template_kwargs={enable_thinking: false}", "data.train_size=20",
                             "data.val_size=8", "val.size=8"])  # fmt: skip
    train, val = load_data(cfg)
    assert train and val
    assert all(p.chat_template_kwargs == {"enable_thinking": False} for p in train + val)
    # files: a row's own arguments win over the recipe's
    rows = [_problem().to_row(), {**_problem().to_row(), "chat_template_kwargs": {"enable_thinking": True}}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(None, ["data.chat_template_kwargs={enable_thinking: false}", f"data.train_files=[{path}]",
                             f"data.val_files=[{path}]"])  # fmt: skip
    train, _ = load_data(cfg)
    assert [p.chat_template_kwargs for p in train] == [{"enable_thinking": False}, {"enable_thinking": True}]


def test_mixture_sources_draw_prompts_with_the_arguments(tok):
    from reasonrl.data.mixture import build_sampler

    cfg = load_config(None, ["data.chat_template_kwargs={enable_thinking: false}",
                             "data.mixture=[{name: a, task: arithmetic}, {name: c, task: countdown}]"])  # fmt: skip
    sampler = build_sampler(cfg.data, 6, [], tok, log=lambda *a: None)
    sampler.bind(tok)
    drawn = sampler.next()
    assert len(drawn) == 6 and all(p.chat_template_kwargs == {"enable_thinking": False} for p in drawn)
    assert not any(prompt_opens_think(tok, p) for p in drawn)


def test_an_evals_fingerprint_holds_them_and_the_flag_is_checked():
    from reasonrl.cli.evaluate import template_kwargs_arg
    from reasonrl.eval.runner import eval_setup
    from reasonrl.rollout.base import SamplingParams

    params = SamplingParams()
    plain = eval_setup("m", [("b", [_problem()], params)], "hf", 0, 8)
    off = eval_setup("m", [("b", [_problem({"enable_thinking": False})], params)], "hf", 0, 8)
    assert plain["benchmarks"]["b"]["fingerprint"] != off["benchmarks"]["b"]["fingerprint"]
    assert template_kwargs_arg(["enable_thinking=false", "mode=fast"]) == {
        "enable_thinking": False,
        "mode": "fast",
    }
    with pytest.raises(
        InputError, match=r"^--chat-template-kwarg has the key 'tokenize', which is not a chat"
    ):
        template_kwargs_arg(["tokenize=false"])
    with pytest.raises(InputError, match=r"--chat-template-kwarg 'x': expected KEY=VALUE"):
        template_kwargs_arg(["x"])
