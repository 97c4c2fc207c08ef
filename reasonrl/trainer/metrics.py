"""Metrics: the only place metrics are reduced, and where they are written.

Owns: reducing lists of per-micro-batch dicts to means (`mean_metrics`), and `MetricsLog`, which
appends one JSON line per step to `metrics.jsonl`, mirrors scalars to tensorboard and wandb, and writes sampled
rollouts to `rollouts.jsonl`. On resume it truncates both files to the resumed step, atomically,
dropping a torn last line (a kill or a full disk mid-write) instead of failing on it, and purges
tensorboard events after the resumed step, so tensorboard always matches `metrics.jsonl`.
Does not own: computing the per-batch metrics (the algorithm functions and `trainer.rollouts` return
them) or choosing the rollout sample (`trainer.rollouts.sample_groups`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

from reasonrl.data.files import write_text


def mean_metrics(items: list[dict]) -> dict[str, float]:
    """{key: its mean over the items that hold it}. `_max` keys are maxed. An item that is a
    `types.UpdateMetrics` weights its per-token diagnostics (`token_means`) by its trained tokens, so
    a step's entropy or clip fraction is the mean over all its updates' tokens (an update with none
    does not count; 0.0 where none had any)."""
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    for d in items:
        token_means = getattr(d, "token_means", ())
        for k, v in d.items():
            if k.endswith("_max"):  # a maximum stays a maximum
                sums[k] = max(sums.get(k, float("-inf")), float(v))
                weights[k] = 1.0
                continue
            w = d.tokens if k in token_means else 1.0
            sums[k] = sums.get(k, 0.0) + (w * float(v) if w else 0.0)
            weights[k] = weights.get(k, 0.0) + w
    return {k: sums[k] / weights[k] if weights[k] else 0.0 for k in sums}


def iter_jsonl(path: str | Path) -> Iterator[tuple[str, dict | None]]:
    """Each non-empty line of a run's jsonl log with its row; None for a torn line (a kill or a full
    disk mid-write) or one that is not a JSON object. The one reader of metrics.jsonl / rollouts.jsonl
    (resume, the viewer, the model card)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            yield line, row if isinstance(row, dict) else None


def _truncate_jsonl(path: Path, max_step: int) -> None:
    """Keep the complete rows of steps <= max_step (a torn or unterminated last line is dropped)."""
    if path.is_file():
        keep = [line for line, row in iter_jsonl(path)
                if row is not None and line.endswith("\n") and row.get("step", 0) <= max_step]  # fmt: skip
        write_text(path, "".join(keep))


class MetricsLog:
    def __init__(self, run_dir: str | Path, tensorboard: bool = True, resume_step: int | None = None,
                 write: bool = True, wandb: dict | None = None):  # fmt: skip
        """write=False (ranks other than 0): keep the history in memory, touch no file. `wandb`: the
        keyword arguments of `trainer.wandb_log.WandbLog` (project, entity, mode, name, config), or None."""
        self.write = write
        self.history: list[dict] = []
        self.tb = None
        self.wandb = None
        if not write:
            return
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.rollouts_path = self.run_dir / "rollouts.jsonl"
        if resume_step is None:
            for p in (self.metrics_path, self.rollouts_path):
                p.unlink(missing_ok=True)
        else:
            _truncate_jsonl(self.metrics_path, resume_step)
            _truncate_jsonl(self.rollouts_path, resume_step)
        self.history: list[dict] = []
        if self.metrics_path.is_file():
            self.history = [json.loads(x) for x in self.metrics_path.read_text().splitlines() if x.strip()]
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if resume_step is None else resume_step + 1  # the resumed step itself stays
            self.tb = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=purge)
        if wandb is not None:
            from reasonrl.trainer.wandb_log import WandbLog

            self.wandb = WandbLog(self.run_dir, **wandb, resume=resume_step is not None)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        row = {
            "step": step,
            **{k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()},
        }
        self.history.append(row)
        if not self.write:
            return
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(row) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(k, float(v), step)
            self.tb.flush()  # a kill must not lose steps that metrics.jsonl holds
        if self.wandb is not None:
            self.wandb.log(step, {k: v for k, v in row.items() if k != "step" and v is not None})

    def rollouts(self, step: int, rows: list[dict]) -> None:
        if not self.write:
            return
        with open(self.rollouts_path, "a") as f:
            for r in rows:
                f.write(json.dumps({"step": step, **r}, default=str) + "\n")
        if self.wandb is not None:
            self.wandb.rollouts(step, rows)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.close()
            self.wandb = None
