"""The math verifiers' warm-up (`math.warm_up`, run by `rewards.warm_up` once per process): answers in
the shapes models write, each read through the whole verifier, so math-verify's lazily built parser
tables and sympy's lazy imports are ready before the first real call.

Owns: the corpus below. Its inputs are fixed, so the warm-up is bounded (~1.3 s of CPU on a 2-core EPYC, once
per process, in the pool's forkserver). Each shape covers an ANTLR decision path the parser otherwise builds on first use:
numbers, fractions, roots, powers, pi, equations and chains of them, sets, intervals, matrices,
percentages, units, text, and the same inside \\boxed{}, <answer> tags, `####` and free text.
"""

from __future__ import annotations

# (response, gold): responses in the verifiers' extraction modes; golds in the shapes datasets use
CORPUS: tuple[tuple[str, str], ...] = (
    ("The answer is \\boxed{\\frac{3}{4}}.", "\\frac{3}{4}"),
    ("So $x = \\sqrt{2} + 1$, hence \\boxed{1+\\sqrt{2}}", "1 + \\sqrt{2}"),
    ("\\boxed{2\\pi r^2}", "2 \\pi r^{2}"),
    ("\\boxed{x^2 - 4x + 4}", "(x-2)^2"),
    ("\\boxed{(-\\infty, 3]}", "(-\\infty,3]"),
    ("\\boxed{\\{1, 2, 3\\}}", "1, 2, 3"),
    (
        "\\boxed{\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}}",
        "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}",
    ),
    ("\\boxed{25\\%}", "25\\%"),
    ("\\boxed{12 \\text{ cm}}", "12"),
    ("\\boxed{\\text{(B)}}", "B"),
    ("\\boxed{x = 2 \\text{ or } x = -3}", "2, -3"),
    ("\\boxed{y = 2x + 1}", "y=2x+1"),
    ("\\boxed{\\dfrac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
    ("\\boxed{e^{i\\pi}}", "-1"),
    ("\\boxed{\\log_2 8}", "3"),
    ("\\boxed{3.14 \\times 10^{-2}}", "0.0314"),
    ("\\boxed{a_n = 2^n}", "2^n"),
    ("\\boxed{\\sin^2 x + \\cos^2 x}", "1"),
    ("<answer>1+2=3=5</answer>", "3"),
    ("<answer>x=3</answer>", "3"),
    ("<answer>7 <answer>1</answer>", "7"),
    ("<answer>2, 4</answer>", "2,4"),
    ("so 3+4=7\n#### 7", "7"),
    ("#### 1,234", "1234"),
    ("Answer: 5/8", "0.625"),
    ("1+2=3=5 < 1+1=2 9=1", "9"),
    (",,7+2=1+7=17  <answer1+1=7 <answer>", "7"),
    ("Therefore, the final answer is $\\frac{1}{2}$. I hope it is correct.", "0.5"),
    ("We get $2x+3=7$, so $x=2$. The final answer is 2", "2"),
    ("The probability is $\\frac{5}{36}$, or about 0.139.", "\\frac{5}{36}"),
)


def warm_up() -> None:
    """Score every corpus answer (results discarded)."""
    from reasonrl.rewards.verifiers.math import score_math
    from reasonrl.types import Problem

    for response, gold in CORPUS:
        score_math(
            response,
            Problem(prompt=[{"role": "user", "content": "?"}], ground_truth=gold, data_source="math"),
        )
