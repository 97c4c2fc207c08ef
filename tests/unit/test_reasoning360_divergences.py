"""Classes where Reasoning360's own scorers are wrong and reasonrl must stay right (issue 7, section 5):
answers found only inside the think block, the first letter anywhere in an option's text, `####`-only
GSM8K parsing, and random letters when no answer is found."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.types import Problem


def _p(gt, source="math", q="q"):
    return Problem([{"role": "user", "content": q}], gt, source, "x", {})


@pytest.mark.parametrize(
    "name, gold, response",
    [
        ("math", "5", "<think>so it is \\boxed{5}</think>I am not sure."),
        ("gsm8k", "18", "<think>#### 18</think>No idea."),
        ("choice", "B", "<think>The answer is (B).</think>I cannot decide."),
        ("math", "5", "<think>\\boxed{5} maybe"),  # never left the think block
    ],
)
def test_an_answer_only_inside_the_think_block_scores_zero(name, gold, response):
    src = "stem__gpqa" if name == "choice" else "math"
    assert VERIFIERS.get(name)(response, _p(gold, src)).score == 0.0


@pytest.mark.parametrize(
    "response", ["Boron is the element here.", "Because of the reaction rate.", "Both are wrong."]
)
def test_a_letter_inside_a_word_is_not_an_option(response):
    res = VERIFIERS.get("choice")(response, _p("B", "stem__gpqa"))
    assert res.score == 0.0 and res.reason == "no_answer"


@pytest.mark.parametrize("response", ["\\boxed{18}", "The answer is 18.", "**Answer:** 18", "#### 18"])
def test_gsm8k_is_not_only_the_hash_marker(response):
    assert VERIFIERS.get("gsm8k")(response, _p("18", "openai/gsm8k")).score == 1.0


def test_no_answer_is_never_a_random_letter():
    p = _p("A", "stem__gpqa")
    results = {VERIFIERS.get("choice")("I have no idea at all.", p).score for _ in range(20)}
    assert results == {0.0}
