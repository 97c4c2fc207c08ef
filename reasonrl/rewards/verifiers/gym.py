"""reasoning-gym adapter "reasoning_gym" (data_source `reasoning_gym`, as in Reasoning360).

Owns: rebuilding a reasoning-gym entry from the row (`extra_info["entry"]`, or `answer` = ground
truth + `extra_info["metadata"]`), finding the task name (`extra_info["task"]`, the metadata's
`source_dataset`, or a dict ground truth's `task`), scoring with that task's own `score_answer`, and
a lenient fallback for rows without a task (`lenient_match`: reasoning-gym's documented policy of
case-insensitive string match, then float match within rel_tol / abs_tol, then LaTeX-stripped
match). Does not own: generating reasoning-gym data (`data.tasks` / `data.prepare`).

Deliberate departures from reasoning-gym 0.1.25's own scorers (its conformance sweep lists them):
`game_of_life_halting` scores `bool(answer) == bool(gold)`, so any non-empty text scores 1 against
"False": here the answer must be True / False and equal the gold. `propositional_logic` accepts any
valid conclusion, so copying one of the premises scored 1 (0.69 on average for the best line of the
question, `scripts/gym_hack_audit.py`): a conclusion equivalent to a premise scores 0.25 here, the task's
own value for a trivial (tautological) one. A scorer that raises on an
unparsable answer (e.g. `prime_factorization` on text) scores 0 with reason "unparsable". An answer
holding a non-finite number ("nan", "inf", "1e999", "nan+nani") against a finite reference scores 0
with reason "non_finite" before any scorer runs: `complex_arithmetic` scores
`min(1, exp(-|answer - gold|))`, which is 1.0 for a NaN distance, so "nan" scored 1 on every row; and
the lenient float match accepts only finite numbers (|inf - gold| <= rel_tol * inf held for any
gold). Grids in
`arc_agi` / `rearc` metadata are tuples, which JSON rows turn into lists: they are turned back.

reasoning_gym is optional and imported only when a row names a task; such a row without the
package installed raises an error that says how to install it. Scores are task-defined in [0, 1]
(some tasks give partial credit).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from typing import Any

from reasonrl.rewards.base import (
    VERIFIERS,
    RewardResult,
    checks_ground_truth,
    relative_tolerance_below_one,
    result,
)
from reasonrl.rewards.extract import answer_region, answer_tag
from reasonrl.types import Problem


def extract_gym_answer(response: str) -> str | None:
    """Last `<answer>` content after the think block, else the whole answer region; None if empty."""
    region = answer_region(response)
    tagged = answer_tag(region)
    ans = tagged if tagged is not None else region.strip()
    return ans if ans else None


# ---------------------------------------------------------------- lenient fallback


def string_match(pred: str, gold: str) -> bool:
    return pred.strip().lower() == gold.strip().lower()


def float_match(pred: str, gold: str, rel_tol: float = 0.01, abs_tol: float = 0.01) -> bool:
    try:
        a, b = float(pred.strip()), float(gold.strip())
    except ValueError:
        return False
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b  # inf is only inf; nan is nothing (a tolerance times inf admits every number)
    return abs(a - b) <= max(rel_tol * max(abs(a), abs(b)), abs_tol)


def _strip_latex(s: str) -> str:
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}", r"\1", s)
    return s.replace("$", "").replace("\\(", "").replace("\\)", "").strip()


def lenient_match(pred: str, gold: str, rel_tol: float = 0.01, abs_tol: float = 0.01) -> bool:
    """String match, then float match, then both again after LaTeX stripping."""
    for p, g in ((pred, gold), (_strip_latex(pred), _strip_latex(gold))):
        if string_match(p, g) or float_match(p, g, rel_tol, abs_tol):
            return True
    return False


# ---------------------------------------------------------------- reasoning-gym proper


@functools.lru_cache(maxsize=256)
def _scorer(task: str):
    try:
        import reasoning_gym  # optional, heavy: imported only for rows that name a task
    except ImportError:
        raise RuntimeError(
            "reasoning_gym rows need the optional package: pip install 'reasonrl[gym]'"
        ) from None
    return reasoning_gym.get_score_answer_fn(task)


def _as_dict(x: Any) -> dict[str, Any] | None:
    if isinstance(x, str):
        try:
            x = json.loads(x)
        except ValueError:
            return None
    return dict(x) if isinstance(x, dict) else None


def rebuild_entry(problem: Problem) -> tuple[str | None, dict[str, Any]]:
    """(task name or None, reasoning-gym entry dict) for a row."""
    extra = problem.extra_info
    gt = problem.ground_truth
    entry = _as_dict(extra.get("entry"))
    metadata = _as_dict(extra.get("metadata")) or {}
    gt_dict = _as_dict(gt) if not isinstance(gt, str) or gt.strip().startswith("{") else None
    task = extra.get("task") or metadata.get("source_dataset")
    if entry is None and gt_dict is not None and "answer" in gt_dict:
        entry = gt_dict
        task = task or gt_dict.get("task")
    if entry is None:
        entry = {"question": problem.user_text, "answer": gt}
    entry = dict(entry)
    meta = dict(_as_dict(entry.get("metadata")) or {})
    meta.update(metadata)
    entry["metadata"] = meta
    task = task or meta.get("source_dataset")
    return (str(task) if task else None), entry


def _exact_bool(answer: str, entry: dict[str, Any]) -> float:
    norm = answer.strip().lower()
    return float(norm in ("true", "false") and norm == str(entry.get("answer", "")).strip().lower())


def _no_restated_premise(answer: str, entry: dict[str, Any]) -> float:
    """propositional_logic's own score, except that a conclusion equivalent to one of the premises (a
    premise copied, or rewritten) counts as trivial, as the task's own scorer counts a tautology: 0.25."""
    score = float(_scorer("propositional_logic")(answer=answer, entry=entry))
    if score < 1.0:
        return score
    from reasoning_gym.logic.propositional_logic import Expression

    conclusion = Expression.from_string(answer)
    names = sorted(set(entry["metadata"]["variables"]))
    rows = [dict(zip(names, bits)) for bits in itertools.product((False, True), repeat=len(names))]
    for premise in entry["metadata"]["premises"]:
        p = Expression.from_string(premise)
        if all(p.evaluate(row) == conclusion.evaluate(row) for row in rows):
            return 0.25
    return score


# reasoning-gym scorers that a policy can game
SCORE_OVERRIDES = {"game_of_life_halting": _exact_bool, "propositional_logic": _no_restated_premise}
_TUPLE_GRIDS = {"arc_agi": ("input", "output"), "rearc": ("input", "output")}


# "nan", "-inf", "Infinity", "nanj" / "infi" (complex parts), not inside words ("banana", "info")
_NAN_INF = re.compile(r"(?<![a-z])[+-]?(?:nan|inf(?:inity)?)[ij]?(?![a-z])", re.IGNORECASE)
# numbers, each matched from its first digit only (linear time on any text)
_NUMBER_TOKEN = re.compile(r"(?<![\d.])\d+(?:\.\d*)?(?:e[+-]?\d+)?", re.IGNORECASE)


def non_finite(text: str) -> bool:
    """Whether `text` holds a number that is not finite: a NaN / infinity literal, or one that
    overflows a float ("1e999", a 400-digit integer)."""
    return bool(_NAN_INF.search(text)) or any(math.isinf(float(t)) for t in _NUMBER_TOKEN.findall(text))


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def score_entry(task: str, answer: str, entry: dict[str, Any]) -> tuple[float, str | None]:
    """(score in [0, 1], error) of `answer` for a reasoning-gym entry of `task`."""
    if non_finite(answer) and not non_finite(str(entry.get("answer", ""))):
        return 0.0, "non_finite: the answer holds a NaN or infinite number"
    for key in _TUPLE_GRIDS.get(task, ()):
        if key in entry["metadata"]:
            entry["metadata"][key] = _tuples(entry["metadata"][key])
    fn = SCORE_OVERRIDES.get(task) or _scorer(task)
    try:
        return min(max(float(fn(answer=answer, entry=entry)), 0.0), 1.0), None
    except Exception as e:  # noqa: BLE001 - a task's scorer choking on model text is a wrong answer
        return 0.0, f"{type(e).__name__}: {str(e)[:100]}"


def _lenient_gold(entry: dict[str, Any]) -> str:
    """The gold answer of a row that names no task: a text or number that is not blank."""
    gold = entry.get("answer")
    if isinstance(gold, (str, int, float)) and str(gold).strip():
        return str(gold)
    raise ValueError(f"reasoning_gym: a row without a task needs a gold answer, got {gold!r}")


def _routable(problem: Problem) -> tuple[str | None, dict[str, Any]]:
    """`rebuild_entry`, raising ValueError when the row cannot be scored: no task and no gold answer,
    or a task that reasoning-gym does not know (or reasoning-gym not installed)."""
    task, entry = rebuild_entry(problem)
    if task is None:
        _lenient_gold(entry)
        return task, entry
    try:
        SCORE_OVERRIDES.get(task) or _scorer(task)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"reasoning_gym: task {task!r}: {e}") from None
    return task, entry


@VERIFIERS.register("reasoning_gym")
def reasoning_gym(
    response: str, problem: Problem, rel_tol: float = 0.01, abs_tol: float = 0.01
) -> RewardResult:
    """The task's own `score_answer` on the extracted answer; lenient match if no task is named."""
    ans = extract_gym_answer(response)
    if ans is None:
        return result(False, None)
    task, entry = _routable(problem)
    if task is None:
        ok = lenient_match(ans, _lenient_gold(entry), rel_tol, abs_tol)
        return result(ok, ans, scorer="lenient")
    score, error = score_entry(task, ans, entry)
    if error:
        reason = "non_finite" if error.startswith("non_finite") else "unparsable"
        return RewardResult(0.0, {"extracted": ans, "reason": reason, "error": error, "scorer": task})
    reason = "correct" if score == 1.0 else ("partial" if score > 0 else "wrong")
    return RewardResult(score, {"extracted": ans, "reason": reason, "scorer": task})


checks_ground_truth(reasoning_gym, _routable)
reasoning_gym.check_options = relative_tolerance_below_one
