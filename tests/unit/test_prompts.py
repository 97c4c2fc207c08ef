"""Prompt side of the pipeline: the token budget checked at load time, the think block a prompt opens,
and plain-text prompts for tokenizers without a chat template."""

from __future__ import annotations

import copy

import pytest

from reasonrl.data.prompts import encode_prompt, fit_prompts, plain_text, prompt_opens_think, scoring_text
from reasonrl.rewards import score
from reasonrl.types import Problem

R1_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}"
)


def _problem(text="What is 2 + 3?", system=None, gt="5"):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    return Problem(msgs, gt, "math", "math", {})


@pytest.fixture
def tok(tiny_model_and_tokenizer):
    return copy.deepcopy(tiny_model_and_tokenizer[1])


def test_overlong_prompt_is_a_load_time_error_naming_the_row_or_dropped_with_a_count(tok):
    short, long = _problem("1 + 1"), _problem("1 + 1 " * 200)
    budget = len(encode_prompt(tok, short)) + 5
    with pytest.raises(
        ValueError, match=r"train data row 1 \(uid .*\): prompt has \d+ tokens > data.max_prompt_tokens="
    ):
        fit_prompts(tok, [short, long, short], budget, "train data")
    seen = []
    kept = fit_prompts(tok, [short, long, short], budget, "train data", drop=True, log=seen.append)
    assert kept == [short, short] and seen == [f"train data: dropped 1 of 3 prompts over {budget} tokens"]


def test_a_prompt_of_exactly_the_budget_fits_and_the_longest_kept_is_reported(tok):
    from reasonrl.data.prompts import encode_prompts

    a, b = _problem("1 + 1"), _problem("12 + 34 + 56")
    na, nb = len(encode_prompt(tok, a)), len(encode_prompt(tok, b))
    assert na < nb
    seen, stats = [], {}
    assert (
        fit_prompts(tok, [a, b], nb, "val", log=seen.append, stats=stats) == [a, b] and seen == []
    )  # no drop line
    assert stats == {"longest": nb}
    stats = {}
    assert fit_prompts(tok, [b, a], nb - 1, "val", drop=True, log=seen.append, stats=stats) == [a]
    assert stats == {"longest": na}  # of the prompts kept
    assert encode_prompts(tok, [a, b], nb) == [encode_prompt(tok, a), encode_prompt(tok, b)]
    assert encode_prompts(tok, [a, b]) == encode_prompts(tok, [a, b], nb)  # no budget: no check
    with pytest.raises(
        ValueError, match=rf"prompt of problem 1 \(uid .*\) has {nb} tokens > data.max_prompt_tokens={nb - 1}"
    ):
        encode_prompts(tok, [a, b], nb - 1)


def test_an_answer_inside_a_think_block_opened_by_the_prompt_earns_nothing(tok):
    tok.chat_template = R1_TEMPLATE
    p = _problem()
    assert prompt_opens_think(tok, p)
    unclosed = "2 + 3 is \\boxed{5}, let me double check"  # the model never left its reasoning
    closed = "2 + 3 = 5</think>The answer is \\boxed{5}."
    assert score(unclosed, p).score == 1.0  # what a verifier alone would say
    assert score(scoring_text(unclosed, True), p).score == 0.0
    assert score(scoring_text(closed, True), p).score == 1.0
    about = _problem("What does the tag <think> do in a prompt?")  # a question that mentions the tag
    assert prompt_opens_think(tok, about)
    tok.chat_template = R1_TEMPLATE.replace("<think>\n", "")
    assert not prompt_opens_think(tok, p) and scoring_text(unclosed, False) == unclosed
    assert not prompt_opens_think(tok, about)  # only the generation prompt can open a think block


def test_tokenizer_without_chat_template_keeps_system_messages(tok):
    tok.chat_template = None
    p = _problem("What is 2 + 3?", system="Answer in a box.")
    assert plain_text(p) == "Answer in a box.\n\nWhat is 2 + 3?"
    assert encode_prompt(tok, p) == list(tok(plain_text(p), add_special_tokens=True)["input_ids"])
    assert encode_prompt(tok, p) != list(tok("What is 2 + 3?", add_special_tokens=True)["input_ids"])


def test_a_plain_text_prompt_gets_the_tokenizer_s_special_tokens(tok):
    """Base models without a chat template (Llama-style) expect their BOS in front of the prompt."""
    from tokenizers.processors import TemplateProcessing

    tok.chat_template = None
    bos = tok.convert_tokens_to_ids("<|endoftext|>")
    tok._tokenizer.post_processor = TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", bos)]
    )
    p = _problem("What is 2 + 3?")
    ids = encode_prompt(tok, p)
    assert ids[0] == bos and ids[1:] == list(tok(plain_text(p), add_special_tokens=False)["input_ids"])


# Gemma 2's template, in short: a system turn is refused
GEMMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def test_a_prompt_the_chat_template_refuses_is_an_error_naming_it(tok):
    from reasonrl.errors import InputError

    tok.chat_template = GEMMA2_TEMPLATE
    assert len(encode_prompt(tok, _problem())) > 5  # a user turn alone renders
    bad = _problem(system="Think step by step.")
    for fn in (encode_prompt, prompt_opens_think):
        with pytest.raises(InputError, match=r"prompt of uid .* \(roles: system, user\): the tokenizer's chat "
                           r"template refuses it: System role not supported; fold the system message"):  # fmt: skip
            fn(tok, bad)
    with pytest.raises(InputError, match="System role not supported"):  # at load time, before any work
        fit_prompts(tok, [_problem(), bad], 512, "train data")
