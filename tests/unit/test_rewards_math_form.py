"""A right answer written as a computation of a plain-number gold scores 0 ("unevaluated",
`rewards/verifiers/math_form.py`): copying a "Compute ..." question into a box must not score. And an
AMC-style answer that names the option and its value is read by the part the gold states."""

from __future__ import annotations

import pytest
from test_rewards_math import P

from reasonrl.rewards.verifiers.math import gsm8k, math, to_number
from reasonrl.rewards.verifiers.math_form import unevaluated


@pytest.mark.parametrize(
    "question, copied, gold",
    [
        ("Compute $123 \\times 456$.", "123 \\times 456", "56088"),
        ("Compute $\\dbinom{8}{4}$.", "\\dbinom{8}{4}", "70"),
        ("Evaluate $\\int_0^1 8x\\,dx$.", "\\int_0^1 8x\\,dx", "4"),
        ("What is $\\sum_{i=1}^{4} i$?", "\\sum_{i=1}^{4} i", "10"),
        ("Compute $\\lim_{n\\to\\infty} \\frac{4n}{n+1}$.", "\\lim_{n\\to\\infty} \\frac{4n}{n+1}", "4"),
        ("What is $2^{10}$?", "2^{10}", "1024"),
        ("Find $5!$.", "5!", "120"),
        ("Find $|-7|$.", "|-7|", "7"),
        ("Evaluate $\\left\\lfloor 4.5 \\right\\rfloor$.", "\\left\\lfloor 4.5 \\right\\rfloor", "4"),
        ("Evaluate $\\log_2 8$.", "\\log_2 8", "3"),
        ("Evaluate $\\sqrt{49}$.", "\\sqrt{49}", "7"),
        ("What is $e^{0}$?", "e^{0}", "1"),
        ("What is $2 \\cdot 3$?", "2 \\cdot 3", "6"),
        ("Compute $\\frac{1}{2} + \\frac{1}{4}$.", "\\frac{1}{2} + \\frac{1}{4}", "\\frac{3}{4}"),
        ("What is 8 divided by 2?", "\\frac{8}{2}", "4"),  # a fraction for a whole number (fast path)
        ("What is 8 divided by 2?", "8/2", "4"),
        ("Simplify $\\frac{84}{144}$.", "\\frac{84}{144}", "\\frac{7}{12}"),  # not in lowest terms
        ("Compute $\\frac{d}{dx}(5x)$.", "\\frac{d}{dx}(5x)", "5"),
    ],
)
def test_copying_the_computation_asked_for_scores_zero(question, copied, gold):
    problem = P(gold, prompt=question)
    assert copied.replace("\\,", "") in question.replace("\\,", "") or copied in ("\\frac{8}{2}", "8/2")
    copy = math(f"The answer is $\\boxed{{{copied}}}$.", problem)
    assert (copy.score, copy.info["reason"]) == (0.0, "unevaluated")
    # math-verify's own reading (the option) finds it equal: the hole the rule closes
    assert math(f"\\boxed{{{copied}}}", problem, accept_unevaluated=True).score == 1.0
    # and the value itself, in any of the usual forms, is right
    assert math(f"The answer is $\\boxed{{{gold}}}$.", problem).score == 1.0


@pytest.mark.parametrize(
    "response, gold",
    [
        ("\\boxed{2+2=4}", "4"),  # the value after the last "="
        ("\\boxed{x = -4}", "-4"),
        ("\\boxed{4\\text{ apples}}", "4"),  # words and units are not computations
        ("\\boxed{4 \\text{ cm}^2}", "4"),
        ("\\boxed{90^\\circ}", "90"),
        ("\\boxed{2.5 \\times 10^{3}}", "2500"),  # scientific notation is a number
        ("\\boxed{1,000}", "1000"),
        ("\\boxed{4.0}", "4"),
        ("\\boxed{\\frac{3}{4}}", "0.75"),
        ("\\boxed{\\frac12}", "0.5"),
        ("\\boxed{0.75}", "\\frac{3}{4}"),
        ("\\boxed{\\sqrt{17}}", "4.123105625617661"),  # a decimal gold may round an irrational value
        ("\\boxed{1 + \\sqrt{2}}", "2.414213562"),
        ("\\boxed{\\sqrt{12}}", "2\\sqrt{3}"),  # a gold that is no plain number: any equal form
        ("\\boxed{\\frac{x+2}{7}}", "\\frac{x}{7}+\\frac{2}{7}"),
        ("\\boxed{5\\%}", "5"),
    ],
)
def test_values_are_right_in_their_usual_forms(response, gold):
    got = math(response, P(gold))
    assert (got.score, got.info["reason"]) == (1.0, "correct")


def test_every_extraction_path_applies_it():
    assert gsm8k("so\n#### 2+2", P("4")).info["reason"] == "unevaluated"
    assert gsm8k("so\n#### 4", P("4")).score == 1.0
    assert gsm8k("so\n#### 2+2", P("4"), accept_unevaluated=True).score == 1.0
    assert math("<answer>3 \\times 5</answer>", P("15")).info["reason"] == "unevaluated"
    assert math("The answer is $3 \\times 5$.", P("15")).info["reason"] == "unevaluated"  # free text
    assert math("The answer is $15$.", P("15")).score == 1.0
    assert math("So the answer is $\\dfrac{38}{26}$.", P("\\frac{19}{13}")).info["reason"] == "unevaluated"
    assert math("So the answer is $\\dfrac{19}{13}$.", P("\\frac{19}{13}")).score == 1.0
    # a wrong computation stays wrong (not "unevaluated")
    assert math("\\boxed{3 \\times 6}", P("15")).info["reason"] == "wrong"


def _computed(text: str, gold: str) -> bool:
    """`unevaluated` as the verifier calls it for `gold`."""
    value, _, literal = to_number(gold)
    integer = literal and value.denominator == 1
    return unevaluated(text, gold, integer, exact=integer or not literal)


@pytest.mark.parametrize(
    "text, gold, expected",
    [
        ("3 + 4", "7", True),
        ("3 - 4", "-1", True),
        ("-4", "-4", False),  # a sign, not a subtraction
        ("x = -4", "-4", False),
        ("2+2=4", "4", False),
        ("4 = 2+2", "4", True),
        ("(3)(4)", "12", True),
        ("3(4)", "12", True),
        ("(4)", "4", False),
        ("2^{3}", "8", True),
        ("10^{3}", "1000", True),
        ("2.5 \\times 10^{3}", "2500", False),  # scientific notation is a number
        ("2.5 \\cdot 10^{-3}", "\\frac{1}{400}", False),
        ("x^{2}", "4", False),  # a variable's power: no plain-number gold has such an answer right
        ("\\sqrt{4}", "2", True),
        ("\\sqrt{4}", "\\frac{2}{1}", True),  # an exact fraction gold: computations count
        ("\\sqrt{17}", "4.1231056", False),  # a decimal gold may round an irrational value
        ("1 + \\sqrt{2}", "2.4142136", False),
        ("\\binom{4}{2}", "6", True),
        ("\\frac{3}{4}", "0.75", False),
        ("\\frac{3}{4}", "\\frac{3}{4}", False),
        ("\\frac{6}{8}", "\\frac{3}{4}", True),  # not in lowest terms
        ("\\frac{6}{8}", "0.75", True),
        ("-\\frac{84}{144}", "-\\frac{7}{12}", True),
        ("\\frac84", "2", True),
        ("6/8", "0.75", True),
        ("\\frac{6}{8}", "\\frac{6}{8}", False),  # written as the gold is
        ("$\\dfrac{6}{8}$", "0.75", True),  # inside math delimiters (free text's extraction keeps them)
        ("\\(2+2\\)", "4", True),
        ("\\$5", "5", False),  # a currency sign
        ("\\frac{8}{4}", "2", True),  # a fraction for a whole number
        ("8/4", "2", True),
        ("\\frac{7}{1}", "7", True),
        ("4!", "24", True),
        ("4\\!000", "4000", False),  # LaTeX's negative space, not a factorial
        ("|4|", "4", True),
        ("4 \\text{ m}^{2}", "4", False),
        ("90^{\\circ}", "90", False),
        ("4 \\approx 2+2", "4", True),
        ("2+2 \\approx 4", "4", False),
    ],
)
def test_what_counts_as_a_computation(text, gold, expected):
    assert _computed(text, gold) is expected


@pytest.mark.parametrize(
    "boxed, gold, score",
    [
        # AoPS's way of writing an AMC answer: math-verify reads c*5 and fails it against 5 and against C
        ("\\textbf{(C)}\\ 5", "5", 1.0),
        ("\\textbf{(C) }5", "5", 1.0),
        ("\\text{(C)} 5", "5", 1.0),
        ("(C) 5", "5", 1.0),
        ("(C)5", "5", 1.0),
        ("\\textbf{(B)}\\ 2\\sqrt{3}", "2\\sqrt{3}", 1.0),  # the symbolic path
        ("\\textbf{(E) } \\frac{3}{4}", "\\frac{3}{4}", 1.0),
        ("\\textbf{(C)}\\ 5", "C", 1.0),  # a letter gold: the letter counts
        ("\\textbf{(C)}\\ 5", "\\text{(C)}", 1.0),
        ("(C) 7", "C", 1.0),  # the value of option C cannot be checked without the options
        ("\\textbf{(B)}\\ 5", "C", 0.0),
        ("\\textbf{(C)}\\ 6", "5", 0.0),
        ("(D) 2+6", "8", 0.0),  # the value is still checked for a computation
        ("(A) 3 (B) 5", "5", 0.0),  # listing the options: only the first label is read
        ("(A) 3 (B) 5", "B", 0.0),
        ("\\textbf{(B) or (C)}", "C", 0.0),
        ("(A) \\cup (B)", "A", 0.0),  # an operation on "(A)", not a label
        ("(C) or (B)", "C", 0.0),  # a second option named: no letter is read
        ("\\textbf{(C)} or \\textbf{(B)}", "C", 0.0),
        ("(C) 5 or B", "C", 0.0),
        ("(C), (D)", "C", 0.0),
    ],
)
def test_an_option_and_its_value_are_read_by_what_the_gold_states(boxed, gold, score):
    assert math(f"So the answer is $\\boxed{{{boxed}}}$.", P(gold)).score == score


@pytest.mark.parametrize(
    "response, gold, score",
    [
        ("Putting it together, the answer is $\\textbf{(C) }115$.", "C", 1.0),
        ("Putting it together, the answer is $\\textbf{(C) }115$.", "115", 1.0),
        ("Putting it together, the answer is $(B) 115$.", "C", 0.0),
        ("Checking once more.\n\nFinal answer: \\textbf{(A)}\\ 261", "A", 1.0),
        ("Checking once more.\n\nFinal answer: \\textbf{(B)}", "B", 1.0),  # the option alone
        ("Checking once more.\n\nFinal answer: \\textbf{(B)}", "5", 0.0),
        ("Final answer: \\textbf{(C)} or \\textbf{(D)}", "C", 0.0),
    ],
)
def test_unboxed_answers_name_their_option_too(response, gold, score):
    assert math(response, P(gold)).score == score


def test_two_labelled_answers_are_still_two_answers():
    assert math("\\boxed{(A) 5} or \\boxed{(B) 6}", P("5")).score == 0.0
    assert math("\\boxed{(A) 5} or \\boxed{(B) 6}", P("A")).score == 0.0
    assert math("<answer>(C) 5</answer>", P("5")).score == 1.0  # a tag's answer too
