"""Whether a math answer states a value or leaves a computation to the grader.

math-verify accepts any expression equal to the gold: `\\boxed{123 \\times 456}` for 56088, `\\boxed{\\int_0^1
8x\\,dx}` for 4, `\\boxed{\\binom{8}{4}}` for 70. On problems that ask to compute such an expression ("Compute
$\\dbinom{8}{4}$.", common in MATH's lower levels and in generated arithmetic) a policy then scores by
copying the question into a box, without solving anything. When the gold is a plain number, the math
verifier therefore requires the answer to be one too: it scores 0 ("unevaluated") an answer that is
correct only as a computation: arithmetic between operands, a power of a number, a factorial, an
absolute value, a function or operator (`\\sqrt`, `\\binom`, `\\int`, `\\sum`, `\\lim`, `\\log`, ...), a
derivative; against a whole-number gold, a fraction (`8/2` for 4); and against any plain-number gold a
fraction not in lowest terms ("Simplify $\\frac{84}{144}$." copied as the answer for 7/12). The
precedent is the PRM800K grader (OpenAI's, used by DeepScaleR and others), which requires an integer
answer for an integer gold and refuses unreduced fractions. Words, units and degrees around the value do
not count (`4 \\text{ cm}^2`, `90^\\circ`), nor does anything before the last `=` or `\\approx` (`2+2=4`
states 4), and scientific notation is a number. Against a decimal gold only fractions are checked: it
may round an irrational value (`\\sqrt{17}` for 4.1231 is right). A gold that is not a plain number
(`2\\sqrt{3}`, a set, an expression) leaves every equal form right, and so does an answer written as
the gold is.

Also owns `choice_label`: AMC-style answers name the option and its value (`\\textbf{(C)}\\ 5`, as in
AoPS solutions); the math verifier compares the letter with a letter gold and the value with any other
gold (math-verify reads the label as a product, c*5, and fails both).

Owns: `unevaluated`, `choice_label`. Does not own: reading numbers (`math.to_number`) or the comparison
(`rewards.verifiers.math`).
"""

from __future__ import annotations

import math
import re

# units and words (and a unit's own power: cm^2): not computations (nor degrees, spacing, delimiters)
_WORDS = re.compile(
    r"\\(?:text|textbf|textrm|textit|mathrm|mathit|mbox|textnormal|operatorname\*?)\s*\{[^{}]*\}"
    r"(?:\s*\^\s*(?:\{[^{}]*\}|\w))?"
)
_DELIMITERS = re.compile(r"\\left|\\right|\$|\\[()\[\]]")  # sizes and math delimiters
_STATED = re.compile(r"=|\\approx|\\simeq|\\equiv")  # the value is what follows the last of these
_FUNCTION = re.compile(
    r"\\(?:sqrt|binom|dbinom|tbinom|choose|int|iint|iiint|oint|sum|prod|lim|limsup|liminf|log|ln|lg|exp|"
    r"sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|lfloor|rfloor|lceil|rceil|gcd|lcm|max|"
    r"min|bmod|pmod|mod|det|partial|nabla|vert|lvert|mid)(?![A-Za-z])"
)
_DERIVATIVE = re.compile(r"\\[dt]?frac\s*\{\s*d")
_OPERAND_END = r"[\w})\]!.]"
_BINARY = re.compile(rf"(?<={_OPERAND_END})\s*(?:[-+*×÷·]|\\times|\\cdot|\\div|\\ast)\s*(?=[\w\\({{\[.])")
_PRODUCT = re.compile(r"[\d)\]}]\s*\(")  # 2(3), (2)(3)
# a number's power (2^{10}) or Euler's e's (e^{0}); another letter's is a unit's (cm^2) or a variable's
_POWER = re.compile(r"(?:[\d)\]}]|(?<![A-Za-z\\])e)\s*(?:\^|\*\*)")
_FACTORIAL_OR_ABS = re.compile(r"[\w)}\]]\s*!|\|")
_FRACTION = re.compile(r"\\[dtc]?frac|/")
_SIMPLE_FRACTION = re.compile(
    r"[+-]?\s*(?:\\[dtc]?frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))|(\d+)\s*/\s*(\d+))"
)
# "2.5 \times 10^{3}": a number, not a product and a power
_SCIENTIFIC = re.compile(r"(?:\\times|\\cdot|\*|×)\s*10\s*\^\s*(?:\{\s*[+-]?\d+\s*\}|[+-]?\d+)")


def _value_text(answer: str) -> str:
    """The part of an answer that states the value: no words, units, degrees or spacing, after the last
    `=` / `\\approx`, scientific notation's power of ten dropped."""
    from reasonrl.rewards.verifiers.math import DEGREES, SPACING  # the verifier's own LaTeX clean-up

    text = _DELIMITERS.sub(" ", SPACING.sub(" ", DEGREES.sub("", _WORDS.sub(" ", answer))))
    return _SCIENTIFIC.sub("", _STATED.split(text)[-1]).strip()


# "(C) 5" after LaTeX clean-up; the value must not start as an operation on the "(C)" (sets: (A) \cup (B))
_LABEL = re.compile(
    r"\(([A-E])\)(?:(?:\s+|(?=\d))(?![=<>+\-*/^|,:;]|\\(?:cup|cap|setminus|times|cdot|div|to|[lg]eq?|neq|in|"
    r"subset|supset|wedge|vee|land|lor|implies|iff)(?![A-Za-z]))(\S.*))?",
    re.DOTALL,
)
_LETTER = re.compile(r"\(?([A-E])\)?")
_ANOTHER = re.compile(r"\([A-E]\)|(?:\bor|\band|,)\s*\(?[A-E]\b")  # "(C) or (B)", "(C) 5 or B"


def choice_label(answer: str, gold: str) -> str | None:
    """What of an answer that names an option and its value (`\\textbf{(C)}\\ 5`), or the option alone,
    the math verifier compares with `gold`: the letter when the gold is one (`C`, `\\text{(C)}`), else
    the value; None when the answer is not of that form, or names only an option against a gold that is
    not one. Only the first label counts: `(A) 3 (B) 5` leaves the value `3 (B) 5`, which equals no gold."""
    from reasonrl.rewards.verifiers.math import clean_latex

    m = _LABEL.fullmatch(clean_latex(answer))
    if m is None:
        return None
    if _LETTER.fullmatch(clean_latex(gold)):
        # a second option named after the first ("(C) or (B)") leaves the answer to math-verify (wrong)
        return None if m.group(2) and _ANOTHER.search(m.group(2)) else m.group(1)
    return m.group(2).strip() if m.group(2) else None


def unevaluated(answer: str, gold: str, integer: bool, exact: bool) -> bool:
    """Whether `answer` (found equal to the plain-number `gold`) is written as a computation rather than
    as the value. `integer`: the gold is a whole number (a fraction is a computation of it); `exact`: it
    is a whole number or a fraction (not a decimal, which may round an irrational value), so any
    arithmetic, power, function or operator is a computation of it."""
    text = _value_text(answer)
    if text.replace(" ", "") == _value_text(gold).replace(" ", ""):
        return False  # written as the gold is
    fraction = _SIMPLE_FRACTION.fullmatch(text)
    if fraction:
        num, den = (
            int(next(x for x in pair if x is not None))
            for pair in (fraction.group(1, 2, 5), fraction.group(3, 4, 6))
        )
        if den and math.gcd(num, den) != 1:
            return True  # not in lowest terms
    if integer and _FRACTION.search(text):
        return True
    if not exact:
        return False
    if _FUNCTION.search(text) or _DERIVATIVE.search(text) or _FACTORIAL_OR_ABS.search(text):
        return True
    return bool(_BINARY.search(text) or _PRODUCT.search(text) or _POWER.search(text))
