"""Table / finance verifier: numeric tolerance, percentages, multi-answer matching by value."""

from __future__ import annotations

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers.table import MAX_ANSWERS, cell_equal, match_all
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
        ("3:1", "3", True),
        ("1:2", "50%", True),  # a ratio's value against a percentage's value
        ("3:0", "3", False),  # no ratio with a zero denominator (and no ZeroDivisionError)
        ("999", "1000", True),  # the tolerance bound is inclusive: |diff| == 1e-3 * 1000
        ("998.9", "1000", False),
        ("0", "0.0000001", False),  # no absolute slack near zero
        ("0", "0.0", True),
        ("50%", "0.5%", False),  # percent signs on both sides: the numbers as written
        ("0.5%", "50%", False),
        ("50000%", "0.5 thousand", True),  # a percentage against a magnitude: values compared
        ("0.5 thousand", "50000%", True),
        ("2 million", "2 million", True),
        ("2 thousand", "2 million", False),
        (r"x\_y", "x_y", True),  # LaTeX escapes in text cells
        (r"\{a\}", "{a}", True),
    ],
)
def test_cell_equal(pred, gold, expected):
    assert cell_equal(pred, gold) is expected


def test_match_all_pairs_by_value_not_string_sort():
    # sorted as strings, ["10", "9.0"] vs ["9", "10.0"] would pair 10 with 9; by value it matches
    assert match_all(["10", "9.0"], ["9", "10.0"]) is True
    assert match_all(["1", "1"], ["1", "2"]) is False  # each gold used once
    assert match_all(["1", "2"], ["1", "2", "3"]) is False
    # 10.004 fits both golds, 9.992 only the first: taken greedily, 10.004 must move to free "10"
    assert match_all(["10.004", "9.992"], ["10", "10.005"]) is True
    assert match_all(["9.992", "9.992"], ["10", "10.005"]) is False


def test_answer_count_bound_and_array_ground_truth():
    import numpy as np

    cells = [str(i) for i in range(MAX_ANSWERS + 1)]
    at_bound = score(r"\boxed{" + "|".join(cells[:-1]) + "}", "|".join(cells[:-1]))
    assert (at_bound.score, at_bound.reason) == (1.0, "correct")
    over = score(r"\boxed{" + "|".join(cells) + "}", "|".join(cells))
    assert (over.score, over.reason) == (0.0, "too_many_answers")
    got = score(r"\boxed{2|1}", np.array(["1", "2"]))  # a parquet row's array of cells
    assert (got.score, got.reason) == (1.0, "correct")


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
        (r"\boxed{12.5} or maybe \boxed{13}", "13", 0.0, "ambiguous"),  # disagreeing boxes: a hedge
        (r"\boxed{1|2} then \boxed{3}", "1|2|3", 0.0, "ambiguous"),  # two boxes for three cells
        (r"\boxed{3} then \boxed{1|2}", "1|2", 0.0, "ambiguous"),  # a box per cell, but the last holds two
    ],
)
def test_table_verifier(response, gt, expected, reason):
    got = score(response, gt)
    assert (got.score, got.reason) == (expected, reason)


def test_rel_tol_option():
    assert score(r"\boxed{105}", "100").score == 0.0
    assert score(r"\boxed{105}", "100", rel_tol=0.1).score == 1.0
    # the verifier's own default is 1e-3, as `cell_equal`'s: 999 is within it, 998.9 is not
    assert (score(r"\boxed{999}", "1000").score, score(r"\boxed{998.9}", "1000").score) == (1.0, 0.0)


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
