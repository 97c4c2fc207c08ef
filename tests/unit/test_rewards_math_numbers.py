"""The number readers the math verifier puts into math-verify and latex2sympy (`rewards/verifiers/math_numbers.py`):
the same sympy objects as `sympy.Number`, built without its expression parser."""

from __future__ import annotations

import functools
from unittest import mock

import pytest
from test_rewards_math import P

from reasonrl.rewards import VERIFIERS


def test_the_number_reader_builds_what_sympy_number_builds_and_leaves_the_rest_to_it():
    """math-verify reads each number in free text with `sympy.Number(text)` (sympy's expression parser,
    half of scoring an unmarked answer); the reader put in its place builds plain numbers directly. Each
    must be the very object sympy builds (`srepr`: type, value and a Float's precision), and anything
    else must reach sympy.Number itself (its result, or its error)."""
    import math_verify.parser
    import sympy

    from reasonrl.rewards.verifiers import math as m
    from reasonrl.rewards.verifiers import math_numbers

    m._mv()
    reader = math_verify.parser.Number
    assert isinstance(reader, math_numbers.NumberReader) and reader.original is sympy.Number
    plain = ["0", "7", "42", "1" * 60, "0.5", "5.", "0.", ".5", "12.340", "3.14159265358979323846264338",
             "1" * 40 + ".25", "9" * 999, "-3", "-0", "-0.0", "-.5", "-5.", "-12.340", "-" + "9" * 60,
             "-3.14159265358979323846264338"]  # fmt: skip
    for text in plain:
        assert sympy.srepr(reader(text)) == sympy.srepr(sympy.Number(text)), text
    seen = []
    real = reader.original
    reader.original = lambda *a: seen.append(a[0]) or real(*a)
    try:
        for text in ("1e5", "inf", "+3", "9" * 1001, " 4", "- 3", "--3"):
            assert sympy.srepr(reader(text)) == sympy.srepr(sympy.Number(text)), text
        for text in ("00012", "1\u0663"):  # sympy's own errors, as before: not numbers to it
            with pytest.raises(sympy.SympifyError):
                reader(text)
        reader("42")
        reader("-42")
    finally:
        reader.original = real
    # not "42" or "-42": built directly
    assert seen == ["1e5", "inf", "+3", "9" * 1001, " 4", "- 3", "--3", "00012", "1\u0663"]
    gsm = VERIFIERS.get("gsm8k")  # through math-verify's free-text reading, both ways
    assert gsm("so 3 + 4 = 7, 7 + 5 = 12", P("12", ds="openai/gsm8k")).score == 1.0
    assert gsm("so 3 + 4 = 7, 7 + 5 = 12.5", P("12.5", ds="openai/gsm8k")).score == 1.0
    assert gsm("so 3 + 4 = 7, 7 + 5 = 13", P("12", ds="openai/gsm8k")).score == 0.0
    assert gsm("so 3 - 4 = -1, then -1 - 5 = -6", P("-6", ds="openai/gsm8k")).score == 1.0
    assert gsm("so 3 - 4 = -1, then -1 - 5 = -7", P("-6", ds="openai/gsm8k")).score == 0.0


def test_latex_number_reader_builds_what_latex2sympy_builds_and_leaves_the_rest_to_it():
    """latex2sympy (math-verify's LaTeX reader) reads every number of a LaTeX answer with its
    `parse_number` (commas dropped, a digit string's leading zeros dropped, then `sympy.Number`); the
    method put in its place must build the same objects and hand anything else to the original."""
    import sympy
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    from reasonrl.rewards.verifiers import math as m
    from reasonrl.rewards.verifiers import math_numbers

    m._mv()
    ours = _Latex2Sympy.parse_number
    original = ours.original
    assert original.__qualname__ == "_Latex2Sympy.parse_number" and not hasattr(original, "original")
    texts = ["7", "007", "000", "0", "1,234", "1,234.50", "0.5", ".5", "12.", "3.14159265358979323846264338",
             "9" * 999, "0012.5", "1e5", "2E-3", "9" * 1001]  # fmt: skip
    for text in texts:
        assert sympy.srepr(ours(None, text)) == sympy.srepr(original(None, text)), text
    calls = []
    with mock.patch.object(sympy, "Number", side_effect=lambda t: calls.append(t) or sympy.Integer(1)):
        ours(None, "1,234")
        ours(None, "0.25")
        ours(None, "1e5")
    assert calls == ["1e5"]  # the plain ones were built without sympy.Number
    with math_numbers.published():  # the benchmark's "as published" side gets the original back
        assert _Latex2Sympy.parse_number is original
        assert VERIFIERS.get("math")("\\boxed{\\frac{3}{4}}", P("0.75")).score == 1.0
    assert _Latex2Sympy.parse_number is ours
    # through the whole verifier: LaTeX answers whose numbers the reader built (computations: compared
    # only when unevaluated answers are accepted, `math_form`)
    math = functools.partial(VERIFIERS.get("math"), accept_unevaluated=True)
    assert math("\\boxed{\\frac{1,000}{8}}", P("125")).score == 1.0
    assert math("\\boxed{2.5\\sqrt{4}}", P("5")).score == 1.0
    assert math("\\boxed{2.5\\sqrt{4}}", P("6")).score == 0.0


def test_installing_twice_wraps_once():
    """Every process that scores math installs the readers; a second install must not wrap them again
    (`published` unwraps one layer, so a double wrap would leave the benchmark's side on our reader)."""
    import math_verify.parser
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    from reasonrl.rewards.verifiers import math as m
    from reasonrl.rewards.verifiers import math_numbers

    m._mv()
    reader, latex = math_verify.parser.Number, _Latex2Sympy.parse_number
    math_numbers.install()
    math_numbers.install()
    assert math_verify.parser.Number is reader and _Latex2Sympy.parse_number is latex
    assert not isinstance(reader.original, math_numbers.NumberReader)
    assert not hasattr(latex.original, "original")
