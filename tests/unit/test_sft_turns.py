"""SFT rows' responses (trainer/sft.py): a text or the rest of a conversation; which tokens a
conversation trains (its assistant turns, through the chat template), a template that rewrites earlier
turns refused naming the row, malformed responses named before the model loads, and the cut at
max_new_tokens keeping the mask aligned."""

from __future__ import annotations

import pytest

from reasonrl.errors import InputError
from reasonrl.models.tiny import build_tokenizer
from reasonrl.trainer.sft import check_responses, response_of, response_tokens
from reasonrl.types import Problem

A1, A2 = {"role": "assistant", "content": "1+1=2"}, {"role": "assistant", "content": "2+2=4"}
U2 = {"role": "user", "content": "2+2="}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(["1+1=2 2+2=4 3+3=6"], 60)


def _problem(response, **kw):
    return Problem([{"role": "user", "content": "1+1="}], "4", "reasonrl/arithmetic", uid="u7",
                   extra_info={"response": response, "nested": {"answer": "x"}}, **kw)  # fmt: skip


def test_response_of_reads_dotted_fields():
    p = _problem("r")
    assert (response_of(p, "extra_info.response"), response_of(p, "extra_info.nested.answer")) == ("r", "x")
    assert response_of(p, "ground_truth") == "4"
    assert response_of(p, "extra_info.missing") is None and response_of(p, "prompt") is None


def test_a_conversation_trains_its_assistant_turns_and_ends_with_the_end_token(tok):
    ids, frozen, cut = response_tokens(tok, _problem([A1, U2, A2]), "extra_info.response", 100)
    assert not cut and len(frozen) == len(ids) and ids[-1] == tok.eos_token_id
    trained = tok.decode([t for t, f in zip(ids, frozen) if not f])
    assert trained == "1+1=22+2=4" + tok.eos_token
    assert tok.decode([t for t, f in zip(ids, frozen) if f]) == "<|user|>2+2=<|assistant|>"
    text_ids, text_frozen, _ = response_tokens(tok, _problem("1+1=2"), "extra_info.response", 100)
    assert text_frozen is None and text_ids[-1] == tok.eos_token_id
    short, short_frozen, cut = response_tokens(tok, _problem([A1, U2, A2]), "extra_info.response", 5)
    assert cut and short == ids[:5] and short_frozen == frozen[:5]


def test_a_template_that_rewrites_earlier_turns_is_refused_naming_the_row(tok):
    tok = build_tokenizer(["1+1=2 2+2=4"], 60)
    tok.chat_template = (  # earlier assistant turns lose their content (as thinking templates drop thoughts)
        "{% for m in messages %}{% if m['role'] == 'assistant' and not loop.last %}<|assistant|>"
        "{% else %}<|{{ m['role'] }}|>{{ m['content'] }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    with pytest.raises(
        InputError, match="uid 'u7': the chat template does not render this conversation's turns as"
    ):
        response_tokens(tok, _problem([A1, U2, A2]), "extra_info.response", 100)


@pytest.mark.parametrize(("response", "kw", "error"), [
    ([U2, A2], {}, "the turns must start and end with an assistant message"),
    ([A1, U2], {}, "the turns must start and end with an assistant message"),
    ([A1, {"role": "user"}, A2], {}, "messages must be {role, content} with text"),
    ([], {}, "messages must be {role, content} with text"),
    ([A1], {"apply_chat_template": False}, "several turns need the tokenizer's chat template"),
    ("", {}, "no response text at extra_info.response"),
    (7, {}, "no response text at extra_info.response .* got int '7'"),
])  # fmt: skip
def test_malformed_responses_are_named(response, kw, error):
    with pytest.raises(InputError, match=r"train data: row 0 \(uid u7\): .*" + error.replace("{", r"\{")):
        check_responses([_problem(response, **kw)], "extra_info.response", "train data")
    check_responses([_problem([A1, U2, A2]), _problem("fine")], "extra_info.response", "train data")


def test_a_think_block_the_prompt_already_opens_is_not_opened_twice():
    tok = build_tokenizer(["1+1=2 2+2=4 <think> </think>"], 80)
    trace = "<think>\n1+1=2</think>2"
    plain = response_tokens(tok, _problem(trace), "extra_info.response", 100)[0]
    assert tok.decode(plain, skip_special_tokens=True).replace(" ", "").startswith("<think>")
    tok.chat_template = (  # a thinking template: the generation prompt opens the think block
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}"
    )
    ids = response_tokens(tok, _problem(trace), "extra_info.response", 100)[0]
    assert ids == tok("1+1=2</think>2", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    # a response without its own <think> is left as it is
    assert response_tokens(tok, _problem("1+1=2"), "extra_info.response", 100)[0][0] == ids[0]
