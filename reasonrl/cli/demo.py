"""`reasonrl demo`: the whole loop on a laptop CPU, with no network.

Runs the recipe `recipes/demo.yaml` (shipped inside the package as `reasonrl/recipes/demo.yaml`; the
repository's `recipes/` links there): builds (or reuses) the tiny warm-started demo model, measures
held-out greedy accuracy on 200 problems, trains with GRPO, measures again, writes the plot, and
returns the summary that the CLI prints as one JSON line.
"""

from __future__ import annotations

import time

from reasonrl.config import BUILTIN_RECIPES

RECIPE = BUILTIN_RECIPES / "demo.yaml"


def run_demo(run_dir: str = "runs/demo", overrides: list[str] | None = None) -> dict:
    import torch

    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.perf_counter()
    cfg = load_config(RECIPE, [f"log.run_dir={run_dir}", *(overrides or [])])
    out = train(cfg, overwrite=True)  # the demo always starts over in its own directory
    evals = [r for r in out["history"] if r.get("eval/accuracy") is not None]
    return {
        "accuracy_before": evals[0]["eval/accuracy"],
        "accuracy_after": evals[-1]["eval/accuracy"],
        "steps": cfg.train.steps,
        "minutes": round((time.perf_counter() - t0) / 60, 2),
        "run_dir": out["run_dir"],
    }
