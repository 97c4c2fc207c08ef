"""Plain numbers for math-verify without sympy's expression parser.

math-verify reads each number it finds in free text with `sympy.Number(text)`, and its LaTeX reader
(latex2sympy2_extended) does the same for every number in a LaTeX answer (`parse_number`). Each call
runs sympy's whole expression parser, which first executes `from sympy import *` into a fresh
namespace: ~0.3 ms a number, a third of scoring a typical answer. For a plain decimal number the
result is known: `Integer(int(text))`, or `Float(text)` (the call sympy's parser makes for a
decimal), the same object (type, value and a Float's precision: tested against `sympy.Number` by
`srepr`). Anything else (exponents, other digits than 0-9, leading zeros, signs other than one
leading minus) still goes to the original.

Owns: `install()` (puts both readers in place; idempotent; called when the math verifiers first
import math-verify) and `published()` (takes them out for a while: the benchmark that compares with
math-verify as published). Does not own: when math-verify is called (`verifiers.math`).
"""

from __future__ import annotations

import contextlib
import functools
import re

# a number as math-verify's expression reader and latex2sympy leave it (separators and leading zeros gone)
SYMPY_NUMBER = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)")
MAX_CHARS = 1000  # longer digit strings go to sympy as they are


def plain_number(text):
    """What `sympy.Number(text)` returns for a plain decimal number; None for anything else."""
    if isinstance(text, str) and len(text) <= MAX_CHARS and SYMPY_NUMBER.fullmatch(text):
        import sympy

        return sympy.Float(text) if "." in text else sympy.Integer(int(text))
    return None


class NumberReader:
    """In place of `sympy.Number` in math-verify's parser: plain numbers built directly, the rest
    (and any call with more arguments) handed to `original`."""

    def __init__(self, original):
        self.original = original

    def __call__(self, text, *rest):
        built = None if rest else plain_number(text)
        return built if built is not None else self.original(text, *rest)


def latex_number_reader(original):
    """In place of latex2sympy's `parse_number(self, text)`: the same clean-up (commas dropped, the
    leading zeros of a digit string), then a plain number built directly; the rest to `original`."""

    @functools.wraps(original)
    def parse_number(self, text):
        cleaned = text.replace(",", "")
        if cleaned.isdigit():
            cleaned = cleaned.lstrip("0") or "0"
        built = plain_number(cleaned)
        return built if built is not None else original(self, text)

    parse_number.original = original
    return parse_number


def _latex_class():
    try:
        from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy
    except ImportError:  # another latex2sympy layout: its numbers go through sympy as published
        return None
    return _Latex2Sympy if callable(getattr(_Latex2Sympy, "parse_number", None)) else None


def install() -> None:
    import math_verify.parser

    reader = getattr(math_verify.parser, "Number", None)
    if reader is not None and not isinstance(reader, NumberReader):
        math_verify.parser.Number = NumberReader(reader)
    cls = _latex_class()
    if cls is not None and not hasattr(cls.parse_number, "original"):
        cls.parse_number = latex_number_reader(cls.parse_number)


@contextlib.contextmanager
def published():
    """math-verify and latex2sympy read numbers with `sympy.Number` while inside (not thread-safe:
    for a benchmark's comparison, not for scoring)."""
    import math_verify.parser

    cls = _latex_class()
    reader = math_verify.parser.Number
    latex = cls.parse_number if cls is not None else None
    math_verify.parser.Number = getattr(reader, "original", reader)
    if cls is not None:
        cls.parse_number = getattr(latex, "original", latex)
    try:
        yield
    finally:
        math_verify.parser.Number = reader
        if cls is not None:
            cls.parse_number = latex
