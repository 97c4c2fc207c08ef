"""Verifier "livebench": LiveBench's reasoning, language and data-analysis tasks (Reasoning360's
`ood__livebench` rows: `extra_info.task` names the task, `ground_truth` is LiveBench's own string).

Owns one grader per task, written from LiveBench's task definitions, reading the answer after the
think block (`answer_region`):
  web_of_lies_v2 / _v3   three words from yes / no / unknown (last <solution>, else the last three
                         over the **bold** spans, else \\boxed{}, else a plain "yes, no, yes"): v2
                         all-or-nothing, v3 (all correct + fraction correct) / 2
  house_traversal        the names in order (last <solution> / **bold** / \\boxed{}, or one name per
                         bold span over the last spans)
  spatial                one word or number (number words equal digits; a named shape's singular /
                         plural forms are equal)
  zebra_puzzle           old form: one word in the last ***bold*** (or the last word); new form (gold
                         with commas): comma list (answer spot, else a last line with the right
                         number of commas), (all correct + fraction correct) / 2
  connections            16 words in 4 groups of 4 (last <solution> or \\boxed{}, else the last four
                         **bold** groups): fraction of gold groups given exactly
  plot_unscrambling      the sentences of <PLOT_SUMMARY> matched to the gold sentences;
                         1 - edit distance of the order / number of sentences
  typos                  the corrected text (last <solution>, else the answer) contains the gold text,
                         and no other version of it (see below)
  cta                    the column class (last <solution> / **bold** / \\boxed{}, else the last line
                         without an "Answer:" label), equal after lower-casing and dropping non-word
                         characters
  tablejoin              a join mapping {column: column} (last <solution>, fenced block, \\boxed{} or
                         the answer as a literal): F1 over the gold pairs
  tablereformat          the table in the target format named in the prompt (json in any pandas
                         orientation, jsonl, csv, tsv, markdown, html), equal cell by cell
Deliberate departures from LiveBench / Reasoning360 (a policy under RL would exploit them):
answers are read from the last answer spot only, never "the best of every bold span" (connections old
form) or "any of the last three bold words" (spatial); cta needs equality, not a matching suffix;
web_of_lies needs exactly three words, not "the gold among three words"; typos gives nothing for the
gold text beside another version of it (the text again with other corrections, or the uncorrected
text echoed), where LiveBench's substring test gives 1; four stars in a row end one bold span and
start the next (LiveBench-style `***` -> `**` would read "**a****b**" as "a"). Reasoning360's router
also names tablereformat "tableformat", so its rows there always score 0; here they are graded.
Literals are parsed with json / ast.literal_eval, never eval. Does not own: routing (`rewards.routing`).
"""

from __future__ import annotations

import ast
import csv
import difflib
import io
import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, checks_ground_truth
from reasonrl.rewards.extract import answer_region, last_boxed
from reasonrl.types import Problem

_SOLUTION = re.compile(r"<solution>(.*?)</solution>", re.DOTALL | re.IGNORECASE)
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.DOTALL)
_THREE_STARS = re.compile(r"(?<!\*)\*\*\*(?!\*)")
_WORD = re.compile(r"[a-z0-9]+")
NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}  # fmt: skip
SHAPES = {"tetrahedra": "tetrahedron", "triangles": "triangle", "squares": "square", "pyramids": "pyramid",
          "spheres": "sphere", "cubes": "cube", "circles": "circle"}  # fmt: skip
Grader = Callable[[str, str, Problem], float]
GRADERS: dict[str, Grader] = {}


def grader(*names: str):
    def deco(fn: Grader) -> Grader:
        for n in names:
            GRADERS[n] = fn
        return fn

    return deco


def _last(pattern: re.Pattern, text: str) -> str | None:
    found = pattern.findall(text)
    return found[-1].strip() if found else None


def bold_spans(text: str) -> list[str]:
    """The **bold** spans in order. ***x*** counts as bold; a run of four stars is two spans touching,
    not one with a star inside."""
    return _BOLD.findall(_THREE_STARS.sub("**", text))


def untext(s: str) -> str:
    """LaTeX `\\text{x}` / `\\textbf{x}` -> x."""
    return re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", s)


def final_answer(text: str) -> str | None:
    """The last <solution>, else the last **bold** span, else the last \\boxed{}."""
    bold = bold_spans(text)
    for got in (_last(_SOLUTION, text), bold[-1].strip() if bold else None, last_boxed(text)):
        if got is not None and got.strip():
            return untext(got).strip()
    return None


_LABEL = re.compile(r"^\s*(?:\**\s*(?:final\s+)?answer\s*\**\s*[:：]\s*\**)", re.IGNORECASE)


def last_line(text: str) -> str:
    """The answer's last non-empty line without an "Answer:" label (an unmarked final answer)."""
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return untext(_LABEL.sub("", lines[-1])).strip() if lines else ""


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _norm_word(w: str) -> str:
    w = w.strip().lower().strip(".*")
    return NUMBER_WORDS.get(w, SHAPES.get(w, w))


_VERDICTS = ("yes", "no", "unknown")


def _verdicts(answer: str, n: int) -> list[str]:
    """The n yes / no / unknown answers: from the last <solution> (exactly n such words there, other
    words such as "Answer:" aside); else the last n such words over the bold spans (one per span,
    "**Yes**, **No**, **Yes**", or together); else the last \\boxed{}; else the last plain
    "yes, no, yes" run. As LiveBench reads them, but a <solution> with more than n is no answer."""
    sol = _last(_SOLUTION, answer)
    if sol is not None and sol.strip():
        got = [w for w in _words(sol) if w in _VERDICTS]
        return got if len(got) == n else []
    bold = [w for span in bold_spans(answer) for w in _words(span) if w in _VERDICTS]
    if bold:
        return bold[-n:] if len(bold) >= n else []
    box = last_boxed(answer)
    if box is not None:
        got = [w for w in _words(box) if w in _VERDICTS]
        return got if len(got) == n else []
    runs = re.findall(r"\b(?:yes|no|unknown)(?:,\s*(?:yes|no|unknown)\b)+", answer.lower())
    runs = [_words(r) for r in runs if len(_words(r)) == n]
    return runs[-1] if runs else []


@grader("web_of_lies_v2", "web_of_lies_v3", "web_of_lies")
def web_of_lies(answer: str, gold: str, problem: Problem) -> float:
    want = [w.strip().lower() for w in gold.split(",")]
    got = _verdicts(answer, len(want))
    if len(got) != len(want):
        return 0.0
    right = sum(a == b for a, b in zip(got, want))
    if str(problem.extra_info.get("task")) == "web_of_lies_v3":
        return ((right == len(want)) + right / len(want)) / 2
    return float(right == len(want))


@grader("house_traversal")
def house_traversal(answer: str, gold: str, problem: Problem) -> float:
    """The names in order: the last answer spot's words, or one name per bold span over the last
    spans ("**Alice**, then **Bob**, then **Carol**")."""
    want = _words(gold)
    if _words(final_answer(answer) or "") == want:
        return 1.0
    if _last(_SOLUTION, answer) is not None:
        return 0.0
    spans = [_words(b) for b in bold_spans(answer)]
    return float(len(spans) >= len(want) > 1 and [w for sp in spans[-len(want) :] for w in sp] == want)


@grader("spatial")
def spatial(answer: str, gold: str, problem: Problem) -> float:
    got = final_answer(answer)
    if got is None:
        return 0.0
    return float(" ".join(map(_norm_word, got.split())) == " ".join(map(_norm_word, gold.split())))


@grader("zebra_puzzle")
def zebra_puzzle(answer: str, gold: str, problem: Problem) -> float:
    if "," not in gold:  # the old form: one word, in ***bold*** or as the last word
        bold = re.findall(r"\*\*\*(\w+)\*\*\*", answer)
        words = re.findall(r"\b\w+\b", answer)
        last = bold[-1] if bold else (words[-1] if words else "")
        g = gold.strip().lower()
        return float(_norm_word(last) == _norm_word(g) or f"{last.lower()} movies" == g)
    want = [x.strip().lower() for x in gold.split(",")]
    got = final_answer(answer)
    if got is None:  # LiveBench's last resort: a last line with the answer's number of commas
        line = last_line(answer)
        got = line if line.count(",") == len(want) - 1 else None
    if got is None:
        return 0.0
    have = [x.strip().lower() for x in got.split(",")]
    if len(have) != len(want):
        return 0.0
    item = lambda x: _norm_word(x.replace("-", " ").replace("position", "").strip())  # noqa: E731
    right = sum(item(a) == item(b) for a, b in zip(have, want))
    return ((right == len(want)) + right / len(want)) / 2


def _groups(words: list[str]) -> list[frozenset[str]]:
    words = [w.strip().lower() for w in words]
    return [frozenset(words[i : i + 4]) for i in range(0, len(words), 4)]


@grader("connections")
def connections(answer: str, gold: str, problem: Problem) -> float:
    want = [w for w in gold.split(",") if w.strip()]
    sol = _last(_SOLUTION, answer)
    if sol is None and last_boxed(answer) is not None:  # LiveBench reads a \boxed{} answer too
        sol = untext(last_boxed(answer)).replace("\\", "")
    if sol is not None:
        have = [w for w in sol.replace("\n", " ").split(",") if w.strip()]
    else:  # the old form: one **bold** group of four per line; the last four groups count
        bold = [b for b in _BOLD.findall(answer.replace("\n", " ")) if b.count(",") == 3]
        have = [w for b in bold[-(len(want) // 4) :] for w in b.split(",")]
    if len(have) != len(want) or len({w.strip().lower() for w in have}) != len(have):
        return 0.0
    gold_groups = set(_groups(want))
    return sum(g in gold_groups for g in _groups(have)) / len(gold_groups)


def _edit_distance(a: list[int], b: list[int]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] if x == y else 1 + min(prev[j], cur[j - 1], prev[j - 1]))
        prev = cur
    return prev[-1]


@grader("plot_unscrambling")
def plot_unscrambling(answer: str, gold: str, problem: Problem) -> float:
    m = re.search(r"<PLOT_SUMMARY>(.*?)(?:</PLOT_SUMMARY>|$)", answer, re.DOTALL)
    text = m.group(1) if m else answer
    want = [s.strip() for s in gold.split(".") if s.strip()]
    have = [s.strip() for s in text.split(".") if s.strip()]
    if not want or not have:
        return 0.0
    order = []
    for s in want:
        best = difflib.get_close_matches(s, have, n=1, cutoff=0.0)
        if best:
            order.append(have.index(best[0]))
    return max(0.0, 1 - _edit_distance(list(range(len(want))), order) / len(want))


def _shingles(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def near_copy(rest: str, gold: str) -> bool:
    """Whether `rest` holds another version of `gold`: at least half of gold's word n-grams (n = 4, fewer
    for a short gold) occur in it. Framing ("Here is the corrected text:") or a note on one fix shares
    almost none; the text again with other corrections shares most. Linear in the lengths."""
    g, r = gold.lower().split(), rest.lower().split()
    n = max(1, min(4, len(g) // 2))
    want = _shingles(g, n)
    return bool(want) and len(want & _shingles(r, n)) >= len(want) / 2


@grader("typos")
def typos(answer: str, gold: str, problem: Problem) -> float:
    got = _last(_SOLUTION, answer)
    if got is None:
        got = answer.replace("<solution>", "").replace("</solution>", "")
    got = " ".join(line for line in got.strip().split("\n") if line.strip())
    gold = gold.strip()
    if not gold or gold not in got:
        return 0.0
    # the gold text among other versions of it is a hedge over the corrections, not an answer
    return float(not near_copy(got.replace(gold, " ", 1), gold))


@grader("cta")
def cta(answer: str, gold: str, problem: Problem) -> float:
    got = final_answer(answer)
    got = got if got is not None else last_line(answer)
    clean = lambda s: re.sub(r"[^\w]", "", s.lower())  # noqa: E731
    return float(bool(clean(gold)) and clean(got) == clean(gold))


def _literal(text: str) -> Any:
    text = text.strip().replace("null", "None")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _mapping(answer: str) -> dict:
    sol = _last(_SOLUTION, answer)
    if sol is not None:
        return _mapping(sol)
    candidates = [answer]
    fences = re.findall(r"```(?:python|json)?\s*\n?(.*?)```", answer, re.DOTALL)
    if fences:
        candidates.insert(0, fences[-1])
    boxed = last_boxed(answer)
    if boxed is not None:
        candidates.insert(0, re.sub(r"\\text\{['\"]?(.*?)['\"]?\}", r"'\1'", boxed).replace("\\", ""))
    for c in candidates:
        got = _literal(c)
        if isinstance(got, dict):
            return {k: v for k, v in got.items() if v is not None}
    return {}


@grader("tablejoin")
def tablejoin(answer: str, gold: str, problem: Problem) -> float:
    want = gold if isinstance(gold, dict) else _literal(str(gold))
    if not isinstance(want, dict) or not want:
        raise ValueError("tablejoin ground truth is not a mapping")
    got = _mapping(answer)
    tp = sum(1 for k, v in got.items() if want.get(k) == v)
    fp = len(got) - tp
    fn = sum(1 for k, v in want.items() if got.get(k) != v)
    return round(2 * tp / (2 * tp + fp + fn), 2) if tp else 0.0


MAX_COLSPAN = 1000  # HTML's own limit; a policy's colspan="1000000000" must not fill memory


class _HtmlCells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            span = str(dict(attrs).get("colspan") or "").strip()  # the answer's: bounded as HTML bounds it
            self._cell, self._span = [], min(max(1, int(span)), MAX_COLSPAN) if span.isdecimal() else 1

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            if not self.rows:
                self.rows.append([])
            self.rows[-1].extend([" ".join("".join(self._cell).split())] * self._span)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_rows(html: str) -> list[list[str]]:
    """The cell rows of HTML tables (cells spanning columns repeated)."""
    parser = _HtmlCells()
    parser.feed(html)
    return [r for r in parser.rows if r]


def _records(text: str, fmt: str) -> list[dict[str, str]] | None:
    text = text.strip()
    if fmt in ("json", "jsonl"):
        try:
            data = (
                [json.loads(x) for x in text.splitlines() if x.strip()]
                if fmt == "jsonl"
                else json.loads(text)
            )
        except json.JSONDecodeError:
            return None
        if isinstance(data, dict) and isinstance(data.get("data"), list):  # orient=table / split
            cols = data.get("columns")
            data = [dict(zip(cols, r)) for r in data["data"]] if cols else data["data"]
        elif isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
            data = list(data.values())  # orient=index
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            return None
        return [{str(k): v for k, v in r.items() if k != "index"} for r in data]
    if fmt == "html":
        rows = html_rows(text)
    elif fmt == "markdown":
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
                if "|" in line and not re.fullmatch(r"[\s|:\-]+", line)]  # fmt: skip
    else:
        rows = list(csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ","))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 1:
        return None
    header = [h.strip() for h in rows[0]]
    return [{h: c for h, c in zip(header, r) if h and h != "index"} for r in rows[1:]]


def _same_cell(a: Any, b: Any) -> bool:
    try:
        x, y = float(str(a).strip()), float(str(b).strip())
        return abs(x - y) < 1e-6 or (x != x and y != y)
    except ValueError:
        return str(a).strip() == str(b).strip()


def _target_format(problem: Problem) -> str:
    text = problem.user_text + "\n" + str(problem.extra_info.get("prompt", ""))
    m = re.search(r"format to (\w+) format", text, re.IGNORECASE) or re.search(
        r"Target Format:\s*(\w+)", text
    )
    if not m:
        raise ValueError("tablereformat: the prompt names no target format")
    return m.group(1).lower()


@grader("tablereformat", "tableformat")
def tablereformat(answer: str, gold: str, problem: Problem) -> float:
    fmt = _target_format(problem)
    sol = _last(_SOLUTION, answer)
    text = sol if sol is not None else answer
    fence = re.findall(r"```\w*\n(.*?)```", text, re.DOTALL)
    text = (fence[-1] if fence else text).replace("&amp;", "&")
    want, got = _records(str(gold), fmt), _records(text, fmt)
    if want is None:
        raise ValueError(f"tablereformat: the ground truth is not a {fmt} table")
    if got is None or len(got) != len(want) or any(set(a) != set(b) for a, b in zip(got, want)):
        return 0.0
    return float(all(_same_cell(a[k], b[k]) for a, b in zip(got, want) for k in b))


def _task_and_gold(problem: Problem) -> tuple[str, Any]:
    task = str(problem.extra_info.get("task") or "")
    if task not in GRADERS:
        raise ValueError(f"livebench row has extra_info.task {problem.extra_info.get('task')!r}; "
                         f"known: {', '.join(sorted(GRADERS))}")  # fmt: skip
    gold = problem.ground_truth
    if isinstance(gold, dict) and GRADERS[task] is not tablejoin:  # only a join's answer is a mapping
        raise ValueError(f"livebench: task {task!r} takes a text ground truth, got a mapping")
    return task, gold if isinstance(gold, (str, dict)) else str(gold)


@VERIFIERS.register("livebench")
def livebench(response: str, problem: Problem) -> RewardResult:
    task, gold = _task_and_gold(problem)
    region = answer_region(response)
    if not region.strip():
        return RewardResult(0.0, {"extracted": None, "reason": "no_answer"})
    score = float(GRADERS[task](region, gold, problem))
    reason = "correct" if score == 1.0 else ("partial" if score > 0 else "wrong")
    return RewardResult(
        score, {"extracted": (final_answer(region) or "")[:200], "reason": reason, "task": task}
    )


checks_ground_truth(livebench, _task_and_gold)
