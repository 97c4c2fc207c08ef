"""Shaping verifiers: think/answer format and DAPO overlong punishment."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)

PROB = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="1", data_source="math")


def fmt(response, **opts):
    return VERIFIERS.get("format_think_answer")(response, PROB, **opts)


@pytest.mark.parametrize(
    "response, require, expected, reason",
    [
        ("<think>work</think><answer>5</answer>", "any", 1.0, "correct"),
        ("<think>work</think> so \\boxed{5}", "any", 1.0, "correct"),
        ("work</think><answer>5</answer>", "any", 1.0, "correct"),  # <think> pre-filled by template
        ("<think>work</think>\\boxed{5}", "answer_tag", 0.0, "answer_format"),
        ("<think>work</think><answer>5</answer>", "boxed", 0.0, "answer_format"),
        ("<answer>5</answer>", "any", 0.0, "think_tags"),
        ("<think></think><answer>5</answer>", "any", 0.0, "empty_think"),
        ("<think>a</think><think>b</think><answer>5</answer>", "any", 0.0, "think_tags"),
        ("<think>a<think>b</think><answer>5</answer>", "any", 0.0, "think_tags"),
        ("<think>a</think><answer></answer>", "any", 0.0, "answer_format"),
        ("<think>a</think><answer>1</answer><answer>2</answer>", "any", 0.0, "answer_format"),
        ("<think>a</think><answer>1</answer> trailing text", "answer_tag", 0.0, "answer_format"),
        ("<think>a</think>", "any", 0.0, "no_answer"),
        ("<think>a</think>\\boxed{1} \\boxed{2}", "boxed", 0.0, "answer_format"),
        ("<think>a", "any", 0.0, "think_tags"),
        ("<think>a</think><answer>5</answer>\n  ", "answer_tag", 1.0, "correct"),  # whitespace after: fine
        ("<think>a</think><answer>5</ANSWER>", "answer_tag", 1.0, "correct"),
        ("<think>a</think><answer>5", "answer_tag", 0.0, "answer_format"),  # never closed
        ("<think>a</think><answer><answer>5</answer>", "answer_tag", 0.0, "answer_format"),  # two opened
        ("<think>a</think>\\boxed{}", "boxed", 0.0, "answer_format"),  # an empty box
    ],
)
def test_format_think_answer(response, require, expected, reason):
    got = fmt(response, require=require)
    assert (got.score, got.reason) == (expected, reason)
    if expected == 0.0:
        assert got.info == {"extracted": None, "reason": reason}


def test_format_default_accepts_either_and_reports_the_answer_cut():
    assert fmt("<think>a</think>\\boxed{5}").score == fmt("<think>a</think><answer>5</answer>").score == 1.0
    long = "<answer>" + "9" * 300 + "</answer>"
    assert fmt(f"<think>a</think> {long} ").extracted == long[:200]


def test_format_rejects_bad_option():
    with pytest.raises(ValueError, match="require"):
        fmt("x", require="tags")


@pytest.mark.parametrize(
    "length, expected",
    [
        (0, 0.0),
        (60, 0.0),  # L <= max - cache
        (70, -0.25),  # (60 - 70) / 40
        (100, -1.0),  # L == max
        (101, -1.0),
        (10_000, -1.0),
    ],
)
def test_overlong(length, expected):
    got = VERIFIERS.get("overlong")("x" * length, PROB, max_len=100, cache_len=40)
    assert got.score == pytest.approx(expected, abs=1e-12)
    assert got.extracted == length and got.reason == ("ok" if expected == 0 else "overlong")


def test_overlong_defaults_are_dapos():  # L_max 16384, L_cache 4096
    scores = [VERIFIERS.get("overlong")("x" * n, PROB).score for n in (12288, 12289, 14336, 16384, 16385)]
    assert scores == [0.0, -1 / 4096, -0.5, -1.0, -1.0]


def test_overlong_words_and_validation():
    got = VERIFIERS.get("overlong")("a b c d e", PROB, max_len=4, cache_len=2, unit="words")
    assert got.score == -1.0 and got.extracted == 5
    for cache_len in (0, 11):
        with pytest.raises(
            ValueError, match=r"need 0 < cache_len <= max_len, got cache_len=\d+, max_len=10$"
        ):
            VERIFIERS.get("overlong")("x", PROB, max_len=10, cache_len=cache_len)
    assert VERIFIERS.get("overlong")("xx", PROB, max_len=10, cache_len=10).score == pytest.approx(-0.2)
    assert VERIFIERS.get("overlong")("x", PROB, max_len=10, cache_len=1).score == 0.0
    with pytest.raises(ValueError):
        VERIFIERS.get("overlong")("x", PROB, unit="tokens")
