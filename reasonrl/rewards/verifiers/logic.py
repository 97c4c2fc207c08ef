"""Structured-answer verifiers: logic puzzles, ARC grids, and code output prediction.

Owns: "zebra" (Reasoning360 `logic__zebra_puzzle*`: `{"header": [...], "rows": [[...]]}` grid,
score = fraction of correct cells, `info["all_correct"]`), "ordering" (`logic__ordering_puzzle*`:
a list of names, exact order), "graph" (`logic__graph*`: one short answer), "arc"
(`simulation__arcagi*`, `logic__arcagi*`: an integer grid, exact match) and "codeio"
(`simulation__codeio*`: predicted input/output as JSON, compared structurally). Does not own:
running code (`rewards.verifiers.code` / `rewards.sandbox`). CRUXEval rows (`{"functional": code}` ground
truths) need execution: they route to "cruxeval" (`rewards.verifiers.cruxeval`); given one, "codeio" reports an
error rather than guessing.

Answers are read from the last `<answer>...</answer>` after any think block (codeio: a ```json
block or the last complete JSON object) and parsed with `json` or `ast.literal_eval`, never `eval`.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, checks_ground_truth, result
from reasonrl.rewards.extract import answer_region, answer_tag, last_boxed
from reasonrl.rewards.ground_truth import plain, single
from reasonrl.types import Problem

MAX_PARSE_CHARS = 100_000


def parse_structured(text: str) -> Any:
    """A Python/JSON literal parsed from `text`; raises ValueError if it is not one."""
    text = text.strip()
    if len(text) > MAX_PARSE_CHARS:
        raise ValueError("answer too long to parse")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise ValueError(f"not a literal: {type(e).__name__}") from None


def _gold(gt: Any) -> Any:
    gt = plain(gt)
    if isinstance(gt, str):
        try:
            return plain(parse_structured(gt))
        except ValueError:
            return gt
    return gt


def _cell(x: Any) -> str:
    return " ".join(str(x).split()).lower()


# ---------------------------------------------------------------- zebra puzzles


def _zebra_gold(problem: Problem) -> tuple[list[list], list[str]]:
    """(rows, normalised header) of a zebra ground truth; ValueError if it is not such a grid."""
    gold = _gold(problem.ground_truth)
    header = gold.get("header") if isinstance(gold, dict) else None
    rows = gold.get("rows") if isinstance(gold, dict) else None
    if (
        not isinstance(header, list)
        or not header
        or not isinstance(rows, list)
        or not rows
        or any(not isinstance(r, list) or len(r) != len(header) for r in rows)
        or not all(
            isinstance(x, (str, int, float)) and _cell(x) for x in [*header, *(x for r in rows for x in r)]
        )
    ):
        raise ValueError(
            "zebra: ground truth is not {'header': [...], 'rows': [[one value per column], ...]} of names"
        )
    return rows, [_cell(h) for h in header]


@VERIFIERS.register("zebra")
def zebra(response: str, problem: Problem, partial: bool = True) -> RewardResult:
    """Fraction of grid cells equal to the gold grid (1 only if all are); `partial=False`: 0/1.

    Rows are matched by their key (the first column, e.g. the house number) and columns by header
    name (when the answer gives a header), not by position; a row the gold grid does not have (an
    invented or duplicated key) adds a row of wrong cells to the denominator."""
    rows, header = _zebra_gold(problem)
    n_cols = len(header)
    ans = answer_tag(answer_region(response))
    if ans is None:
        return result(False, None)
    try:
        pred = parse_structured(ans)
    except ValueError as e:
        return result(False, ans, reason=f"unparsable: {e}")
    if not isinstance(pred, dict) or not isinstance(pred.get("rows"), list):
        return result(False, ans, reason="not_a_grid")
    pred_header = pred.get("header")
    if isinstance(pred_header, list) and len(pred_header) == n_cols:
        names = [_cell(h) for h in pred_header]
        cols = [names.index(h) if h in names else None for h in header]
    else:
        cols = list(range(n_cols))
    by_key: dict[str, list] = {}
    extra = 0
    for prow in pred["rows"]:
        if not isinstance(prow, list) or not prow:
            extra += 1
            continue
        key = _cell(prow[cols[0]] if cols[0] is not None and cols[0] < len(prow) else prow[0])
        if key in by_key:
            extra += 1  # a second row for the same key
        else:
            by_key[key] = prow
    gold_keys = {_cell(r[0]) for r in rows}
    extra += sum(1 for k in by_key if k not in gold_keys)
    correct = 0
    for row in rows:
        prow = by_key.get(_cell(row[0]), [])
        for j in range(n_cols):
            c = cols[j]
            if c is not None and c < len(prow) and _cell(prow[c]) == _cell(row[j]):
                correct += 1
    total = (len(rows) + extra) * n_cols
    all_correct = total > 0 and extra == 0 and correct == len(rows) * n_cols
    score = (correct / total if total else 0.0) if partial else float(all_correct)
    reason = "correct" if all_correct else ("partial" if score > 0 else "wrong")
    return RewardResult(
        score,
        {
            "extracted": ans,
            "reason": reason,
            "all_correct": all_correct,
            "cells": correct,
            "extra_rows": extra,
        },
    )


# ---------------------------------------------------------------- ordering puzzles


_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+?)\s*$", re.MULTILINE)


def _name_list(ans: str) -> list[str] | None:
    """The ordering an answer gives: a list literal, `[a, b, c]` without quotes, a numbered or bulleted
    list, or a comma list on one line (bulleted or numbered too). None when it offers none, or more
    than one (a hedge)."""
    try:
        got = parse_structured(ans)
    except ValueError:
        brackets = re.findall(r"\[([^\[\]]*)\]", ans)
        numbered = _NUMBERED.findall(ans)
        if len(brackets) > 1 or (brackets and numbered):
            return None  # two orderings offered
        if brackets:
            got = [x.strip().strip("'\"") for x in brackets[0].split(",")]
        elif len(numbered) > 1:
            got = [x.strip().strip("*_").strip() for x in numbered]
        elif "," in ans and "\n" not in ans.strip() and " or " not in ans:  # one line: "[1.|-] a, b, c"
            line = numbered[0] if numbered else ans.strip()
            got = [x.strip().strip("'\"*_") for x in line.strip(".").split(",")]
        else:
            return None
    if not isinstance(got, (list, tuple)) or not got:
        return None
    if any(isinstance(x, (list, tuple, dict)) for x in got):
        return None  # a list of orderings
    return [_cell(x) for x in got]


def _ordering_gold(problem: Problem) -> list:
    gold = _gold(problem.ground_truth)
    if not isinstance(gold, list):
        raise ValueError(f"ordering: ground truth must be a list, got {type(gold).__name__}")
    if not gold or not all(isinstance(x, (str, int, float)) and _cell(x) for x in gold):
        raise ValueError(f"ordering: ground truth {gold!r} is not a list of names")
    return gold


@VERIFIERS.register("ordering")
def ordering(response: str, problem: Problem) -> RewardResult:
    """1 if the `<answer>` names the same items in the same order as the gold list (one ordering only)."""
    gold = _ordering_gold(problem)
    ans = answer_tag(answer_region(response))
    if ans is None:
        return result(False, None)
    pred = _name_list(ans)
    if pred is None:
        return result(False, ans, reason="not_a_list")
    return result(pred == [_cell(x) for x in gold], ans)


# ---------------------------------------------------------------- graph problems


def _short(s: str) -> str:
    return _cell(s).strip(" .'\"`*_")


def _graph_gold(problem: Problem) -> str:
    """The gold short answer: a text or a number, or a list of one (not None, blank, or several)."""
    gold = single(problem.ground_truth)
    if isinstance(gold, (str, int, float)) and _short(str(gold)):
        return _short(str(gold))
    raise ValueError(
        f"graph: ground truth {problem.ground_truth!r} is not one short answer (a text or a number)"
    )


@VERIFIERS.register("graph")
def graph(response: str, problem: Problem) -> RewardResult:
    """1 if the `<answer>` equals the gold answer (case-insensitive; numbers compared by value)."""
    gold = _graph_gold(problem)
    ans = answer_tag(answer_region(response))
    if ans is None:
        return result(False, None)
    pred = _short(ans)
    try:
        return result(float(pred) == float(gold), ans)
    except ValueError:
        return result(pred == gold and gold != "", ans)


# ---------------------------------------------------------------- ARC grids


def _colour(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,3}", v.strip()):
        return int(v)
    raise ValueError(f"not a colour: {v!r}")


def _grid(x: Any) -> list[list[int]] | None:
    if not isinstance(x, list) or not x or not all(isinstance(r, list) for r in x):
        return None
    try:
        return [[_colour(v) for v in r] for r in x]
    except ValueError:
        return None


_SPACE_ROW = re.compile(r"^\s*-?\d{1,3}(?:[ \t,]+-?\d{1,3})*\s*$")


def _find_grid(ans: str) -> list[list[int]] | None:
    """A grid as a list literal (anywhere in the answer) or as rows of space-separated digits."""
    try:
        return _grid(plain(parse_structured(ans)))
    except ValueError:
        pass
    lines = [ln for ln in ans.strip("`").strip().splitlines() if ln.strip()]
    if all(_SPACE_ROW.match(ln) for ln in lines):
        return _grid([re.split(r"[ \t,]+", ln.strip()) for ln in lines])
    start, end = ans.find("[["), ans.rfind("]]")
    if start < 0 or end < start:
        return None
    try:
        return _grid(parse_structured(ans[start : end + 2]))
    except ValueError:
        return None


def _arc_gold(problem: Problem) -> list[list[int]]:
    gold = _grid(_gold(problem.ground_truth))
    if gold is None:
        raise ValueError("arc: ground truth is not a grid (list of lists of integers)")
    return gold


@VERIFIERS.register("arc")
def arc(response: str, problem: Problem) -> RewardResult:
    """1 if the `<answer>` grid equals the gold grid exactly (same shape, same colours)."""
    gold = _arc_gold(problem)
    ans = answer_tag(answer_region(response))
    if ans is None:
        return result(False, None)
    pred = _find_grid(ans)
    if pred is None:
        return result(False, ans, reason="not_a_grid")
    return result(pred == gold, ans)


# ---------------------------------------------------------------- code I/O prediction

_CODE_BLOCK = re.compile(r"```(?:json)?\s*([\s\S]*?)```")


_NONE = object()


def _last_json_object(s: str) -> Any:
    depth, start, last = 0, 0, None
    for i, ch in enumerate(s):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                last = s[start : i + 1]
    if last is None:
        return _NONE
    try:
        return json.loads(last)
    except ValueError:
        return _NONE


def _unwrap(obj: Any) -> Any:
    if isinstance(obj, dict) and len(obj) == 1 and ("output" in obj or "input" in obj):
        return next(iter(obj.values()))
    return obj


def _norm(obj: Any) -> Any:
    """JSON-encoded strings parsed, "true"/"false" strings as booleans, recursively."""
    if isinstance(obj, str):
        s = obj.strip()
        if s.startswith(("[", "{")):  # a JSON-encoded list / object ("[1, 2]"); a bare "42" stays a string
            try:
                return _norm(json.loads(s))
            except ValueError:
                pass
        return {"true": True, "false": False}.get(s.lower(), obj)
    if isinstance(obj, (list, tuple)):
        return [_norm(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _norm(v) for k, v in obj.items()}
    return obj


def _codeio_gold(gt: Any) -> Any:
    gt = plain(gt)
    if isinstance(gt, str):
        s = gt.strip()
        if s.startswith('"input"') or s.startswith('"output"'):
            s = "{" + s + "}"
        try:
            gt = parse_structured(s)
        except ValueError:
            return gt
    return _unwrap(gt)


@VERIFIERS.register("codeio")
def codeio(response: str, problem: Problem) -> RewardResult:
    """1 if the predicted input/output (JSON) equals the gold one after normalisation."""
    gold = _codeio_gold(problem.ground_truth)
    if isinstance(gold, dict) and "functional" in gold:
        return result(
            False, None, reason="error: CRUXEval needs code execution (use the 'cruxeval' verifier)"
        )
    region = answer_region(response)
    blocks = _CODE_BLOCK.findall(region)
    boxed = last_boxed(region)
    if blocks:
        text = blocks[-1].strip()
    elif boxed is not None and boxed.strip().startswith("{"):  # \boxed{{"output": 3}}
        text = boxed.strip()
    else:
        text = region.strip()
    if len(text) > MAX_PARSE_CHARS:
        return result(False, None, reason="answer_too_long")
    try:
        pred = json.loads(text)
    except ValueError:
        pred = _last_json_object(text)
    if pred is _NONE:
        return result(False, None)
    pred = _unwrap(pred)
    return result(_norm(pred) == _norm(gold), json.dumps(pred, default=str)[:200])


def _codeio_routable(problem: Problem) -> None:
    gold = _codeio_gold(problem.ground_truth)
    if isinstance(gold, dict) and "functional" in gold:
        raise ValueError(
            "codeio: a CRUXEval (functional) ground truth needs code execution: route it to 'cruxeval'"
        )


checks_ground_truth(zebra, _zebra_gold)
checks_ground_truth(ordering, _ordering_gold)
checks_ground_truth(graph, _graph_gold)
checks_ground_truth(arc, _arc_gold)
checks_ground_truth(codeio, _codeio_routable)
