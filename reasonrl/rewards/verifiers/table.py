"""Table / finance question verifier "table" (Reasoning360 `table__*` data: HiTab, MultiHierTT, FinQA).

Owns: numeric comparison with a relative tolerance (money, thousands separators, percentages,
fractions and ratios), a normalised string match for non-numeric cells, and multi-answer ground
truths `a|b|c` matched one-to-one by value (order free, each answer used once), not by sorting strings.
Does not own: extraction (`rewards.extract`: last `\\boxed{}`, then `<answer>`, then "Answer:").

Policy: a percentage answer equals its value ("12.5%" == 0.125) and its literal number ("12.5%" ==
12.5), but a bare number is never matched to gold*100 or gold/100. A magnitude word (thousand,
million, billion, trillion) or a unit ("percentage points", a currency sign, also inside `\text{}`)
on one side only does not make equal values unequal: "12.5 million" answers both "12.5" (a table in
millions) and "12500000"; "1200 million" answers "1.2 billion". Several `\boxed{}` answers that
disagree are a hedge and score 0, unless there is one box per gold cell of a multi-answer gold.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from reasonrl.rewards.base import (
    VERIFIERS,
    RewardResult,
    checks_ground_truth,
    relative_tolerance_below_one,
    result,
)
from reasonrl.rewards.extract import answer_region, boxed_all, extract
from reasonrl.rewards.ground_truth import plain
from reasonrl.rewards.verifiers.math import clean_latex, to_number
from reasonrl.types import Problem

TABLE_MODES = ("boxed", "answer_tag", "answer_colon")
MAX_ANSWERS = 64
_RATIO = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*$")
_MAGNITUDES = {
    "thousand": 10**3,
    "million": 10**6,
    "mn": 10**6,
    "billion": 10**9,
    "bn": 10**9,
    "trillion": 10**12,
}
_MAGNITUDE = re.compile(r"^(.*?\d)\s*(thousands?|millions?|mn|billions?|bn|trillions?)\b\.?$", re.IGNORECASE)
_POINTS = re.compile(r"\s*(?:percentage\s+points?|percent(?:age)?\s+pts?|pp|p\.p\.)$", re.IGNORECASE)


def _number(s: str) -> tuple[Fraction, bool, int] | None:
    """(value as written, had_percent, magnitude multiplier) of a table cell; ratios a:b are a/b."""
    text = _POINTS.sub("", clean_latex(s)).strip()
    m = _RATIO.match(text)
    if m and Fraction(m.group(2)) != 0:
        return Fraction(m.group(1)) / Fraction(m.group(2)), False, 1
    scale = 1
    mm = _MAGNITUDE.match(text)
    if mm:
        text, scale = mm.group(1), _MAGNITUDES[mm.group(2).lower().rstrip("s")]
    got = to_number(text)
    return (got[0], got[1], scale) if got else None


def _text(s: str) -> str:
    return " ".join(clean_latex(s).lower().replace("\\", "").split()).strip(" .")


def _close(a: Fraction, b: Fraction, rel_tol: float) -> bool:
    return abs(float(a) - float(b)) <= rel_tol * max(abs(float(a)), abs(float(b)), 1e-12)


def cell_equal(pred: str, gold: str, rel_tol: float = 1e-3) -> bool:
    """Whether one answer matches one gold cell (numeric within `rel_tol`, else normalised text).

    A cell that reads as a number on one side only is compared as normalised text ("twelve" != "12").
    """
    p, g = _number(pred), _number(gold)
    if p is not None and g is not None:
        (pv, pp, pm), (gv, gp, gm) = p, g
        if 1 in (pm, gm) and _close(pv, gv, rel_tol):
            return True  # the same number, a magnitude on one side at most (the table's unit)
        if _close(pv * pm, gv * gm, rel_tol):
            return True  # the same value at different magnitudes
        pv, gv = pv * pm, gv * gm
        # a percent sign on exactly one side: compare values (12.5% == 0.125)
        if pp and not gp:
            return _close(pv / 100, gv, rel_tol)
        if gp and not pp:
            return _close(pv, gv / 100, rel_tol)
        return False
    return _text(pred) == _text(gold) and _text(gold) != ""


def match_all(preds: list[str], golds: list[str], rel_tol: float = 1e-3) -> bool:
    """Perfect one-to-one matching of answers to gold cells (bipartite, augmenting paths)."""
    if len(preds) != len(golds):
        return False
    ok = [[cell_equal(p, g, rel_tol) for g in golds] for p in preds]
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in range(len(golds)):
            if ok[i][j] and j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(assign(i, set()) for i in range(len(preds)))


def _split(s: str) -> list[str]:
    return [x.strip() for x in s.split("|")]


def _gold_cells(gt: Any) -> list[str]:
    gt = plain(gt)
    if isinstance(gt, dict) or gt is None or (isinstance(gt, list) and None in gt):
        raise ValueError(f"table: ground truth {gt!r} is not a cell or a list of cells")
    cells = [str(x).strip() for x in gt] if isinstance(gt, list) else _split(str(gt))
    if not any(map(_text, cells)):
        raise ValueError(f"table: ground truth {gt!r} is empty")
    if not all(map(_text, cells)):  # no answer matches an empty cell: the row could never score
        raise ValueError(f"table: ground truth {gt!r} has an empty cell")
    return cells


@VERIFIERS.register("table")
def table(response: str, problem: Problem, rel_tol: float = 1e-3) -> RewardResult:
    """1 if the answer (or every `|`-separated answer) matches the gold cell(s)."""
    found = extract(response, TABLE_MODES)
    if found is None:
        return result(False, None)
    golds = _gold_cells(problem.ground_truth)
    preds = _split(found.answer)
    boxes = list(dict.fromkeys(boxed_all(answer_region(response)))) if found.mode == "boxed" else []
    if len(boxes) > 1:  # disagreeing boxes: one per gold cell, or a hedge
        if len(golds) != len(boxes) or len(preds) != 1:
            return result(False, found.answer, reason="ambiguous")
        preds = boxes
    if len(preds) > MAX_ANSWERS:
        return result(False, found.answer, reason="too_many_answers")
    if len(preds) != len(golds):
        return result(False, found.answer, reason="wrong_answer_count")
    return result(match_all(preds, golds, rel_tol), found.answer)


checks_ground_truth(table, lambda p: _gold_cells(p.ground_truth))
table.check_options = relative_tolerance_below_one
