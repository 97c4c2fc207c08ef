"""Procedural task generators: seeded, reproducible, with a difficulty knob.

Each generator is `generate(n, seed, difficulty) -> list[Problem]` and stores a worked solution in
`extra_info["solution"]` (used for the supervised warm start of the demo model).

Owns: the task table (`TASKS`), `generate(task, ...)` and the stable held-out split (`is_heldout`).
Does not own: scoring (`rewards.verifiers.procedural`) or the warm start itself (`models.tiny`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial

from reasonrl.types import Problem

from . import arithmetic, countdown

TASKS: dict[str, Callable[..., list[Problem]]] = {
    "arithmetic": arithmetic.generate,
    "addsub": partial(arithmetic.generate, operators="+-"),
    "countdown": countdown.generate,
}


HELDOUT_BUCKETS = 10  # one bucket in ten of the prompt space is held out for evaluation


def is_heldout(problem: Problem) -> bool:
    """Stable split by a hash of the prompt text: the same problem is always on the same side."""
    digest = hashlib.sha1(problem.user_text.encode()).digest()
    return digest[0] % HELDOUT_BUCKETS == 0


def generate(task: str, n: int, seed: int, difficulty: int = 1, split: str | None = None) -> list[Problem]:
    """`n` problems of a built-in task. split="train" / "test" keeps only problems on that side of
    the held-out split, so test problems never appear in training (or in the demo's warm start)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(sorted(TASKS))}")
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")
    if split is None:
        return TASKS[task](n=n, seed=seed, difficulty=difficulty)
    want_test = split == "test"
    out: list[Problem] = []
    batch = n * (HELDOUT_BUCKETS if want_test else 2)
    for attempt in range(20):
        for p in TASKS[task](n=batch, seed=seed * 1000 + attempt, difficulty=difficulty):
            if is_heldout(p) == want_test:
                out.append(p)
                if len(out) == n:
                    return out
    raise ValueError(f"task {task!r} difficulty {difficulty}: could not draw {n} {split} problems")
