"""`reasonrl demo`: the whole loop on a laptop CPU, with no network.

Builds (or reuses) the tiny warm-started demo model, measures held-out greedy accuracy on 200
problems, trains with GRPO, measures again, writes the plot, and returns the summary that the CLI
prints as one JSON line. The settings live in recipes/demo.yaml's twin, `DEMO`, below.
"""

from __future__ import annotations

import time

DEMO = [
    "name=demo",
    "model.path=demo",
    "model.device=cpu",
    "data.task=arithmetic",
    "data.difficulty=2",
    "rollout.n=8",
    "rollout.temperature=1.0",
    "rollout.max_new_tokens=48",
    "algo.adv_estimator=grpo",
    "algo.policy_loss=ppo_clip",
    "algo.loss_agg=token_mean",
    "train.steps=120",
    "train.global_batch=128",
    "train.mini_batch=128",
    "train.micro_batch=128",
    "train.lr=1e-4",
    "val.size=200",
    "val.every=20",
    "val.n=1",
    "checkpoint.every=40",
]


def run_demo(run_dir: str = "runs/demo", overrides: list[str] | None = None) -> dict:
    import torch

    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.perf_counter()
    cfg = load_config(None, DEMO + [f"log.run_dir={run_dir}"] + list(overrides or []))
    out = train(cfg)
    evals = [r for r in out["history"] if r.get("eval/accuracy") is not None]
    return {
        "accuracy_before": evals[0]["eval/accuracy"],
        "accuracy_after": evals[-1]["eval/accuracy"],
        "steps": cfg.train.steps,
        "minutes": round((time.perf_counter() - t0) / 60, 2),
        "run_dir": out["run_dir"],
    }
