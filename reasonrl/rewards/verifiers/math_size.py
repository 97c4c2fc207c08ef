"""Answers too big for sympy: an exponent tower three levels deep or a numeric power with more digits
than MAX_POWER_DIGITS (`9^{9^{9}}`, `9^{99999999}`) would make it compute for minutes, so the math
verifier scores them 0 ("too_complex") before math-verify sees them. Owns: `exponent_depth`,
`too_complex`. Does not own: the comparison itself (`rewards.verifiers.math`).
"""

from __future__ import annotations

import math
import re

_EXPONENT_CHAIN = re.compile(r"(?:\^\s*\(?\s*[\w.]+\s*\)?\s*){3,}|(?:\*\*\s*[\w.]+\s*){3,}")
MAX_EXPONENT_DEPTH = 2


def exponent_depth(s: str) -> int:
    """Deepest nesting of exponents in LaTeX / Python notation (`9^{9^{9}}` is 3)."""
    deepest, stack, pending = 0, [], False
    for ch in s:
        if ch == "^":
            pending = True
            deepest = max(deepest, sum(stack) + 1)
        elif ch == "{":
            stack.append(1 if pending else 0)
            pending = False
        elif ch == "}":
            if stack:
                stack.pop()
        elif not ch.isspace():
            pending = False
    if _EXPONENT_CHAIN.search(s):
        deepest = max(deepest, 3)
    return deepest


_NUM = r"\s*\{?\s*\(?\s*(\d+(?:\.\d+)?)"
_NUMERIC_POWER = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\^|\*\*)" + _NUM + r"(?:\s*(?:\^|\*\*)" + _NUM + ")?")
MAX_POWER_DIGITS = 10_000  # a literal power with more digits than this is not a plain answer


def too_complex(s: str) -> bool:
    """An answer that would make sympy compute for minutes: an exponent tower three levels deep, or a
    numeric power with more than MAX_POWER_DIGITS digits (`9^{99999999}`, `9^{9^{9}}`)."""
    if exponent_depth(s) > MAX_EXPONENT_DEPTH:
        return True
    for m in _NUMERIC_POWER.finditer(s):
        base, exp = float(m.group(1)), float(m.group(2))
        if m.group(3) is not None:  # base^(exp^inner)
            inner = float(m.group(3))
            if exp > 1 and inner * math.log10(exp) > 6:
                return base > 1
            exp = exp**inner
        if base > 1 and exp * math.log10(base) > MAX_POWER_DIGITS:
            return True
    return False
