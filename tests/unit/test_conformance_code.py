"""Conformance: third-party code tasks (shared/conformance/code_cases.jsonl) through the "code" verifier.

Each row is a HumanEval / MBPP / LeetCode / stdin-stdout task with its canonical solution. We feed
the solution as a model response (fenced block) with the row's tests in the Guru/verl ground-truth
shape that the dataset family uses, and check:
  - the canonical solution scores what upstream claims (`expected_pass`, `expected_continuous_score`);
  - a broken variant of every passing solution fails. Function tasks are broken by wrapping the entry
    point so its result is perturbed (not-bool, +1, +"x", extra element...): a plausible wrong answer,
    not a crash. Script tasks are broken by printing one extra token after the real output.
Deliberate differences from upstream, kept as rows:
  - verl-prime-code-1: verl's continuous mode scores only the first 10 of 11 tests (0.9); our
    fraction mode counts all of them: 10/11.
"""

from __future__ import annotations

import json

import pytest
from _conformance import PERTURB, case_file

from reasonrl.rewards.verifiers.code import code
from reasonrl.types import Problem

LEETCODE_PREFIX = "from typing import *\nfrom collections import *\nimport math, heapq, bisect, itertools"
FRACTION_OVERRIDES = {"verl-prime-code-1": 10 / 11}  # see module docstring

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.bwrap,
]


def _load() -> list[dict]:
    return [
        json.loads(line) for line in case_file("code_cases.jsonl").read_text().splitlines() if line.strip()
    ]


CASES = _load()


def _as_row(case: dict) -> tuple[str, object, dict]:
    """(solution program, ground truth in the family's Guru/verl shape, extra_info)."""
    kind = case["kind"]
    if kind == "function_call":  # HumanEval: the solution is the prompt's signature + the body
        return (
            case["prompt"] + case["canonical_solution"],
            {"test": case["tests"], "entry_point": case["entry_point"]},
            {},
        )
    if kind == "assert_list":  # MBPP as Guru stores it: {"functional": asserts}
        return case["canonical_solution"], json.dumps({"functional": case["tests"]}), {}
    if kind == "function_call_class":  # Guru leetcode2k: test code + extra_info.prefix
        return (
            case["canonical_solution"],
            json.dumps({"functional": case["tests"]}),
            {"prefix": LEETCODE_PREFIX},
        )
    if kind == "stdin_stdout":  # Guru taco / primeintellect, verl prime: {"inputs", "outputs"}
        return case["canonical_solution"], json.dumps(case["tests"]), {}
    raise AssertionError(f"unknown kind {kind!r}")  # fmt: skip


def _broken(case: dict, program: str) -> str:
    if case["kind"] == "stdin_stdout":
        return program + "\nprint(0)\n"
    entry = case["entry_point"]
    if entry.startswith("Solution()."):
        method = entry.split(".", 1)[1]
        return (
            program + PERTURB + f"\n_orig = Solution.{method}\n"
            f"Solution.{method} = lambda self, *a, **k: __reasonrl_perturb(_orig(self, *a, **k))\n"
        )
    return (
        program
        + PERTURB
        + f"\n_orig_{entry} = {entry}\n"
        + (f"def {entry}(*a, **k):\n    return __reasonrl_perturb(_orig_{entry}(*a, **k))\n")
    )


def _problem(case: dict, gt, extra: dict) -> Problem:
    return Problem(
        prompt=[{"role": "user", "content": case.get("prompt") or "solve"}],
        ground_truth=gt,
        data_source="codegen__conformance",
        ability="codegen",
        extra_info=extra,
        uid=case["task_id"],
    )


def _response(program: str) -> str:
    return f"Let me solve it.\n```python\n{program}\n```\n"


def test_case_file_covers_all_families():
    kinds = {c["kind"] for c in CASES}
    assert kinds == {"function_call", "assert_list", "function_call_class", "stdin_stdout"}
    assert len(CASES) == 30


@pytest.mark.parametrize("case", CASES, ids=[c["task_id"] for c in CASES])
def test_canonical_solution_scores_as_upstream_says(case):
    program, gt, extra = _as_row(case)
    prob = _problem(case, gt, extra)
    res = code(_response(program), prob, timeout_s=10)
    assert res.score == float(case["expected_pass"]), res.info
    if "expected_continuous_score" in case:
        frac = code(_response(program), prob, score_mode="fraction", timeout_s=10)
        want = FRACTION_OVERRIDES.get(case["task_id"], case["expected_continuous_score"])
        assert frac.score == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["expected_pass"]], ids=[c["task_id"] for c in CASES if c["expected_pass"]]
)
def test_broken_variant_fails(case):
    program, gt, extra = _as_row(case)
    res = code(_response(_broken(case, program)), _problem(case, gt, extra), timeout_s=10)
    assert res.score == 0.0, f"broken variant of {case['task_id']} passed"
    assert res.reason in ("wrong", "runtime_error"), res.info
