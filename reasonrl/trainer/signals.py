"""SIGINT / SIGTERM during training: finish the current step, checkpoint, stop with a clear message.

Owns: `StopOnSignal` (a context manager that records the first SIGINT / SIGTERM instead of dying
mid-step; a second one stops at once) and `Interrupted`, the exception the loop raises after its
checkpoint, which the CLI turns into one line and exit status 128 + signal. Does not own: the
checkpoint itself (`trainer.state`).
"""

from __future__ import annotations

import signal
import threading


class Interrupted(Exception):
    """Training stopped on a signal after `step`; `checkpoint` is where to resume from (or None)."""

    def __init__(self, signum: int, step: int, checkpoint):
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        where = f"checkpoint {checkpoint}; continue with --resume" if checkpoint else "no checkpoint written"
        super().__init__(f"stopped by {signal.Signals(signum).name} after step {step} ({where})")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopOnSignal:
    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, log=print):
        self.signum: int | None = None
        self.log = log
        self._old: dict = {}

    def _handle(self, signum, frame):
        if self.signum is not None:  # second signal: stop now
            raise KeyboardInterrupt
        self.signum = signum
        self.log(f"{signal.Signals(signum).name} received: finishing this step, then saving and stopping "
                 "(send it again to stop at once)")  # fmt: skip

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, old in self._old.items():
            signal.signal(s, old)
        return False
