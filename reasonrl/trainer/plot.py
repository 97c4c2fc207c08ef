"""The end-of-run PNG: reward, validation accuracy, response length and entropy against step.

Owns: `plot_run(history, path)` with matplotlib's Agg backend (no display needed); the PNG is written
to a temp file and renamed. Does not own: the metric values (`trainer.metrics` reduces them).
"""

from __future__ import annotations

import os
from pathlib import Path

PANELS = [
    ("reward/mean", "reward (train, mean)"),
    ("eval/accuracy", "held-out accuracy (greedy)"),
    ("rollout/response_length", "response length (tokens)"),
    ("actor/entropy", "entropy (nats/token)"),
]


def plot_run(history: list[dict], path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (key, label) in zip(axes.flat, PANELS):
        pts = [(r["step"], r[key]) for r in history if r.get(key) is not None]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o" if len(pts) < 20 else None, markersize=4)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path
