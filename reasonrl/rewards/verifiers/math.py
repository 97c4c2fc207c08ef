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
  carries `%` or the prompt says "percent"), where 28 and 0.28 both answer "28%". An answer `28%`
  answers a gold 28 and a gold 0.28 anywhere (math-verify's and the "table" verifier's reading).
- Golds are read like predictions: as the content of one `\\boxed{}`. A gold "2, 3" is the set of
  solutions {2, 3} (a thousands-separated "7,425,000" and math-verify's decimal comma "1,22" stay
  one number), so the whole answer is
  needed and its order does not matter; `x=2 or x=3`, `2 and 3` and `\\pm 2` are set forms on
  either side. A gold that is a list of several answers or a mapping is refused at load (the row
  must say in one string what it means).
- A right answer written as a computation (`123 \\times 456`, `\\dbinom{8}{4}`, `8/2`) of a gold that is a
  whole number or a fraction, or as a fraction not in lowest terms, scores 0 ("unevaluated",
  `math_form`): a copied "Compute ..." question is no answer. `accept_unevaluated=True` is math-verify's
  reading.
- An AMC-style answer that names the option and its value (`\\textbf{(C)}\\ 5`) is compared by its
  letter against a letter gold and by its value against any other (`math_form.choice_label`).
- Scientific notation is a number on both sides (`2.5e-7` == `2.5\\times 10^{-7}` == `0.00000025`),
  never 2.5·e − 7 with Euler's e. A row's `extra_info.tolerance` (absolute, OlympiadBench's `error`)
  accepts plain numbers, and each number of a comma list in any order, within it.
- Sympy work is bounded: an exponent tower three levels deep, or a numeric power too large to
  write out (`9^{9^{9}}`, `9^{99999999}`), scores 0 at once ("too_complex", `math_size`); on the main thread
  math-verify's own timeouts apply too.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from fractions import Fraction
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, checks_ground_truth, result
from reasonrl.rewards.extract import Extraction, answer_region, boxed_all, extract
from reasonrl.rewards.ground_truth import single
from reasonrl.rewards.verifiers import math_form, math_numbers, math_warm_up
from reasonrl.rewards.verifiers.math_size import too_complex
from reasonrl.types import Problem

MATH_MODES = ("boxed", "answer_tag", "gsm8k", "answer_colon")
GSM8K_MODES = ("gsm8k", "boxed", "answer_tag", "answer_colon")
MAX_SYMBOLIC_CHARS = 8000  # math-verify sees at most this many trailing characters
MAX_NUMBER_CHARS = 100  # longer digit strings are not plain answers

# ---------------------------------------------------------------- fast path: plain numbers

_WRAPPERS = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|textnormal|operatorname)\s*\{([^{}]*)\}")
SPACING = re.compile(r"\\[,;:! ]|\\quad|\\qquad|~")  # LaTeX spacing (math_form reads it too)
DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree|°")
_FRAC = re.compile(r"^\\[dtc]?frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}$")
_PLAIN = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_THOUSANDS = re.compile(r"^[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?$")
_THOUSANDS_SPACE = re.compile(r"^[+-]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?$")
# scientific notation: 2.5e-7, 2.5E+3, 2.5 \times 10^{-7}, 2.5 \cdot 10^5, 2.5*10^-7, 2.5 x 10^{3}
_SCIENTIFIC = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:[eE]([+-]?\d+)|(?:\\times|\\cdot|\*|×|x)\s*10\s*\^\s*"
    r"(?:\{\s*([+-]?\d+)\s*\}|\(\s*([+-]?\d+)\s*\)|([+-]?\d+)))$"
)
MAX_EXPONENT = 400  # 1e401 is not an answer; math-verify gets it
# one number: plain, thousands-separated, or math-verify's decimal comma ("1,22": no space)
_ONE_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?|[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[+-]?\d+,\d+")
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
    s = SPACING.sub(" ", s)
    s = _WRAPPERS.sub(r" \1 ", s)
    s = DEGREES.sub("", s)
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
    m = _SCIENTIFIC.match(s)
    if m:
        exponent = int(next(g for g in m.groups()[1:] if g is not None))
        if abs(exponent) <= MAX_EXPONENT:
            return Fraction(m.group(1)) * Fraction(10) ** exponent
    return None


def scientific_latex(s: str) -> str:
    """`2.5e-7` -> `2.5\\times 10^{-7}`, so that math-verify does not read the e as Euler's number
    (2.5e - 7); any other text is returned as it is."""
    m = _SCIENTIFIC.match(s.strip())
    if not m or m.group(2) is None:
        return s
    return f"{m.group(1)}\\times 10^{{{int(m.group(2))}}}"


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


def fast_compare(pred: str, gold: str, percent_ok: bool, tolerance: float = 0.0) -> bool | None:
    """True / False when both sides are numbers and the answer is certain; None otherwise.

    Equal values are equal, and so are values within the problem's absolute `tolerance` (a dataset's
    own, e.g. OlympiadBench's `error`; 1% slack as OlympiadBench's judge allows). Unequal values are a certain "wrong" only when both are written as
    plain decimals without a percent sign; a fraction against a rounded decimal (1/3 vs 0.3333),
    or a percentage against a value, is left to math-verify and its rounding rules.
    """
    p, g = to_number(pred), to_number(gold)
    if p is None or g is None:
        return None
    (pv, pp, pl), (gv, gp, gl) = p, g
    if pv == gv:  # same number (28% vs 28 included)
        return True
    if tolerance and abs(pv - gv) <= Fraction(tolerance) * Fraction(101, 100):
        return True
    if percent_ok and (pv == gv / 100 or pv == gv * 100):
        return True
    if pp or gp or not (pl and gl):
        return None
    return False


def _items(text: str) -> list[str]:
    return [text] if _ONE_NUMBER.fullmatch(clean_latex(text)) else text.split(",")


def tolerant_list_compare(pred: str, gold: str, tolerance: float) -> bool | None:
    """A comma list of numbers against a gold list, order-free, each within `tolerance` (OlympiadBench
    compares every answer of a multi-answer problem with the row's tolerance); None unless both are
    lists of plain numbers. One number with commas in it (`7,425,000`, `1,22`) is not a list."""
    golds, preds = ([to_number(x) for x in _items(side)] for side in (gold, pred))
    if len(golds) < 2 or any(x is None or x[1] for x in golds + preds):
        return None
    if len(preds) != len(golds):
        return False
    slack = Fraction(tolerance) * Fraction(101, 100)
    pv, gv = sorted(x[0] for x in preds), sorted(x[0] for x in golds)  # sorted pairing is optimal on a line
    return all(abs(a - b) <= slack for a, b in zip(pv, gv))


# ---------------------------------------------------------------- set forms and size guards

# "or" / "and" joining solutions ("x=2 or x=3", "2 \text{ and } 3"), read as a comma list
_LIST_JOIN = re.compile(
    r"\s*(?:\\(?:text|textrm|mathrm|mbox)\s*\{\s*(?:or|and)\s*\}|(?<![A-Za-z\\])(?:or|and)(?![A-Za-z]))\s*"
)
_VAR_PREFIX = re.compile(r"^\s*([A-Za-z](?:_\{?\w+\}?)?\s*=)?\s*(.*)$", re.DOTALL)
SYMBOLIC_TIMEOUT_S = 5


def set_form(answer: str) -> str:
    """`x=2 or x=3` / `2 and 3` -> `x=2, x=3` / `2, 3`; one `\\pm` -> both values."""
    s = _LIST_JOIN.sub(", ", answer).strip(", ")
    if s.count("\\pm") == 1 and "," not in s:
        left, right = (x.strip() for x in s.split("\\pm"))
        var, rest = _VAR_PREFIX.match(left).groups()
        var = var or ""
        if right:
            s = f"{var}{rest}+{right}, {var}{rest}-{right}" if rest else f"{var}{right}, {var}-{right}"
    return s


def _timeout() -> int | None:
    """math-verify's timeouts use SIGALRM, which only works on the main thread."""
    return SYMBOLIC_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


# ---------------------------------------------------------------- symbolic path: math-verify


@functools.cache
def _mv():
    import math_verify  # heavy (sympy): imported on first symbolic comparison only

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled" notice
    math_numbers.install()  # plain numbers without sympy's expression parser (same objects)
    return math_verify


# a plain integer, as most golds are: 0.6 ms each through mv.parse
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> Any:
    """Gold as math-verify sees it. Bare LaTeX ("2\\sqrt{2}", "\\pi") is read as one boxed answer;
    delimited text and bare numbers with separators ("7,425,000", "1,22") are parsed as they are."""
    mv = _mv()
    if _INTEGER.fullmatch(gold):  # what mv.parse returns for it (tested equal), without sympy's string parser
        import sympy

        return [sympy.Integer(int(gold)), gold]
    gold = scientific_latex(gold)
    delimited = any(d in gold for d in ("$", "\\(", "\\[", "\\boxed", "\\fbox"))
    if delimited or _ONE_NUMBER.fullmatch(gold.strip()):
        parsed = mv.parse(gold, parsing_timeout=None)
        if parsed:
            return parsed
    boxed = f"\\boxed{{{set_form(gold)}}}"  # a list of solutions is a set, as in a prediction
    return mv.parse(boxed, parsing_timeout=None) or mv.parse(gold, parsing_timeout=None)


def _parse_pred(text: str) -> Any:
    mv = _mv()
    return mv.parse(text[-MAX_SYMBOLIC_CHARS:], parsing_timeout=_timeout())


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
    ok = _integers_verify(g, p)
    if ok is None:
        ok = _mv().verify(
            g,
            p,
            float_rounding=rounding,
            allow_set_relation_comp=allow_set_relation_comp,
            strict=strict,
            timeout_seconds=_timeout(),
        )
    return bool(ok), str(p[-1])


def _integers_verify(gold: list, pred: list) -> bool | None:
    """What math-verify's `verify` returns when every expression on both sides is a sympy Integer (most
    free-text answers to integer golds), or None otherwise. It tries every (gold, pred) pair: two
    expressions are equal when their difference simplifies to 0, which for two integers is their
    equality (no float, relation, set or symbol rule applies); two strings when equal after strip and
    not empty; a string and an expression never. The same answer without its per-pair timeout and
    `simplify` (half of scoring such an answer; tested against `verify`)."""
    import sympy

    both = (*gold, *pred)
    if not all(isinstance(x, (str, sympy.Integer)) for x in both) or all(isinstance(x, str) for x in both):
        return None
    for a in gold:
        for b in pred:
            if isinstance(a, str) and isinstance(b, str):
                if a.strip() and a.strip() == b.strip():
                    return True
            elif not isinstance(a, str) and not isinstance(b, str) and int(a) == int(b):
                return True
    return False


# ---------------------------------------------------------------- the verifiers


def _gold_text(problem: Problem) -> str:
    gt = single(problem.ground_truth)
    text = str(gt).strip()
    if gt is None or not text or (isinstance(gt, (list, dict)) and not gt):
        raise ValueError(f"math: empty ground truth {gt!r} (any answer naming it would score 1)")
    if isinstance(gt, (list, dict)):
        # its Python text was read as math: ['2', '3'] became the interval [2, 3]; whether a list means
        # "all of these" or "any of these" is the data's to say, in one string
        raise ValueError(
            f"math: ground truth {gt!r} is a {type(gt).__name__}, not one answer (write several "
            f'answers as one string, "2, 3", as OlympiadBench does)'
        )
    return text


def _tolerance(problem: Problem) -> float:
    """The row's absolute tolerance for a numerical answer (`extra_info.tolerance`), else 0."""
    try:
        tol = float(problem.extra_info.get("tolerance") or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return tol if 0.0 < tol < float("inf") else 0.0


def _asks_percent(gold: str, problem: Problem) -> bool:
    return "%" in gold or re.search(r"percent", problem.user_text, re.IGNORECASE) is not None


def score_math(
    response: str,
    problem: Problem,
    modes: tuple[str, ...] = MATH_MODES,
    float_rounding: int = 6,
    allow_set_relation_comp: bool = False,
    strict: bool = True,
    accept_unevaluated: bool = False,
) -> RewardResult:
    """Shared body of the math verifiers; `modes` is the extraction order.

    Options (math-verify's): `float_rounding` decimal places for float comparison,
    `allow_set_relation_comp` (x in [a, b] == a <= x <= b), `strict=False` (also equate variables
    by name-free structure and symbols with their values). Ours: `accept_unevaluated=True` scores a
    computation equal to a plain-number gold as right, as math-verify does (`math_form`).
    """
    gold = _gold_text(problem)
    region = answer_region(response)
    if not region.strip():
        return result(False, None)
    percent_ok = _asks_percent(gold, problem)
    tolerance = _tolerance(problem)
    boxes = boxed_all(region)
    found = extract(region, modes, think=False)
    labelled = math_form.choice_label(found.answer, gold) if found is not None else None
    if labelled is not None:  # "(C) 5": the letter against a letter gold, else the value
        found = Extraction(labelled, found.mode)
    # fast path: one answer (identical boxes count as one) that is a plain number
    if found is not None and (found.mode != "boxed" or len(set(boxes)) == 1):
        if tolerance and "," in gold:
            close = tolerant_list_compare(found.answer, gold, tolerance)
            if close is not None:
                return result(close, found.answer, path="fast")
        fast = fast_compare(found.answer, gold, percent_ok, tolerance)
        if fast is not None:
            return _unless_unevaluated(fast, found.answer, gold, accept_unevaluated, "fast")
    elif found is None:
        whole = region.strip()
        fast = fast_compare(whole, gold, percent_ok, tolerance) if len(whole) < 40 else None
        if fast is not None:
            return _unless_unevaluated(fast, whole, gold, accept_unevaluated, "fast")
    # symbolic path: boxed answers and free text go to math-verify whole (it joins all boxes and
    # finds "final answer is" anchors itself); tag / #### / bare "Answer: 4, 5" answers go alone
    mode = found.mode if found is not None else "free_text"
    if mode in ("answer_colon", "free_text") and _HEDGE.search(region[-300:]):
        return result(False, None, reason="ambiguous", path="symbolic")
    if found is not None and too_complex(found.answer):
        return result(False, found.answer, reason="too_complex", path="symbolic")
    one_box = mode != "boxed" or len(set(boxes)) == 1
    if mode in ("answer_tag", "gsm8k") or (mode == "answer_colon" and _BARE.fullmatch(found.answer)):
        text = found.answer if "$" in found.answer else f"\\boxed{{{set_form(found.answer)}}}"
    elif one_box and (labelled or (mode == "boxed" and set_form(found.answer) != found.answer)):
        # an option's letter or value alone; "x=2 or x=3" read as the set it names
        text = f"\\boxed{{{set_form(found.answer)}}}"
    else:
        text = region
    if too_complex(text[-MAX_SYMBOLIC_CHARS:]):
        return result(False, None, reason="too_complex", path="symbolic")
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
    return _unless_unevaluated(ok, extracted, gold, accept_unevaluated, "symbolic")


def _unless_unevaluated(ok: bool, answer: str | None, gold: str, accept: bool, path: str) -> RewardResult:
    """The result, except that a right answer written as a computation of a plain-number gold scores 0
    ("unevaluated", `math_form`)."""
    g = to_number(gold) if ok and not accept and answer else None
    if g is not None and not g[1]:  # a number, not a percentage
        value, _, literal = g
        integer = literal and value.denominator == 1
        if math_form.unevaluated(answer, gold, integer, exact=integer or not literal):
            return result(False, answer, reason="unevaluated", path=path)
    return result(ok, answer, path=path)


@VERIFIERS.register("math")
def math(
    response: str,
    problem: Problem,
    float_rounding: int = 6,
    allow_set_relation_comp: bool = False,
    strict: bool = True,
    accept_unevaluated: bool = False,
) -> RewardResult:
    """1 if the final answer (boxed, `<answer>`, "Answer:", or last expression) equals the gold."""
    return score_math(
        response,
        problem,
        MATH_MODES,
        float_rounding=float_rounding,
        allow_set_relation_comp=allow_set_relation_comp,
        strict=strict,
        accept_unevaluated=accept_unevaluated,
    )


@VERIFIERS.register("gsm8k")
def gsm8k(
    response: str, problem: Problem, float_rounding: int = 6, accept_unevaluated: bool = False
) -> RewardResult:
    """The math verifier with the GSM8K `#### answer` marker tried first."""
    return score_math(
        response, problem, GSM8K_MODES, float_rounding=float_rounding, accept_unevaluated=accept_unevaluated
    )


checks_ground_truth(math, _gold_text)
checks_ground_truth(gsm8k, _gold_text)
# what pool workers should import when they start (sympy is slow to import: not inside a call's limit)
math.preload = gsm8k.preload = ("math_verify",)
math.warm_up = gsm8k.warm_up = math_warm_up.warm_up  # its parser's tables, built once (rewards.warm_up)
