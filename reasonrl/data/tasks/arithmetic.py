"""Multi-step integer arithmetic: evaluate an expression like `7+3*4-5` step by step.

difficulty d: d+1 operands (so d operations). Operands are 1..9 for d <= 2 and 1..19 above.
Operators + - * with the usual precedence (task "arithmetic"); task "addsub" uses + and - only,
a small set of facts that a tiny model can master, which makes it the CPU demo's task. The worked solution reduces one operation per step,
multiplications first, left to right: `3*4=12,7+12=19,19-5=14` then `<answer>14</answer>`.

Owns: generating the problems and their worked solutions. Does not own: scoring
(`rewards.verifiers.procedural.arithmetic`) or the held-out split (`data.tasks.is_heldout`).
"""

from __future__ import annotations

import random

from reasonrl.types import Problem

DATA_SOURCE = "reasonrl/arithmetic"


def solve_steps(nums: list[int], ops: list[str]) -> tuple[list[str], int]:
    """Reduce `nums[0] ops[0] nums[1] ...`, `*` first then left to right; returns (steps, value)."""
    nums, ops, steps = list(nums), list(ops), []
    while ops:
        i = ops.index("*") if "*" in ops else 0
        a, b, op = nums[i], nums[i + 1], ops[i]
        v = a * b if op == "*" else (a + b if op == "+" else a - b)
        steps.append(f"{a}{op}{b}={v}")
        nums[i : i + 2] = [v]
        del ops[i]
    return steps, nums[0]


def make_problem(nums: list[int], ops: list[str], index: int, difficulty: int, tag: str = "arith") -> Problem:
    expr = "".join(f"{n}{o}" for n, o in zip(nums, ops + [""]))
    steps, value = solve_steps(nums, ops)
    solution = ",".join(steps) + f" <answer>{value}</answer>"
    return Problem(
        prompt=[{"role": "user", "content": f"{expr}="}],
        ground_truth=str(value),
        data_source=DATA_SOURCE,
        ability="math",
        extra_info={"index": index, "expression": expr, "solution": solution, "difficulty": difficulty},
        uid=f"{tag}-{difficulty}-{index}",
    )


def generate(n: int, seed: int, difficulty: int = 2, operators: str = "+-*") -> list[Problem]:
    if difficulty < 1:
        raise ValueError(f"arithmetic difficulty must be >= 1, got {difficulty}")
    if not operators or set(operators) - set("+-*"):
        raise ValueError(f"arithmetic operators must be a non-empty subset of '+-*', got {operators!r}")
    tag = "arith" if operators == "+-*" else f"arith[{operators}]"
    rng = random.Random(f"arithmetic-{seed}-{difficulty}" + ("" if operators == "+-*" else operators))
    hi = 9 if difficulty <= 2 else 19
    out = []
    for i in range(n):
        nums = [rng.randint(1, hi) for _ in range(difficulty + 1)]
        ops = [rng.choice(operators) for _ in range(difficulty)]
        out.append(make_problem(nums, ops, i, difficulty, tag))
    return out
