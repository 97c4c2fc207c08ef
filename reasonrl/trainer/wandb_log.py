"""Weights & Biases mirror of the metrics (optional: `log.wandb=true`, `pip install reasonrl[wandb]`).

Owns: starting the wandb run (project / entity / mode from the `log` section; its files under
RUN_DIR/wandb), keeping one wandb run per run directory across resumes (its id in RUN_DIR/wandb_run_id),
and plotting every metric against our own `step` metric, so a resumed run that re-logs steps after its
last checkpoint shows them again instead of wandb dropping them as out of order. The only module that
imports wandb. Does not own: the metric values or names (`trainer.metrics`); jsonl stays the record.
"""

from __future__ import annotations

from pathlib import Path

from reasonrl.data.files import write_text


class WandbLog:
    def __init__(self, run_dir: Path, project: str, entity: str | None, mode: str, name: str, config: dict,
                 resume: bool):  # fmt: skip
        import wandb

        id_file = run_dir / "wandb_run_id"
        run_id = id_file.read_text().strip() if resume and id_file.is_file() else None  # None: a new id
        self.run = wandb.init(project=project, entity=entity, mode=mode or None, name=name, id=run_id,
                              resume="allow" if run_id else None, dir=str(run_dir), config=config)  # fmt: skip
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        write_text(id_file, self.run.id + "\n")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log({"step": step, **metrics})

    def close(self) -> None:
        self.run.finish()
