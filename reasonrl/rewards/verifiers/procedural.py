"""Verifiers for the built-in procedural tasks: integer arithmetic and countdown.

Owns: `arithmetic` (integer answer in `<answer>` tags) and `countdown` (an expression that uses each
given number exactly once and evaluates to the target). Countdown expressions are parsed with `ast`
and evaluated by walking a whitelist of nodes (integers, + - * /, parentheses, unary minus) with
exact fractions; anything else (names, calls, attributes, `**`) is rejected. Never `eval`.
Both require the response to end with its answer block (`final_answer`).
Does not own: generating the problems (`data.tasks`) or answer-tag extraction (`rewards.extract`).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from fractions import Fraction

from reasonrl.rewards.base import VERIFIERS, RewardResult, checks_ground_truth, result
from reasonrl.rewards.extract import answer_region, final_answer_tag
from reasonrl.rewards.ground_truth import decoded, plain
from reasonrl.types import Problem

MAX_EXPR_CHARS = 200
MAX_INT_DIGITS = 12


def final_answer(response: str) -> tuple[str | None, str | None]:
    """(content of the answer block, failure reason). The response must END with its answer block:
    text after the final `</answer>` (a second answer, trailing junk) makes it invalid, so a policy
    cannot hedge or drift after answering. Whitespace after the block is fine."""
    ans, rest = final_answer_tag(answer_region(response))
    if ans is None:
        return None, "no_answer"
    if rest.strip():
        return None, "text_after_answer"
    return ans, None


def _integer(x: object) -> int | None:
    """`x` as an integer if it is one (an int, or a text of one; not a bool or a float), else None."""
    x = plain(x)  # numpy scalars from parquet
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if isinstance(x, str) and re.fullmatch(r"\s*[+-]?\d+\s*", x):
        return int(x)
    return None


def _gold_integer(problem: Problem) -> int:
    gold = _integer(problem.ground_truth)
    if gold is None:
        raise ValueError(f"arithmetic: ground truth {problem.ground_truth!r} is not an integer")
    return gold


def answer_integer(ans: str | None) -> int | None:
    """The integer an answer block holds (spaces ignored), or None (no block, or not an integer)."""
    try:
        return int(ans.strip().replace(" ", "")) if ans is not None else None
    except ValueError:
        return None


@VERIFIERS.register("arithmetic")
def arithmetic(response: str, problem: Problem) -> RewardResult:
    """1 if the response ends with an `<answer>` holding exactly the integer ground truth."""
    ans, why = final_answer(response)
    if ans is None:
        return result(False, None, reason=why)
    value = answer_integer(ans)
    if value is None:
        return result(False, ans, reason="not_an_integer")
    return result(value == _gold_integer(problem), ans)


class UnsafeExpression(ValueError):
    """The expression contains something other than integers, + - * / and parentheses."""


def parse_expression(expr: str) -> tuple[Fraction, list[int]]:
    """Exact value of an arithmetic expression and the integer literals it uses, in order."""
    if len(expr) > MAX_EXPR_CHARS:
        raise UnsafeExpression(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError) as e:  # ValueError: a lone surrogate cannot be encoded
        raise UnsafeExpression(f"not an expression: {getattr(e, 'msg', e)}") from None
    used: list[int] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            if len(str(node.value)) > MAX_INT_DIGITS:
                raise UnsafeExpression("integer literal too large")
            used.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            return a / b  # Fraction: ZeroDivisionError on 0
        raise UnsafeExpression(f"disallowed element {type(node).__name__}")

    value = walk(tree)
    return value, used


def _target_and_numbers(problem: Problem) -> tuple[int, list[int]]:
    gt = decoded(problem.ground_truth)
    target = _integer(gt.get("target")) if isinstance(gt, dict) else None
    numbers = gt.get("numbers") if isinstance(gt, dict) else None
    values = [_integer(x) for x in numbers] if isinstance(numbers, list) else []
    if target is None or not values or None in values:
        raise ValueError(
            f"countdown: ground truth must be {{'target': int, 'numbers': [int, ...]}}, got {problem.ground_truth!r}"
        )
    return target, values  # type: ignore[return-value]  (no None in values)


@VERIFIERS.register("countdown")
def countdown(response: str, problem: Problem) -> RewardResult:
    """1 if the `<answer>` expression uses exactly the given numbers (each once) and hits the target."""
    target, numbers = _target_and_numbers(problem)
    expr, why = final_answer(response)
    if expr is None:
        return result(False, None, reason=why)
    try:
        value, used = parse_expression(expr)
    except ZeroDivisionError:
        return result(False, expr, reason="division_by_zero")
    except UnsafeExpression as e:
        return result(False, expr, reason=f"invalid_expression: {e}")
    if Counter(used) != Counter(numbers):
        return result(False, expr, reason="wrong_numbers")
    return result(value == target, expr)


checks_ground_truth(arithmetic, _gold_integer)
checks_ground_truth(countdown, _target_and_numbers)
