"""Math verdicts an expert grader would sign: solution sets read the same way on both sides, unit nouns
and markdown around final answers, and sympy work bounded. Adversarial rows included."""

from __future__ import annotations

import time

import pytest

from reasonrl.rewards.verifiers.math import gsm8k, math, set_form
from reasonrl.rewards.verifiers.math_size import exponent_depth, too_complex
from reasonrl.types import Problem


def P(gt, q="Solve it."):
    return Problem([{"role": "user", "content": q}], gt, "math", "math", {})


@pytest.mark.parametrize(
    "gold, response, score",
    [
        # a gold list is the set of solutions: all of it, in any order, in any set form
        ("2, 3", "\\boxed{2, 3}", 1.0),
        ("2, 3", "\\boxed{3, 2}", 1.0),
        ("2, 3", "\\boxed{x=2 \\text{ or } x=3}", 1.0),
        ("2, 3", "\\boxed{2 \\text{ and } 3}", 1.0),
        ("2, 3", "The solutions are $x = 3$ or $x = 2$, so \\boxed{x = 3 \\text{ or } x = 2}", 1.0),
        ("x=2 or x=3", "\\boxed{2,3}", 1.0),
        ("-2, 2", "\\boxed{\\pm 2}", 1.0),
        ("\\pm 2", "\\boxed{2, -2}", 1.0),
        ("1 \\pm \\sqrt{2}", "\\boxed{1-\\sqrt{2}, 1+\\sqrt{2}}", 1.0),
        ("x = 2, x = 3", "\\boxed{3, 2}", 1.0),
        # adversarial: part of the set, a superset, one hedge
        ("2, 3", "\\boxed{3}", 0.0),  # only the last solution
        ("2, 3", "\\boxed{2}", 0.0),
        ("-2, 2", "\\boxed{2}", 0.0),
        ("1, 2, 3", "\\boxed{1, 2}", 0.0),
        ("2, 3", "\\boxed{2, 3, 4}", 0.0),
        ("2", "\\boxed{2 \\text{ or } 3}", 0.0),
        ("2 and 3", "\\boxed{3}", 0.0),
        # tuples and intervals stay ordered, both ways
        ("(1, 2)", "\\boxed{(1,2)}", 1.0),
        ("(1, 2)", "\\boxed{(2,1)}", 0.0),
        ("[0, 1)", "\\boxed{[0,1)}", 1.0),
        ("[0, 1)", "\\boxed{(0,1]}", 0.0),
        ("\\{1, 2\\}", "\\boxed{\\{2, 1\\}}", 1.0),
        # one number stays one number
        ("7,425,000", "\\boxed{7425000}", 1.0),
        ("7,425,000", "\\boxed{7,425}", 0.0),
    ],
)
def test_solution_sets(gold, response, score):
    assert math(response, P(gold)).score == score


@pytest.mark.parametrize(
    "response, score",
    [
        ("She has 18 apples left.\n#### 18 apples", 1.0),
        ("#### 18 dollars", 1.0),
        ("#### $18", 1.0),
        ("**Answer:** 18", 1.0),
        ("**Answer: 18**", 1.0),
        ("*Answer*: 18", 1.0),
        ("__Answer:__ 18", 1.0),
        ("#### 19 apples", 0.0),
        ("**Answer: 19**", 0.0),
        ("#### 18 or 19", 0.0),
    ],
)
def test_gsm8k_units_and_markdown(response, score):
    assert gsm8k(response, P("18")).score == score


@pytest.mark.parametrize(
    "tower",
    ["9^{9^{9^{9^{9}}}}", "9^9^9^9", "2**2**2**2**99", "10^{10^{10^{100}}}", "9^{9^{9}}", "9^{99999999}"],
)
def test_exponent_towers_score_zero_fast(tower):
    t0 = time.monotonic()
    res = math(f"\\boxed{{{tower}}}", P("1"))
    assert res.score == 0.0 and res.reason == "too_complex"
    assert time.monotonic() - t0 < 5


def test_set_form_and_exponent_depth_units():
    assert set_form("x=2 \\text{ or } x=3") == "x=2, x=3"
    assert set_form("x = \\pm 2") == "x =2, x =-2"
    assert set_form("2 and 3") == "2, 3"
    assert set_form("random") == "random"  # words containing 'and' / 'or' are not split
    assert set_form("x = 1 \\pm") == "x = 1 \\pm"  # nothing after the sign: left as written
    assert [exponent_depth(s) for s in ("x^2", "e^{x^2}", "9^{9^{9}}", "x^{y^{z^2}}", "x^2 + y^2")] == [
        1,
        2,
        2,
        3,
        1,
    ]
    # only a brace right after ^ (spaces allowed) opens an exponent; a stray } is no error
    braces = ("x^2 \\sqrt{y^2 \\sqrt{z^2}}", "2^ {2^ {2^ {2}}}", "}}2^{3}", "{x^{y^{2}}}", "2")
    assert [exponent_depth(s) for s in braces] == [1, 3, 1, 2, 0]
    # an exponent's brace closes it: powers side by side are one level; a brace inside a brace is not
    # another exponent
    assert [exponent_depth(s) for s in ("2^{3} \\cdot 3^{2} \\cdot 5^{4}", "2^{{3^4}}")] == [1, 2]
    # (a computation of a whole-number gold: compared only when unevaluated answers are accepted)
    assert math("\\boxed{2^{3} \\cdot 3^{2} \\cdot 5^{4}}", P("45000"), accept_unevaluated=True).score == 1.0
    assert [too_complex(s) for s in ("2^{10}", "e^{x^2}", "2^{2^{3}}", "9^{9^{9}}", "9^{99999999}")] == [
        False, False, False, True, True
    ]  # fmt: skip
    assert (too_complex("10^{10000}"), too_complex("10^{10001}")) == (
        False,
        True,
    )  # MAX_POWER_DIGITS, at the edge
    # digits = exponent x log10(base): big bases count, small ones do not; 1 to any power is 1
    powers = (
        "2^{99999}",
        "100000^{3000}",
        "1.5^{5000}",
        "1^{9^{9}}",
        "9^{9^{999}}",
    )  # the last: no float overflow
    assert [too_complex(s) for s in powers] == [True, True, False, False, True]


def test_reasonable_powers_still_compare():
    assert math("\\boxed{2^{10}}", P("1024"), accept_unevaluated=True).score == 1.0
    assert math("\\boxed{2^{10}}", P("1024")).info["reason"] == "unevaluated"  # math_form
    assert math("\\boxed{e^{x^2}}", P("e^{x^{2}}")).score == 1.0
