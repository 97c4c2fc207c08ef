"""`reasonrl demo`: the whole loop on a laptop CPU, with no network.

Builds (or reuses) the tiny warm-started demo model, measures held-out greedy accuracy on 200
problems, trains with GRPO, measures again, writes the plot, and returns the summary that the CLI
prints as one JSON line. The settings are `DEMO` below; recipes/demo.yaml is the same run as a recipe (a test keeps
them equal).
"""

from __future__ import annotations

import time

DEMO = [
    "name=demo",
    "model.path=demo:addsub",
    "model.device=cpu",
    "data.task=addsub",
    "data.difficulty=2",
    "rollout.n=8",
    "rollout.temperature=1.0",
    "rollout.max_new_tokens=48",
    "algo.adv_estimator=grpo",
    "algo.policy_loss=ppo_clip",
    "algo.loss_agg=token_mean",
    "train.steps=900",
    "train.global_batch=128",
    "train.mini_batch=128",
    "train.micro_batch=128",
    "train.lr=1e-4",
    "train.lr_schedule=cosine",
    "train.min_lr_ratio=0.1",
    "val.size=200",
    "val.every=100",
    "val.n=1",
    "checkpoint.every=300",
]


def run_demo(run_dir: str = "runs/demo", overrides: list[str] | None = None) -> dict:
    import torch

    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.perf_counter()
    cfg = load_config(None, DEMO + [f"log.run_dir={run_dir}"] + list(overrides or []))
    out = train(cfg, overwrite=True)  # the demo always starts over in its own directory
    evals = [r for r in out["history"] if r.get("eval/accuracy") is not None]
    return {
        "accuracy_before": evals[0]["eval/accuracy"],
        "accuracy_after": evals[-1]["eval/accuracy"],
        "steps": cfg.train.steps,
        "minutes": round((time.perf_counter() - t0) / 60, 2),
        "run_dir": out["run_dir"],
    }
