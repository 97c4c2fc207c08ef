"""Table / finance verifier: numeric tolerance, percentages, multi-answer matching by value."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers.table import cell_equal, match_all
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)


def score(response, gt, **opts):
    p = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth=gt, data_source="table__hitab")
    return VERIFIERS.get("table")(response, p, **opts)


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        ("12.5", "12.5", True),
        ("12.501", "12.5", True),  # within rel_tol 1e-3
        ("12.6", "12.5", False),
        ("$1,234", "1234", True),
        ("12.5%", "12.5", True),  # literal number with a percent sign
        ("12.5%", "0.125", True),  # value of the percentage
        ("0.125", "12.5", False),  # bare gold/100 refused
        ("0.125", "12.5%", True),  # the percent sign on the gold's side: its value ...
        ("12.5", "12.5%", True),  # ... or its literal number
        ("0.0125", "12.5%", False),
        ("1250", "12.5%", False),
        ("1250", "12.5", False),  # bare gold*100 refused
        ("3:4", "0.75", True),
        (r"\frac{3}{4}", "0.75", True),
        ("-2", "2", False),
        ("Paris", "paris", True),
        (r"\text{New York}", "new york", True),
        ("Paris", "London", False),
        ("12", "twelve", False),
        ("", "", False),
    ],
)
def test_cell_equal(pred, gold, expected):
    assert cell_equal(pred, gold) is expected


def test_match_all_pairs_by_value_not_string_sort():
    # sorted as strings, ["10", "9.0"] vs ["9", "10.0"] would pair 10 with 9; by value it matches
    assert match_all(["10", "9.0"], ["9", "10.0"]) is True
    assert match_all(["1", "1"], ["1", "2"]) is False  # each gold used once
    assert match_all(["1", "2"], ["1", "2", "3"]) is False


@pytest.mark.parametrize(
    "response, gt, expected, reason",
    [
        (r"The answer is \boxed{42.0}", "42", 1.0, "correct"),
        (r"\boxed{2|1|3}", "1|2|3", 1.0, "correct"),
        (r"\boxed{10 | 9.0}", "9|10", 1.0, "correct"),
        (r"\boxed{1|2}", "1|2|3", 0.0, "wrong_answer_count"),
        (r"\boxed{1|1|1}", "1|2|3", 0.0, "wrong"),
        (r"\boxed{1|2|3|4}", "1|2|3", 0.0, "wrong_answer_count"),  # hedging with extra answers
        (r"\boxed{" + "|".join(["1"] * 100) + "}", "1", 0.0, "too_many_answers"),
        ("<answer>5</answer>", "5", 1.0, "correct"),
        (r"<think>\boxed{5}</think>", "5", 0.0, "no_answer"),  # answer only in think
        ("no answer at all 5", "5", 0.0, "no_answer"),
        (r"\boxed{5 or 6}", "5", 0.0, "wrong"),
        (r"\boxed{42}", ["42"], 1.0, "correct"),  # list ground truth
        (r"\boxed{0.43}", "42", 0.0, "wrong"),
    ],
)
def test_table_verifier(response, gt, expected, reason):
    got = score(response, gt)
    assert (got.score, got.reason) == (expected, reason)


def test_rel_tol_option():
    assert score(r"\boxed{105}", "100").score == 0.0
    assert score(r"\boxed{105}", "100", rel_tol=0.1).score == 1.0


@pytest.mark.parametrize(
    "gold, response, expected",
    [
        ("12.5", "\\boxed{12.5 million}", 1.0),  # the table is in millions; the answer says so
        ("12500000", "\\boxed{12.5 million}", 1.0),
        ("12.5 million", "\\boxed{12.5}", 1.0),
        ("1.2 billion", "\\boxed{1200 million}", 1.0),
        ("5000", "\\boxed{5 thousand}", 1.0),
        ("3000000", "\\boxed{3 mn}", 1.0),  # the abbreviations and the largest magnitude
        ("1500000000", "\\boxed{1.5 bn}", 1.0),
        ("2000 billion", "\\boxed{2 trillion}", 1.0),
        ("2000000000", "\\boxed{2 trillion}", 0.0),
        ("3.2", "\\boxed{3.2 percentage points}", 1.0),
        ("12.5", "\\boxed{\\text{\\$}12.5}", 1.0),
        ("12.5", "\\boxed{12.5} so the answer is \\boxed{12.5}", 1.0),  # the same box twice is one answer
        ("a|b", "\\boxed{a} and \\boxed{b}", 1.0),  # one box per gold cell
        # adversarial
        ("12.5 billion", "\\boxed{12.5 million}", 0.0),  # both sides name a magnitude: they must agree
        ("12500000", "\\boxed{12.5 thousand}", 0.0),
        ("12.5", "\\boxed{13.5 million}", 0.0),
        ("13", "\\boxed{12.5} or maybe \\boxed{13}", 0.0),  # a hedge never takes the last box
        ("12.5", "\\boxed{12.5} or maybe \\boxed{13}", 0.0),
        ("a|b", "\\boxed{a} \\boxed{b} \\boxed{c}", 0.0),
    ],
)
def test_magnitudes_units_and_hedges(gold, response, expected):
    assert score(response, gold).score == expected
