"""Procedural task generators: seeded, reproducible, with a difficulty knob.

Each generator is `generate(n, seed, difficulty) -> list[Problem]` and stores a worked solution in
`extra_info["solution"]` (used for the supervised warm start of the demo model).
"""

from __future__ import annotations

from collections.abc import Callable

from reasonrl.types import Problem

from . import arithmetic, countdown

TASKS: dict[str, Callable[..., list[Problem]]] = {
    "arithmetic": arithmetic.generate,
    "countdown": countdown.generate,
}


def generate(task: str, n: int, seed: int, difficulty: int = 1) -> list[Problem]:
    """Problems of a built-in task; unknown task names list the known ones."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(sorted(TASKS))}")
    return TASKS[task](n=n, seed=seed, difficulty=difficulty)
