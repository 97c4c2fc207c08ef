"""A synthetic run directory in exactly the files and row shapes a training run writes (metrics.jsonl,
per-group rollouts.jsonl, an eval results.json), for the viewer's browser tests and its render
benchmark (1000 steps, 10k groups) without training anything.

Owns: `write_run`. The shapes follow `trainer.metrics.MetricsLog`, `trainer.rollouts.sample_groups` and
`eval.runner.summarize`; a test checks the viewer on a real run too, so a drift shows.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

SOURCES = ("arithmetic", "countdown", "math__gsm8k")


def write_run(path: str | Path, steps: int = 20, groups_per_step: int = 4, n: int = 4, seed: int = 0,
              offset: float = 0.0) -> Path:  # fmt: skip
    """A run whose reward rises with the step (plus `offset`); group g of step s asks "What is s + g?"
    and its completion j answers s + g + (j % 2): even completions are right."""
    rng = random.Random(seed)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "metrics.jsonl", "w", encoding="utf-8") as f:
        for s in range(1, steps + 1):
            frac = s / steps
            row = {
                "step": s,
                "reward/mean": min(1.0, 0.2 + 0.6 * frac + offset + rng.uniform(-0.03, 0.03)),
                "reward/accuracy": min(1.0, 0.15 + 0.6 * frac + offset),
                "rollout/response_length": 40 + 20 * math.sin(s / 7),
                "actor/entropy": 1.5 * math.exp(-2 * frac),
                "verifier/batch_seconds": 0.01 + rng.uniform(0, 0.005),
                "perf/step_seconds": 2.0 + rng.uniform(0, 0.2),
            }
            if s % 5 == 0 or s == 1:
                row["eval/accuracy"] = min(1.0, 0.1 + 0.7 * frac + offset)
            f.write(json.dumps(row) + "\n")
    with open(path / "rollouts.jsonl", "w", encoding="utf-8") as f:
        for s in range(1, steps + 1):
            for g in range(groups_per_step):
                truth = s + g
                comps = [
                    {"text": f"<think>adding {s} and {g}</think> The answer is {truth + j % 2}.",
                     "reward": 1.0 if j % 2 == 0 else 0.0, "reason": "correct" if j % 2 == 0 else "wrong answer",
                     "extracted": str(truth + j % 2), "tokens": 12 + j, "finish_reason": "stop"}
                    for j in range(n)
                ]  # fmt: skip
                f.write(json.dumps({
                    "step": s, "uid": f"s{s}-g{g}", "data_source": SOURCES[g % len(SOURCES)],
                    "prompt": f"What is {s} + {g}?", "ground_truth": str(truth),
                    "rewards": [c["reward"] for c in comps], "completions": comps,
                }) + "\n")  # fmt: skip
    eval_dir = path / "eval" / "final"
    eval_dir.mkdir(parents=True, exist_ok=True)
    results = {
        "benchmarks": {
            "gsm8k": {
                "problems": 50,
                "n": 4,
                "mean@n": 0.42 + offset,
                "se": 0.05,
                "ci95": 0.098,
                "pass@1": 0.42 + offset,
                "pass@2": 0.55,
                "pass@4": 0.66,
                "maj@4": 0.47,
            },
            "math500": {
                "problems": 40,
                "n": 4,
                "mean@n": 0.21 + offset,
                "se": 0.04,
                "ci95": 0.078,
                "pass@1": 0.21 + offset,
                "pass@2": 0.3,
                "pass@4": 0.38,
                "maj@4": 0.25,
            },
        },  # fmt: skip
        "macro": {"math": 0.315 + offset},
    }
    (eval_dir / "results.json").write_text(json.dumps(results, indent=1))
    return path
