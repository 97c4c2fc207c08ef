"""A rich progress bar with live reward and accuracy (disabled when not wanted, e.g. in tests).

Owns: `Progress` (rich is imported only when the bar is enabled). Does not own: computing or
logging metrics (`trainer.metrics`).
"""

from __future__ import annotations


class Progress:
    def __init__(self, total: int, start: int = 0, enabled: bool = True):
        self._bar = None
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
            )
            self._bar.start()
            self._task = self._bar.add_task("train", total=total, completed=start, info="")
        self._acc = None

    def update(self, step: int, metrics: dict) -> None:
        if self._bar is None:
            return
        if "eval/accuracy" in metrics:
            self._acc = metrics["eval/accuracy"]
        info = f"reward {metrics.get('reward/mean', 0):.3f}"
        if self._acc is not None:
            info += f"  val acc {self._acc:.3f}"
        self._bar.update(self._task, completed=step, info=info)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
