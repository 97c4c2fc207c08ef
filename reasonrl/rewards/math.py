"""Math answer verifiers: "math" (boxed / tags / last expression) and "gsm8k" (`####` first).

Owns: the fast numeric path (LaTeX cleanup, fractions, percentages, thousands separators, degrees,
units, exact rational comparison) and the symbolic fallback through math-verify (`parse` /
`verify`) for sets, intervals, matrices, expressions, equations. Does not own: answer-span
extraction (`rewards.extract`), time limits (`rewards.runner` kills a call that runs too long:
math-verify's own signal-based timeouts are switched off here, so it also works off the main thread).

Policy:
- Only the text after `</think>` counts; an unclosed `<think>` scores 0 ("no_answer").
- Several different `\\boxed{}` answers are compared as one set (math-verify's policy), so hedging
  with `\\boxed{1} \\boxed{2} \\boxed{3}` against a single gold answer scores 0; an unboxed answer
  whose last lines say "3 or 4" scores 0 ("ambiguous").
- gold/100 or gold*100 is never accepted, except when the problem asks for a percentage (the gold
  carries `%` or the prompt says "percent"), where 28 and 0.28 both answer "28%".
"""

from __future__ import annotations

import functools
import logging
import re
from fractions import Fraction
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, result
from reasonrl.rewards.extract import answer_region, boxed_all, extract
from reasonrl.types import Problem

MATH_MODES = ("boxed", "answer_tag", "gsm8k", "answer_colon")
GSM8K_MODES = ("gsm8k", "boxed", "answer_tag", "answer_colon")
MAX_SYMBOLIC_CHARS = 8000  # math-verify sees at most this many trailing characters
MAX_NUMBER_CHARS = 100  # longer digit strings are not plain answers

# ---------------------------------------------------------------- fast path: plain numbers

_WRAPPERS = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|textnormal|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|\\quad|\\qquad|~")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree|°")
_FRAC = re.compile(r"^\\[dtc]?frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}$")
_PLAIN = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_THOUSANDS = re.compile(r"^[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?$")
_THOUSANDS_SPACE = re.compile(r"^[+-]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?$")
_VAR_EQ = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*")
_BARE = re.compile(r"[\d\s,.;:+\-*/^()\[\]{}%=]+")  # an "Answer:" line without words or LaTeX
# "3 or 4", "$3$ or $4$" near the end of a free-text answer: a hedge, not an answer
_HEDGE = re.compile(r"(?:-?\d[\d,.]*|\$[^$\n]{1,40}\$)\s*,?\s+or\s+(?:-?\d|\$)")
_UNIT_WORDS = re.compile(
    r"\s*(?:dollars?|cents?|units?|degrees?|meters?|metres?|cm|mm|km|m|kg|g|seconds?|minutes?|"
    r"hours?|days?|years?|miles?|feet|inches?|square\s+\w+|sq\s*\w+|mph|points?)\.?$",
    re.IGNORECASE,
)


def clean_latex(s: str) -> str:
    """Strip LaTeX presentation from an answer: $ delimiters, \\left/\\right, spacing, \\text{} ..."""
    s = s.strip()
    for a, b in (("\\(", "\\)"), ("\\[", "\\]"), ("$$", "$$"), ("$", "$")):
        if s.startswith(a) and s.endswith(b) and len(s) >= len(a) + len(b):
            s = s[len(a) : len(s) - len(b)].strip()
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    s = _SPACING.sub(" ", s)
    s = _WRAPPERS.sub(r" \1 ", s)
    s = _DEGREES.sub("", s)
    s = s.replace("\\$", "").replace("\\%", "%").replace("$", "")
    return " ".join(s.split()).rstrip(".").strip()


def _parse_plain(s: str) -> Fraction | None:
    s = s.strip()
    if len(s) > MAX_NUMBER_CHARS:
        return None
    if _THOUSANDS.match(s) or _THOUSANDS_SPACE.match(s):
        s = s.replace(",", "").replace(" ", "")
    if _PLAIN.match(s):
        return Fraction(s)
    return None


def to_number(s: str) -> tuple[Fraction, bool, bool] | None:
    """(value, had_percent, is_plain_literal) of a numeric answer; None if it is not one.

    is_plain_literal is False for fractions (\\frac{a}{b}, a/b). Ambiguous forms ("1,22", "2, 3")
    return None and are left to math-verify.
    """
    s = clean_latex(s)
    s = _VAR_EQ.sub("", s, count=1)
    percent = False
    for suffix in ("%", "percent", "pct"):
        if s.endswith(suffix):
            s, percent = s[: -len(suffix)].strip(), True
            break
    s = _UNIT_WORDS.sub("", s).strip()
    if s.startswith("(") and s.endswith(")") and "," not in s:
        s = s[1:-1].strip()
    neg = s.startswith("-")
    body = s[1:].strip() if neg else s
    m = _FRAC.match(body)
    if m:
        num, den = _parse_plain(m.group(1)), _parse_plain(m.group(2))
        if num is None or den is None or den == 0:
            return None
        value = num / den
    elif body.count("/") == 1:
        a, b = (_parse_plain(x) for x in body.split("/"))
        if a is None or b is None or b == 0:
            return None
        value = a / b
    else:
        value = _parse_plain(body)
        if value is None:
            return None
    literal = m is None and "/" not in body
    return (-value if neg else value), percent, literal


def fast_compare(pred: str, gold: str, percent_ok: bool) -> bool | None:
    """True / False when both sides are numbers and the answer is certain; None otherwise.

    Equal values are equal. Unequal values are a certain "wrong" only when both are written as
    plain decimals without a percent sign; a fraction against a rounded decimal (1/3 vs 0.3333),
    or a percentage against a value, is left to math-verify and its rounding rules.
    """
    p, g = to_number(pred), to_number(gold)
    if p is None or g is None:
        return None
    (pv, pp, pl), (gv, gp, gl) = p, g
    if pv == gv:  # same number (28% vs 28 included)
        return True
    if percent_ok and (pv == gv / 100 or pv == gv * 100):
        return True
    if pp or gp or not (pl and gl):
        return None
    return False


# ---------------------------------------------------------------- symbolic path: math-verify


@functools.lru_cache(maxsize=1)
def _mv():
    import math_verify  # heavy (sympy): imported on first symbolic comparison only

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled" notice
    return math_verify


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> Any:
    """Gold as math-verify sees it. Bare LaTeX ("2\\sqrt{2}", "\\pi") is read as one boxed answer;
    delimited text and bare numbers with separators ("7,425,000", "1,22") are parsed as they are."""
    mv = _mv()
    delimited = any(d in gold for d in ("$", "\\(", "\\[", "\\boxed", "\\fbox"))
    if delimited or re.fullmatch(r"[\d\s,.+-]+", gold):
        parsed = mv.parse(gold, parsing_timeout=None)
        if parsed:
            return parsed
    return mv.parse(f"\\boxed{{{gold}}}", parsing_timeout=None) or mv.parse(gold, parsing_timeout=None)


def _parse_pred(text: str) -> Any:
    mv = _mv()
    return mv.parse(text[-MAX_SYMBOLIC_CHARS:], parsing_timeout=None)


def symbolic_compare(
    pred_text: str,
    gold: str,
    rounding: int = 6,
    allow_set_relation_comp: bool = False,
    strict: bool = True,
) -> tuple[bool, str | None]:
    """math-verify equivalence of the answer found in `pred_text` and `gold`; (correct, extracted)."""
    g = _parse_gold(gold)
    if not g:
        raise ValueError(f"math-verify cannot parse the ground truth {gold!r}")
    p = _parse_pred(pred_text)
    if not p:
        return False, None
    ok = _mv().verify(
        g,
        p,
        float_rounding=rounding,
        allow_set_relation_comp=allow_set_relation_comp,
        strict=strict,
        timeout_seconds=None,
    )
    return bool(ok), str(p[-1])


# ---------------------------------------------------------------- the verifiers


def _gold_text(gt: Any) -> str:
    if isinstance(gt, (list, tuple)) and len(gt) == 1:
        gt = gt[0]
    if hasattr(gt, "tolist"):
        gt = gt.tolist()
    return str(gt).strip()


def _asks_percent(gold: str, problem: Problem) -> bool:
    return "%" in gold or re.search(r"percent", problem.user_text, re.IGNORECASE) is not None


def score_math(
    response: str,
    problem: Problem,
    modes: tuple[str, ...] = MATH_MODES,
    float_rounding: int = 6,
    allow_set_relation_comp: bool = False,
    strict: bool = True,
) -> RewardResult:
    """Shared body of the math verifiers; `modes` is the extraction order.

    Options (math-verify's): `float_rounding` decimal places for float comparison,
    `allow_set_relation_comp` (x in [a, b] == a <= x <= b), `strict=False` (also equate variables
    by name-free structure and symbols with their values).
    """
    gold = _gold_text(problem.ground_truth)
    region = answer_region(response)
    if not region.strip():
        return result(False, None)
    percent_ok = _asks_percent(gold, problem)
    boxes = boxed_all(region)
    found = extract(region, modes, think=False)
    # fast path: one answer (identical boxes count as one) that is a plain number
    if found is not None and (found.mode != "boxed" or len(set(boxes)) == 1):
        fast = fast_compare(found.answer, gold, percent_ok)
        if fast is not None:
            return result(fast, found.answer, path="fast")
    elif found is None:
        whole = region.strip()
        fast = fast_compare(whole, gold, percent_ok) if len(whole) < 40 else None
        if fast is not None:
            return result(fast, whole, path="fast")
    # symbolic path: boxed answers and free text go to math-verify whole (it joins all boxes and
    # finds "final answer is" anchors itself); tag / #### / bare "Answer: 4, 5" answers go alone
    mode = found.mode if found is not None else "free_text"
    if mode in ("answer_colon", "free_text") and _HEDGE.search(region[-300:]):
        return result(False, None, reason="ambiguous", path="symbolic")
    if mode in ("answer_tag", "gsm8k") or (mode == "answer_colon" and _BARE.fullmatch(found.answer)):
        text = found.answer if "$" in found.answer else f"\\boxed{{{found.answer}}}"
    else:
        text = region
    try:
        ok, extracted = symbolic_compare(text, gold, float_rounding, allow_set_relation_comp, strict)
    except Exception as e:  # noqa: BLE001 - a malformed answer must not crash a batch
        return result(False, found.answer if found else None, reason=f"error: {e}")
    if ok and not percent_ok:
        # safety net: a bare gold*100 or gold/100 (no % sign anywhere) is never equal
        p = to_number(extracted or "")
        g = to_number(gold)
        scaled = p and g and (p[0] == g[0] * 100 or p[0] * 100 == g[0]) and p[0] != g[0]
        if scaled and not (p[1] or g[1]):
            return result(False, extracted, reason="wrong_percent_scale", path="symbolic")
    return result(ok, extracted, path="symbolic")


@VERIFIERS.register("math")
def math(
    response: str,
    problem: Problem,
    float_rounding: int = 6,
    allow_set_relation_comp: bool = False,
    strict: bool = True,
) -> RewardResult:
    """1 if the final answer (boxed, `<answer>`, "Answer:", or last expression) equals the gold."""
    return score_math(
        response,
        problem,
        MATH_MODES,
        float_rounding=float_rounding,
        allow_set_relation_comp=allow_set_relation_comp,
        strict=strict,
    )


@VERIFIERS.register("gsm8k")
def gsm8k(response: str, problem: Problem, float_rounding: int = 6) -> RewardResult:
    """The math verifier with the GSM8K `#### answer` marker tried first."""
    return score_math(response, problem, GSM8K_MODES, float_rounding=float_rounding)
