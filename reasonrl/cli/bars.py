"""Progress of chunked generate-and-score jobs (`reasonrl eval --benchmarks`, `reasonrl data passrate`):
a live rich bar with the ETA on a terminal, the runner's own progress lines (also with the ETA)
otherwise, so logs and tests read plain lines.

Owns: `chunk_progress(label, log)`, a context manager yielding (log, progress) for
`eval.runner.generate_samples`.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager


@contextmanager
def chunk_progress(label: str, log=print, enabled: bool | None = None):
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield log, None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(label, BarColumn(), MofNCompleteColumn(), "chunks", TimeElapsedColumn(), "ETA",
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)  # fmt: skip
    task = bar.add_task(label, total=None)
    with bar:
        yield (lambda m: None), (lambda done, total: bar.update(task, completed=done, total=total))
