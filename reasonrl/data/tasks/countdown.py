"""Countdown: reach a target from given numbers with + - * /, each number used exactly once.

difficulty d: d+1 numbers (1..d*5+5), so d=1 uses two numbers, d=2 three. The target is the
value of a random expression over all the numbers (a positive integer), so every problem is solvable;
the stored solution is that expression.

Owns: generating the problems and their solutions. Does not own: scoring or parsing model answers
(`rewards.verifiers.procedural.countdown`) or the held-out split (`data.tasks.is_heldout`).
"""

from __future__ import annotations

import random
from fractions import Fraction

from reasonrl.types import Problem

DATA_SOURCE = "reasonrl/countdown"


def _random_expression(rng: random.Random, nums: list[int]) -> tuple[str, Fraction]:
    """Combine numbers pairwise in random order; returns (expression string, exact value)."""
    items = [(str(n), Fraction(n)) for n in nums]
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        (ea, va), (eb, vb) = items[i], items[j]
        op = rng.choice("+-*/")
        if op == "/" and (vb == 0 or (va / vb).denominator != 1):
            op = "+"
        if op == "-" and va < vb:
            (ea, va), (eb, vb) = (eb, vb), (ea, va)
        value = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va / vb if vb else va + vb}[op]
        expr = f"({ea}{op}{eb})"
        items = [it for k, it in enumerate(items) if k not in (i, j)] + [(expr, value)]
    expr, value = items[0]
    return (expr[1:-1] if expr.startswith("(") else expr), value


def generate(n: int, seed: int, difficulty: int = 2) -> list[Problem]:
    if difficulty < 1:
        raise ValueError(f"countdown difficulty must be >= 1, got {difficulty}")
    rng = random.Random(f"countdown-{seed}-{difficulty}")
    out: list[Problem] = []
    i = 0
    while len(out) < n:
        nums = [rng.randint(1, difficulty * 5 + 5) for _ in range(difficulty + 1)]
        expr, value = _random_expression(rng, nums)
        if value.denominator != 1 or value <= 0:
            continue
        target = int(value)
        numbers = " ".join(map(str, nums))
        out.append(
            Problem(
                prompt=[{"role": "user", "content": f"Use {numbers} to make {target}"}],
                ground_truth={"target": target, "numbers": nums},
                data_source=DATA_SOURCE,
                ability="math",
                extra_info={"index": i, "solution": f"<answer>{expr}</answer>", "difficulty": difficulty},
                uid=f"countdown-{difficulty}-{i}",
            )
        )
        i += 1
    return out
