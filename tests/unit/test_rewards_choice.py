"""Multiple-choice verifier: letter extraction, ambiguity, no random letters."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers.choice import extract_choice, letter_of
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)


def score(response, gt="C", **extra):
    p = Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth=gt, data_source="stem__gpqa", extra_info=extra
    )
    return VERIFIERS.get("choice")(response, p)


@pytest.mark.parametrize(
    "span, letter, reason",
    [
        ("C", "C", "ok"),
        ("(C)", "C", "ok"),
        (r"\text{C}", "C", "ok"),
        ("C. 42 kJ/mol", "C", "ok"),
        ("**C**", "C", "ok"),
        ("A or B", None, "ambiguous"),
        ("A, C", None, "ambiguous"),
        ("(A) and (B)", None, "ambiguous"),
        ("K", None, "no_answer"),
        ("I think so", None, "no_answer"),
        ("none", None, "no_answer"),
        ("I", "I", "ok"),  # option I ...
        ("I. Sodium chloride", "I", "ok"),
        ("I guess C", None, "no_answer"),  # ... but not the pronoun
        *[(c, None, "no_answer") for c in "KLMNOPQRSTUVWXYZ"],  # past J: never an option
    ],
)
def test_letter_of(span, letter, reason):
    assert letter_of(span) == (letter, reason)


@pytest.mark.parametrize(
    "response, expected, reason",
    [
        ("Answer: C", 1.0, "correct"),
        ("answer: $C$", 1.0, "correct"),
        ("Therefore the answer is (C).", 1.0, "correct"),
        (r"\boxed{C}", 1.0, "correct"),
        (r"\boxed{\text{(C)}}", 1.0, "correct"),
        ("<answer>C</answer>", 1.0, "correct"),
        ("C", 1.0, "correct"),
        ("Answer: B", 0.0, "wrong"),
        ("Answer: A or B or C", 0.0, "ambiguous"),  # hedging
        (r"\boxed{A, B, C, D}", 0.0, "ambiguous"),
        ("I don't know.", 0.0, "no_answer"),  # never a random letter
        ("", 0.0, "no_answer"),
        ("<think>Answer: C</think>", 0.0, "no_answer"),  # answer only in think
        ("<think>Answer: C", 0.0, "no_answer"),
        ("<think>Answer: B</think> Answer: C", 1.0, "correct"),
        ("Answer: A\nWait, actually the answer is C", 1.0, "correct"),  # the last one counts
        ("ABCD" * 10_000, 0.0, "no_answer"),
        # forms Reasoning360's SuperGPQA scorer reads that we missed (found comparing the two)
        (r"\boxed{Option C}", 1.0, "correct"),
        ("Answer: Option C", 1.0, "correct"),
        ("Work it out.\n\n**C**", 1.0, "correct"),  # a last line that is only the letter, in bold
        (r"\boxed{Option A or C}", 0.0, "ambiguous"),
        ("**A** or **C**", 0.0, "no_answer"),
        ("The **C** option seems wrong", 0.0, "no_answer"),
        (" (C). ", 1.0, "correct"),  # a bare letter: four characters at most once stripped
        ("C. ok", 0.0, "no_answer"),  # five: a sentence, not a bare letter
    ],
)
def test_choice_verifier(response, expected, reason):
    got = score(response)
    assert (got.score, got.reason) == (expected, reason)


def test_no_answer_is_deterministic_zero():
    results = {score("nothing here").score for _ in range(20)}
    assert results == {0.0}


def test_gold_forms_and_option_count():
    assert score("Answer: B", gt="(B)").score == 1.0
    assert score("Answer: B", gt=1).score == 1.0  # index 1 -> B
    assert score("Answer: A", gt=0).score == 1.0  # index 0 -> A (not a missing gold)
    assert score("Answer: E", gt="D", choices=["a", "b", "c", "d"]).reason == "no_answer"  # only A-D
    with pytest.raises(ValueError, match=r"^choice: ground truth 'E' is not one of the 4 listed options$"):
        score("Answer: E", gt="E", choices=["a", "b", "c", "d"])  # a gold no answer could name
    assert score("Answer: E", gt="E").score == 1.0
    assert score("Answer: I", gt="I").score == 1.0


@pytest.mark.parametrize(
    "extra, valid",
    [
        ({"choices": ["a", "b"]}, "AB"),
        ({"options": ["a", "b", "c"]}, "ABC"),
        ({"choices": ["only one"]}, "ABCDEFGHIJ"),  # fewer than two listed: not a count
        ({"choices": []}, "ABCDEFGHIJ"),
        ({"choices": "A) x  B) y  C) z"}, "ABCDEFGHIJ"),  # the options' text, not a list
        ({"choices": 4}, "ABCDEFGHIJ"),
        ({"choices": [str(i) for i in range(12)]}, "ABCDEFGHIJ"),  # more than ten: A..J
        ({}, "ABCDEFGHIJ"),
    ],
)
def test_valid_letters_follow_the_listed_choices(extra, valid):
    import numpy as np

    def solvable(letter: str, **extra) -> bool:
        try:
            return score(f"Answer: {letter}", gt=letter, **extra).score == 1.0
        except ValueError as e:  # a gold letter past the listed options: a bad row, not a question
            assert f"is not one of the {len(valid)} listed options" in str(e)
            return False

    assert "".join(c for c in "ABCDEFGHIJ" if solvable(c, **extra)) == valid
    if isinstance(extra.get("choices"), list):  # a parquet row's array reads the same
        arr = {"choices": np.array(extra["choices"])}
        assert "".join(c for c in "ABCDEFGHIJ" if solvable(c, **arr)) == valid
    if valid != "ABCDEFGHIJ":  # the answer may still name a letter past them: that is no answer
        assert score("Answer: J", gt="A", **extra).reason == "no_answer"


def test_gold_is_an_option_letter():
    assert score("Answer: B", gt=["B"]).score == 1.0  # a one-element list (a parquet array) is its letter
    for index in (-1, 10):  # an index past the options is not wrapped round nor cut to J
        with pytest.raises(ValueError, match="not an option letter"):
            score("Answer: J", gt=index)
    with pytest.raises(ValueError, match="not an option letter"):
        score("Answer: B", gt="banana")


def test_extract_choice_returns_span():
    assert extract_choice(r"\boxed{D}") == ("D", "ok", "D")
    assert score("Answer: A or B").info["extracted"] == "A or B"  # a hedge shows what it offered
    assert score("I don't know.").info["extracted"] is None


@pytest.mark.parametrize(
    "response, expected",
    [
        ("\\boxed{c}", 1.0),
        ("\\boxed{(c)}", 1.0),
        ("\\boxed{\\text{c}}", 1.0),
        ("<answer>c</answer>", 1.0),
        ("\\boxed{b}", 0.0),
        ("The answer is a good one, but \\boxed{C}", 1.0),
        ("the answer is a", 0.0),  # an article outside a box is not option A
    ],
)
def test_lower_case_letter_in_a_box_or_tag(response, expected):
    p = Problem([{"role": "user", "content": "q"}], "C", "stem__gpqa", "stem", {})
    assert VERIFIERS.get("choice")(response, p).score == expected


@pytest.mark.parametrize(
    "response",
    [
        "Answer: C (or B, A, D)",  # the gold first, every other option beside it
        "Answer: C (or maybe A)",
        "The answer is C or possibly B",
        r"\boxed{C (or B)}",
        "Answer: C, but A, B, D could also be right",
        "Answer: C - or D",
        "Answer: C. Or A.",
        "Answer: C, also B",
        "Answer: C. or, maybe, option B",
        "Answer: C; A is also plausible",
        "Answer: C or I",  # option I, not the pronoun
    ],
)
def test_a_hedge_after_the_chosen_letter_is_ambiguous(response):
    """Another option named beside the chosen one is no single choice, however it is joined."""
    got = score(response)
    assert (got.score, got.reason) == (0.0, "ambiguous")


@pytest.mark.parametrize(
    "response, extra",
    [
        ("Answer: C. Vitamin D", {}),  # a letter in the option's text, joined by nothing
        ("Answer: C. Water and a salt", {}),  # "a", the article
        ("Answer: C. 3 or 4 moles", {}),
        ("Answer: C, and I think so", {}),  # "I", the pronoun
        ("Answer: C. Compound B reacts with A", {}),
        ("Answer: C) Heat and light", {}),
        ("Answer: C. Both A and B", {}),  # option text, without the options listed
        ("Answer: C. None of A, B or D", {}),
        ("Answer: C. Both A and B", {"choices": ["x", "y", "Both A and B", "z"]}),  # its own listed text
        ("Answer: C. both  a and b", {"choices": ["x", "y", "Both A and B", "z"]}),
    ],
)
def test_words_after_the_letter_that_are_no_hedge(response, extra):
    assert score(response, **extra).score == 1.0


def test_option_text_is_only_the_chosen_options_own():
    """With the options listed, another option's text or a hedge after the chosen option's own is one."""
    listed = {"choices": ["Both A and B", "y", "z", "w"]}
    assert score("Answer: C. Both A and B", **listed).reason == "ambiguous"  # A's text, not C's
    own = {"choices": ["x", "y", "Both A and B", "z"]}
    assert score("Answer: C. Both A and B, or maybe D", **own).reason == "ambiguous"
    assert score("Answer: C (or B)", **own).reason == "ambiguous"  # no restatement: nothing is cut
