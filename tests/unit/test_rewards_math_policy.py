"""Math verifier policy edges: hedged and percent-scaled answers on the symbolic path, answers too big
for sympy, a response without an answer, and math-verify's options with their defaults."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(120)


def score(response, gt, name="math", prompt="Solve it.", **options):
    problem = Problem(prompt=[{"role": "user", "content": prompt}], ground_truth=gt, data_source="math__dapo")
    return VERIFIERS.get(name)(response, problem, **options)


@pytest.mark.parametrize(
    "response, gold, prompt, reason",
    [
        # a hedge between two values in an unmarked answer names no answer, whichever is right
        ("It is 3 or 4.", "4", "Solve it.", "ambiguous"),
        ("So the answer is $3$ or $4$.", "3", "Solve it.", "ambiguous"),
        # gold x 100 without a percent sign anywhere is the wrong scale, even where math-verify
        # reads "percent" as a percentage
        ("Final answer: 28 percent", "0.28", "Solve it.", "wrong_percent_scale"),
        ("Final answer: 28 percent", "0.28", "What percent passed?", "correct"),
        (
            "Working it through carefully, 28 percent of them passed.",
            "0.28",
            "Solve it.",
            "wrong_percent_scale",
        ),
        (
            "Working it through carefully, 28 percent of them passed.",
            "0.28",
            "What percent passed?",
            "correct",
        ),
        # an answer with its own percent sign is read both ways (math-verify's and the table verifier's
        # reading), one scale step only
        (r"\boxed{28\%}", "0.28", "Solve it.", "correct"),  # 28% is 0.28
        (r"\boxed{28\%}", "28", "Solve it.", "correct"),  # and the number written
        (r"\boxed{28\%}", "2800", "Solve it.", "wrong"),
        (r"\boxed{28\%}", "0.0028", "Solve it.", "wrong"),
        # an answer too big for sympy is refused with what was found
        (r"<answer>9^{9^{9}}</answer>", "5", "Solve it.", "too_complex"),
        ("<think>never closed", "4", "Solve it.", "no_answer"),
    ],
)
def test_hedges_scales_and_unbounded_answers(response, gold, prompt, reason):
    res = score(response, gold, prompt=prompt)
    assert res.info["reason"] == reason and res.score == (1.0 if reason == "correct" else 0.0)
    if reason == "too_complex":
        assert res.info["extracted"] == "9^{9^{9}}"
    if reason == "no_answer":  # nothing to compare: math-verify is not called
        assert "path" not in res.info


def test_the_options_default_to_math_verifys_and_change_the_verdict():
    third = r"\boxed{\frac{1}{3}}"
    assert (score(third, "0.333333").score, score(third, "0.333333", float_rounding=7).score) == (1.0, 0.0)
    assert (score(third, "0.33333").score, score(third, "0.33333", float_rounding=5).score) == (0.0, 1.0)
    gsm = r"#### \frac{1}{3}"
    assert (score(third, "0.4").score, score(gsm, "0.4", "gsm8k").score) == (
        0.0,
        0.0,
    )  # not rounded to 0 places
    assert (
        score(gsm, "0.333333", "gsm8k").score,
        score(gsm, "0.333333", "gsm8k", float_rounding=7).score,
    ) == (1, 0)
    interval = r"\boxed{1 \le x \le 2}"
    assert (
        score(interval, "[1, 2]").score,
        score(interval, "[1, 2]", allow_set_relation_comp=True).score,
    ) == (0, 1)
    renamed = r"\boxed{x^2+2}"  # strict: another variable is another answer
    assert (score(renamed, "y^2+2").score, score(renamed, "y^2+2", strict=False).score) == (0.0, 1.0)
    # gsm8k keeps math-verify's defaults for the options it does not take
    assert (
        score("#### x^2+2", "y^2+2", "gsm8k").score,
        score("#### 1 \\le x \\le 2", "[1, 2]", "gsm8k").score,
    ) == (0, 0)


def test_only_the_answers_end_is_searched_for_a_hedge():
    # "3 or 4" early in the reasoning is thinking aloud; the hedge test reads the last 300 characters
    early = "At first sight it could be 3 or 4. " + "Checking each case rules one out. " * 9
    assert len(early) > 300
    assert score(early + "So the count of ways is 4 in the end.", "4").reason == "correct"
    assert score(early + "So it is 3 or 4.", "4").reason == "ambiguous"


def test_a_set_named_in_answer_tags_is_read_as_a_set_with_or_without_dollars():
    for answer in ("x = 2 or x = 3", "$x = 2$ or $x = 3$", "x=3, x=2"):
        assert score(f"<answer>{answer}</answer>", "2, 3").reason == "correct", answer
        assert score(f"<answer>{answer}</answer>", "2").score == 0.0, answer


def test_answers_too_big_or_failing_in_math_verify_score_zero_whatever_the_gold(monkeypatch):
    from reasonrl.rewards.verifiers import math as math_verifier

    for unmarked in ("We simplify and get 9^{9^{9}} as the value.", "So the value is 9^{99999999}"):
        res = score(unmarked, "5")  # free text: found by no answer mode, checked whole
        assert (res.score, res.reason, res.info["extracted"]) == (0.0, "too_complex", None)

    def broken(*args, **kwargs):
        raise RuntimeError("sympy fell over")

    monkeypatch.setattr(math_verifier, "symbolic_compare", broken)
    res = score(r"\boxed{\sqrt{4}}", "2")  # right, but only math-verify could tell
    assert (res.score, res.reason, res.info["extracted"]) == (0.0, "error: sympy fell over", r"\sqrt{4}")
