"""Training progress for people: a rich bar on a terminal, plain lines everywhere else.

Owns: `Progress`. On a terminal it draws a rich progress bar with live reward and accuracy (rich is
imported only then). When stdout is not a terminal (Slurm, nohup, `| tee`), it prints one plain line
per `every_s` seconds (and at the first and last step): step, reward, held-out accuracy, step time,
ETA. It also silences third-party progress bars (transformers' "Writing model shards" / "Loading
weights") for the run. Does not own: computing or logging metrics (`trainer.metrics`).
"""

from __future__ import annotations

import sys
import time


def quiet_third_party_bars() -> None:
    """Checkpoint saves and loads must not draw their own bars into the training output."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a core dependency
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except ImportError:  # pragma: no cover
        pass


class Progress:
    def __init__(self, total: int, start: int = 0, enabled: bool = True, stream=None, every_s: float = 30.0):
        self._bar = None
        self._stream = stream if stream is not None else sys.stdout
        self._lines = False
        self.total, self.start, self.every_s = total, start, every_s
        self._t0 = time.monotonic()
        self._last_print = None
        self._acc = None
        if not enabled:
            return
        quiet_third_party_bars()
        if getattr(self._stream, "isatty", lambda: False)():
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
        else:
            self._lines = True

    def update(self, step: int, metrics: dict) -> None:
        if "eval/accuracy" in metrics:
            self._acc = metrics["eval/accuracy"]
        info = f"reward {metrics.get('reward/mean', 0):.3f}"
        if self._acc is not None:
            info += f"  val acc {self._acc:.3f}"
        if self._bar is not None:
            self._bar.update(self._task, completed=step, info=info)
        elif self._lines:
            now = time.monotonic()
            due = self._last_print is None or now - self._last_print >= self.every_s or step == self.total
            if due:
                self._last_print = now
                done = step - self.start
                per_step = (now - self._t0) / max(done, 1)
                eta = per_step * (self.total - step)
                print(f"step {step}/{self.total}  {info}  step {metrics.get('perf/step_seconds', per_step):.2f}s  "
                      f"eta {_hms(eta)}", file=self._stream, flush=True)  # fmt: skip

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
