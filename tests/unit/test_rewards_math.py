"""Math verifiers: fast numeric path, math-verify fallback, percent policy, reward-hacking rows."""

from __future__ import annotations

import threading

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers.math import fast_compare, to_number
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(120)


def P(gt, prompt="Solve it.", ds="math__dapo"):
    return Problem(prompt=[{"role": "user", "content": prompt}], ground_truth=gt, data_source=ds)


def score(response, gt, name="math", prompt="Solve it.", **options):
    return VERIFIERS.get(name)(response, P(gt, prompt=prompt), **options)


@pytest.mark.parametrize(
    "text, value, percent",
    [
        ("42", 42, False),
        ("-3.5", -3.5, False),
        ("1,234,567", 1234567, False),
        (r"\$1,000.50", 1000.5, False),
        (r"\frac{3}{4}", 0.75, False),
        (r"-\dfrac{10}{9}", -10 / 9, False),
        (r"\left( \tfrac{1}{2} \right)", 0.5, False),
        ("3/8", 0.375, False),
        (r"28\%", 28, True),
        ("28 percent", 28, True),
        (r"90^\circ", 90, False),
        (r"90^{\circ}", 90, False),
        (r"15 \text{ cm}", 15, False),
        ("12 dollars", 12, False),
        ("x = 7", 7, False),
        ("$5$", 5, False),
        ("1 000", 1000, False),
        ("(5)", 5, False),
        ("(-12)", -12, False),
    ],
)
def test_to_number(text, value, percent):
    got = to_number(text)
    assert got is not None
    assert float(got[0]) == pytest.approx(value, rel=1e-12)
    assert got[1] is percent


@pytest.mark.parametrize(
    "text", ["1,22", "1 2", "2, 3", "x+1", r"\sqrt{2}", "5x", "", "1/0", r"\frac{1}{0}", "1.2.3"]
)
def test_to_number_leaves_ambiguous_to_math_verify(text):
    assert to_number(text) is None


@pytest.mark.parametrize(
    "pred, gold, percent_ok, expected",
    [
        ("42", "42", False, True),
        ("42.0", "42", False, True),
        ("41", "42", False, False),
        ("0.5", r"\frac12", False, None),  # \frac12 (no braces) is math-verify's job
        ("0.5", r"\frac{1}{2}", False, True),
        ("0.28", "28", False, False),  # gold/100 refused
        ("2800", "28", False, False),  # gold*100 refused
        ("0.28", "28", True, True),  # ... unless the problem asks for a percentage
        (r"28\%", "28", False, True),
        (r"28\%", "0.28", False, None),  # value question: left to math-verify
        ("3.0000001", "3", False, False),
        ("3.0000001", "3.0", False, False),
        ("0.3333", r"\frac{1}{3}", False, None),  # rounding of a fraction: math-verify decides
    ],
)
def test_fast_compare(pred, gold, percent_ok, expected):
    assert fast_compare(pred, gold, percent_ok) is expected


@pytest.mark.parametrize(
    "response, gold, expected",
    [
        # plain answers (fast path)
        (r"so \boxed{42}", "42", 1.0),
        (r"\boxed{42}", "43", 0.0),
        (r"\boxed{1,000}", "1000", 1.0),
        (r"\boxed{\dfrac{3}{4}}", "0.75", 1.0),
        ("<answer>17</answer>", "17", 1.0),
        ("Answer: 12", "12", 1.0),
        ("12", "12", 1.0),
        (r"\boxed{90^\circ}", "90", 1.0),
        (r"\boxed{15 \text{ cm}}", "15", 1.0),
        # symbolic (math-verify)
        (r"\boxed{\frac{x+2}{7}}", r"\frac{x}{7}+\frac{2}{7}", 1.0),
        (r"\boxed{[0, 1)}", "[0,1)", 1.0),
        (r"\boxed{(0, 1)}", "[0,1)", 0.0),
        (r"\boxed{\begin{pmatrix}1&2\\3&4\end{pmatrix}}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", 1.0),
        (r"\boxed{\begin{pmatrix}1&2\\3&5\end{pmatrix}}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", 0.0),
        (r"\boxed{\{1,2,3\}}", r"\{3,2,1\}", 1.0),
        (r"\boxed{2\sqrt{3}}", r"\sqrt{12}", 1.0),
        (r"\boxed{y = 2x + 1}", "y=2x+1", 1.0),
        (r"\boxed{\pi}", r"\pi", 1.0),
        (r"\boxed{3.14}", r"\pi", 0.0),
        # percentages
        (r"\boxed{0.28}", "28", 0.0),
        (r"\boxed{28}", r"28\%", 1.0),
        # reward-hacking attempts
        (r"\boxed{1} \boxed{2} \boxed{3}", "2", 0.0),  # hedging with several boxes
        (r"\boxed{5} ... no wait \boxed{2}", "2", 1.0),  # a corrected answer: the last box counts
        (r"\boxed{5} ... no wait \boxed{2}", "5", 0.0),
        (r"\boxed{2} and again \boxed{2}", "2", 1.0),  # the same answer twice is one answer
        (r"\boxed{1 \text{ or } 2 \text{ or } 3}", "2", 0.0),
        (r"\boxed{1, 2, 3}", "2", 0.0),
        (r"\boxed{\pm 3}", "3", 0.0),
        (r"<think>the answer is \boxed{7}</think> I am not sure.", "7", 0.0),  # answer in think only
        (r"<think>\boxed{7}", "7", 0.0),  # unclosed think
        (r"<think>\boxed{6}</think> \boxed{7}", "7", 1.0),
        (r"\boxed{}", "7", 0.0),
        ("", "7", 0.0),
        (r"\boxed{x}", "7", 0.0),
        (r"\boxed{7=8}", "7", 0.0),
        ("The answer is 3 or 7", "7", 0.0),  # unboxed hedges
        ("It is either $3$ or $7$.", "7", 0.0),
        ("Answer: 7, 8", "7", 0.0),
        ("<answer>7 or 8</answer>", "7", 0.0),
        ("The answer is 7.", "7", 1.0),
        ("1 2 3 4 5 6 7 8 9 " * 3000, "7", 0.0),  # huge string of numbers
        (r"\boxed{" + "9" * 5000 + "}", "9", 0.0),
    ],
)
def test_math_verifier(response, gold, expected):
    assert score(response, gold).score == expected


def test_percent_accepted_when_problem_asks_for_percent():
    assert score(r"\boxed{0.28}", "28", prompt="What percent of the class passed?").score == 1.0
    assert score(r"\boxed{28}", "0.28", prompt="What percent of the class passed?").score == 1.0  # either way
    assert score(r"\boxed{2.8}", "0.28", prompt="What percent of the class passed?").score == 0.0
    assert score(r"\boxed{0.28}", "28", prompt="How many apples?").score == 0.0


def test_info_records_path_and_extraction():
    assert score("4.0", "4").info == {
        "extracted": "4.0",
        "reason": "correct",
        "path": "fast",
    }  # a bare number
    assert score("  -4 ", "4").info == {"extracted": "-4", "reason": "wrong", "path": "fast"}
    fast = score(r"\boxed{42}", "42")
    assert fast.info["path"] == "fast" and fast.extracted == "42" and fast.reason == "correct"
    sym = score(r"\boxed{\frac{x}{2}}", "x/2")
    assert sym.info["path"] == "symbolic" and sym.reason == "correct"
    none = score("<think>no end", "1")
    assert none.reason == "no_answer" and none.extracted is None


def test_ground_truth_forms():
    assert score(r"\boxed{5}", ["5"]).score == 1.0  # a one-item list (verl style)
    assert score(r"\boxed{5}", 5).score == 1.0  # a number
    assert score(r"\boxed{\frac{1}{2}}", "$\\frac{1}{2}$").score == 1.0


def test_gsm8k_prefers_hash_marker():
    gsm = VERIFIERS.get("gsm8k")
    p = P("72", ds="openai/gsm8k")
    assert gsm("She has 48 + 24 = 72 clips.\n#### 72", p).score == 1.0
    assert gsm("#### 70\nAnswer: 72", p).score == 0.0
    assert gsm("#### 1,000", P("1000")).score == 1.0


def test_options_are_checked_against_signature():
    VERIFIERS.check_kwargs("math", ["float_rounding", "allow_set_relation_comp"])
    with pytest.raises(KeyError, match="float_roundin"):
        VERIFIERS.check_kwargs("math", ["float_roundin"])
    assert score(r"\boxed{0.3333}", r"\frac{1}{3}", float_rounding=4).score == 1.0
    assert score(r"\boxed{0.3333}", r"\frac{1}{3}").score == 0.0


def test_symbolic_path_works_off_the_main_thread():
    out = {}

    def run():
        out["r"] = score(r"\boxed{\sqrt{8}}", r"2\sqrt{2}")

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert out["r"].score == 1.0 and out["r"].info["path"] == "symbolic"
    from reasonrl.rewards.verifiers.math import _timeout

    assert _timeout() == 5  # math-verify's own SIGALRM limit, on the main thread only


# scientific notation (Minerva's and the STEM sets' golds): one number however it is written, never
# Euler's e; unequal mantissas or exponents are wrong
@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        (r"\boxed{2.5\times 10^{-7}}", "2.5e-7", 1.0),
        (r"\boxed{0.00000025}", "2.5e-7", 1.0),
        (r"\boxed{2.5 \cdot 10^{-7}\text{ m}}", "2.5e-7", 1.0),
        (r"\boxed{2.5E-7}", r"2.5 \times 10^{-7}", 1.0),
        (r"\boxed{130000}", "1.3e5", 1.0),
        (r"\boxed{7.2\times10^9}", "7.2e9", 1.0),
        (r"\boxed{2.5\times 10^{-6}}", "2.5e-7", 0.0),
        (r"\boxed{2.4e-7}", "2.5e-7", 0.0),
        (r"\boxed{2.5}", "2.5e-7", 0.0),
        (r"\boxed{2.5*e-7}", "2.5e-7", 0.0),  # 2.5e - 7 with Euler's e: not the gold's number
        (r"\boxed{2.5e-7} \boxed{2.5e-6}", "2.5e-7", 0.0),  # a hedge
        # symbolic path: a scientific gold is 2.5 x 10^-7 for math-verify too, not 2.5e - 7
        (r"\boxed{\frac{5}{2} \times 10^{-7}}", "2.5e-7", 1.0),
        (r"\boxed{\frac{5}{2} \times 10^{-7}}", r"2.5 \times 10^{-7}", 1.0),  # a LaTeX gold is kept as it is
        (r"\boxed{2.5 \cdot e - 7}", "2.5e-7", 0.0),
    ],
)
def test_scientific_notation_is_one_number(pred, gold, expected):
    assert score(pred, gold).score == expected


def test_scientific_notation_values_and_exponent_bound():
    assert to_number("2.5e-7")[0] * 10**8 == 25 and to_number("2.5e-7")[2]  # exact, a plain literal
    assert to_number(r"-4.5 \times 10^{3}")[0] == -4500
    assert to_number("1e400")[0] == 10**400  # MAX_EXPONENT, at the edge
    assert to_number("1e401") is None  # not a plain answer: left to math-verify
    assert fast_compare("1e90", "1" + "0" * 90, False) is True


def test_a_plain_number_has_at_most_a_hundred_digits_and_longer_ones_still_compare():
    from reasonrl.rewards.verifiers.math import MAX_NUMBER_CHARS

    assert MAX_NUMBER_CHARS == 100
    assert to_number("7" * 100)[0] == int("7" * 100)
    assert to_number("7" * 101) is None  # left to math-verify
    for digits in (100, 101):
        assert score(r"\boxed{" + "7" * digits + "}", "7" * digits).info["path"] == (
            "fast" if digits == 100 else "symbolic"
        )
        assert score(r"\boxed{" + "7" * digits + "}", "7" * digits).score == 1.0
        assert score(r"\boxed{" + "7" * (digits - 1) + "8}", "7" * digits).score == 0.0


def test_math_verify_sees_only_the_trailing_window_of_a_long_response():
    """A power tower far up a long reasoning trace does not zero a correct final answer (math-verify
    never sees it); the same tower inside the window it reads does."""
    from reasonrl.rewards.verifiers.math import MAX_SYMBOLIC_CHARS

    assert MAX_SYMBOLIC_CHARS == 8000
    tail = " and so on." * 50 + r" Hence the answer is $\boxed{\sqrt{2}}$."
    far = r"Consider $9^{9^{9}}$." + " filler" * (MAX_SYMBOLIC_CHARS // 7) + tail
    near = " filler" * (MAX_SYMBOLIC_CHARS // 7) + r"Consider $9^{9^{9}}$." + tail
    assert score(far, r"\sqrt{2}").score == 1.0
    assert score(near, r"\sqrt{2}").info["reason"] == "too_complex"


def test_a_rows_tolerance_accepts_numbers_within_it_and_nothing_else():
    def tol_score(response, tolerance):
        p = P("9.81")
        p.extra_info["tolerance"] = tolerance
        return VERIFIERS.get("math")(response, p).score

    assert tol_score(r"\boxed{9.8}", 0.05) == 1.0
    assert tol_score(r"\boxed{9.8}", 0.01) == 1.0  # OlympiadBench's judge: |a - b| <= tol * 1.01
    assert tol_score(r"\boxed{9.79985}", 0.01) == 0.0  # |a - b| = 0.01015: past the 1% slack
    assert tol_score(r"\boxed{10.315}", 0.5) == 1.0  # |a - b| = 0.505 = 0.5 x 1.01 exactly: inside
    assert tol_score(r"\boxed{9.7}", 0.05) == 0.0
    assert tol_score(r"\boxed{9.8}", 0) == 0.0
    for bad in (float("inf"), float("nan"), "lots", -1):  # a broken tolerance is no tolerance
        assert tol_score(r"\boxed{9.8}", bad) == 0.0
        assert tol_score(r"\boxed{9.81}", bad) == 1.0
    assert tol_score(r"\boxed{9.8} \boxed{9.9}", 0.05) == 0.0  # a hedge stays a hedge


def test_a_tolerance_over_a_list_of_answers_pairs_them_and_refuses_extra_ones():
    def tol_score(response, gold):
        p = P(gold)
        p.extra_info["tolerance"] = 0.05
        return VERIFIERS.get("math")(response, p).score

    assert tol_score(r"\boxed{-1, 3.04}", "3, -1") == 1.0  # any order, each within the tolerance
    assert tol_score(r"\boxed{-1, 3.0505}", "3, -1") == 1.0  # |a - b| <= 0.05 * 1.01, at the edge
    assert tol_score(r"\boxed{-1, 3.0506}", "3, -1") == 0.0  # just past the 1% slack
    assert tol_score(r"\boxed{-1, 3.06}", "3, -1") == 0.0
    assert tol_score(r"\boxed{1.04, 2}", "1, 2") == 1.0
    # adversarial: an extra answer is a hedge, a missing one is wrong
    assert tol_score(r"\boxed{-1, 3.04, 7}", "3, -1") == 0.0
    assert tol_score(r"\boxed{1.04, 2, 3}", "1, 2") == 0.0
    assert tol_score(r"\boxed{3.04}", "3, -1") == 0.0
    assert tol_score(r"\boxed{-1, x}", "3, -1") == 0.0  # not a list of numbers: math-verify decides
    assert tol_score(r"\boxed{\sqrt{9}, -1}", "3, -1") == 1.0  # ... and may find it right
    p = P("3, -1")
    p.extra_info["tolerance"] = 0.05
    assert VERIFIERS.get("math")(r"\boxed{-1, 3, 7}", p).info["path"] == "fast"  # a count mismatch is certain
    # one number with commas in it is not a list, on either side (it was: a gold 7,425,000 was [7, 425, 0],
    # so the right 7425000 scored 0 and "7, 425, 0" scored 1)
    assert tol_score(r"\boxed{7425000}", "7,425,000") == 1.0
    assert tol_score(r"\boxed{7425000.04}", "7,425,000") == 1.0  # within the tolerance
    assert tol_score(r"\boxed{7,425,000}", "7,425,000") == 1.0
    assert tol_score(r"\boxed{7, 425, 0}", "7,425,000") == 0.0
    assert tol_score(r"\boxed{1, 0}", "1,000") == 0.0
    assert tol_score(r"\boxed{1,000}", "1, 0") == 0.0  # a thousand is not the answers 1 and 0
    assert tol_score(r"\boxed{1.22}", "1,22") == 1.0  # math-verify's decimal comma: one number
    assert tol_score(r"\boxed{1, 22}", "1,22") == 0.0
    # a tolerance exact in binary (0.5): |a - b| = 0.5 x 1.01 is inside, one step past is not
    half = P("3, -1")
    half.extra_info["tolerance"] = 0.5
    edge = [VERIFIERS.get("math")(f"\\boxed{{-1, {x}}}", half).score for x in ("3.505", "3.5051")]
    assert edge == [1.0, 0.0]


def test_a_gold_math_verify_cannot_read_is_an_error_not_a_wrong_answer():
    from reasonrl.rewards.verifiers.math import symbolic_compare

    with pytest.raises(ValueError, match="cannot parse the ground truth"):
        symbolic_compare(r"\boxed{1}", r"\boxed{}")
    assert score(r"\boxed{x+1}", r"\boxed{}").info["reason"].startswith("error: math-verify cannot parse")
    assert score("just words", r"\boxed{}").info == {"extracted": None, "reason": "error: math-verify cannot "
                                                      "parse the ground truth '\\\\boxed{}'"}  # fmt: skip
    assert symbolic_compare("no math here", r"\sqrt{2}") == (False, None)


def test_clean_latex_strips_every_math_delimiter():
    from reasonrl.rewards.verifiers.math import clean_latex

    assert [clean_latex(s) for s in (r"\(3\)", r"\[x+1\]", "$$5$$", "$7$", "$")] == ["3", "x+1", "5", "7", ""]
    # presentation dropped, one space between tokens, a final period gone
    assert clean_latex(r"\displaystyle \left( 3 \right)") == "( 3 )"
    assert clean_latex(r"1\,000\quad\text{ cm}.") == "1 000 cm"
    assert clean_latex(r"90^{\circ}\$") == "90"
    assert to_number(r"\(\frac{1}{2}\)")[0] * 2 == 1


def test_an_integer_gold_is_read_as_math_verify_reads_it_without_its_parser(monkeypatch):
    """Plain integer golds skip math-verify's parse (sympy's string parser: ~0.6 ms each, a third of
    scoring an n=1 benchmark on free-text answers); what they get is what mv.parse returns, element by
    element and type by type, and every other gold still goes through it."""
    import random

    import math_verify

    from reasonrl.rewards.verifiers import math as m

    random.seed(0)
    golds = [str(v) for v in [*range(-30, 120), *(random.randint(-(10**30), 10**30) for _ in range(200))]]
    m._parse_gold.cache_clear()
    ours = [m._parse_gold(g) for g in golds]
    theirs = [math_verify.parse(g, parsing_timeout=None) for g in golds]
    assert [[(type(x), x) for x in o] for o in ours] == [[(type(x), x) for x in t] for t in theirs]
    m._parse_gold.cache_clear()
    calls = []
    real = math_verify.parse
    monkeypatch.setattr(math_verify, "parse", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    for g in ("42", "-7", "0", "007", "+3", "1,234", "4.5", " 42", "\\frac{1}{2}"):
        m._parse_gold(g)
    assert not {"42", "-7", "0"} & set(calls)  # canonical integers: not parsed
    assert {"007", "1,234", "4.5", " 42"} <= set(calls) and len(calls) >= 6  # the rest: parsed
    gsm = VERIFIERS.get("gsm8k")  # free text: the symbolic path, against the integer gold
    assert gsm("40 and 2 make 42 in the end, I think", P("42", ds="openai/gsm8k")).info["path"] == "symbolic"
    assert gsm("40 and 2 make 42 in the end, I think", P("42", ds="openai/gsm8k")).score == 1.0
    assert gsm("40 and 1 make 41 in the end, I think", P("42", ds="openai/gsm8k")).score == 0.0
    m._parse_gold.cache_clear()


def test_two_integers_are_compared_as_math_verify_compares_them():
    """Free-text answers to integer golds parse to sympy Integers on both sides; their comparison skips
    math-verify's `verify` (a timeout and `simplify` per pair) and must answer what it answers, pair by
    pair, signs, zero, one and huge values included; anything else still goes to `verify`."""
    import random

    import math_verify
    import sympy

    from reasonrl.rewards.verifiers import math as m

    random.seed(1)
    values = [
        0,
        1,
        -1,
        2,
        7,
        42,
        -42,
        10**20,
        10**20 + 1,
        *(random.randint(-(10**9), 10**9) for _ in range(40)),
    ]
    texts = [str(v) for v in values] + ["+7", "007", " 42", "42 "]
    pairs = [(a, b) for a in texts for b in random.sample(texts, 12)] + [(t, t) for t in texts]
    compared = agreed = 0
    for gold, pred in pairs:
        g, p = math_verify.parse(gold, parsing_timeout=None), math_verify.parse(pred, parsing_timeout=None)
        if g and p and isinstance(g[0], sympy.Integer) and isinstance(p[0], sympy.Integer):  # ("+7": none)
            assert m._integers_verify(g, p) == math_verify.verify(g, p), (gold, pred)
            compared, agreed = compared + 1, agreed + math_verify.verify(g, p)
    assert compared > 500 and 40 < agreed < compared  # both answers seen many times
    assert m._integers_verify([sympy.Integer(1), "1"], [sympy.Rational(1, 2), "1/2"]) is None
    assert m._integers_verify([sympy.Integer(5), "5"], [sympy.Float(5.0), "5.0"]) is None
    assert m._integers_verify(["x"], ["x"]) is None  # strings alone: math-verify's own comparison
    calls = []
    real = math_verify.verify
    try:
        math_verify.verify = lambda *a, **k: calls.append(a) or real(*a, **k)
        assert m.symbolic_compare("so 3 + 4 = 7, 7 + 5 = 12", "12") == (True, "12")
        assert m.symbolic_compare("so 3 + 4 = 7, 7 + 5 = 13", "12") == (False, "13")
        assert not calls  # decided here
        assert m.symbolic_compare("so it is 0.5 in the end", "1/2")[0] is True
        assert len(calls) == 1  # a fraction: math-verify's
    finally:
        math_verify.verify = real


def test_the_warm_up_corpus_reads_as_written_through_the_symbolic_path():
    """The warm-up (run once per process in the verifier pool's forkserver, where its failures are
    ignored) must really exercise math-verify: every answer in it is scored without error, most of them
    through the symbolic path, and the ones written as equal to their gold score 1."""
    from reasonrl.rewards.verifiers.math import score_math
    from reasonrl.rewards.verifiers.math_warm_up import CORPUS

    results = [score_math(r, P(g)) for r, g in CORPUS]
    assert not [r.info for r in results if r.info["reason"].startswith("error")]
    assert sum(r.info.get("path") == "symbolic" for r in results) >= 20
    assert sum(r.score for r in results) >= 22
