"""Per-phase watchdogs: a run that stalls in a phase dumps every Python stack, names the phase and how
long it has been in it, and exits non-zero, instead of hanging silently. The last checkpoint stays as
it was (checkpoints are written to a temporary directory and renamed, so a stall mid-save leaves the
previous one intact; the next resume removes the leftover).

Owns: `Watchdog` (a daemon thread that checks the current phase against its deadline twice a second)
and `phase(name)`, which marks where this process is: generation, reward, sync, update, checkpoint,
validation. Deadlines come from the recipe's `watchdog` section (seconds; 0 turns a phase's watchdog
off). On a stall: the stacks of all threads go to stderr and to `<run_dir>/stall.txt`, one line names
the phase, the step and the elapsed time, and the process exits with status 70. Marking a phase also
names it for the distributed error messages (`distributed.set_phase`). Does not own: the phases'
work itself.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

EXIT_STALLED = 70
PHASES = ("generation", "reward", "sync", "update", "checkpoint", "validation")


@dataclass
class WatchdogConfig:
    generation_s: float = 3600.0
    reward_s: float = 1800.0
    sync_s: float = 600.0
    update_s: float = 3600.0
    checkpoint_s: float = 1800.0
    validation_s: float = 3600.0


class Watchdog:
    def __init__(self, cfg: WatchdogConfig, run_dir: str | Path, log=print, interval: float = 0.5):
        self.deadlines = {p: float(getattr(cfg, f"{p}_s")) for p in PHASES}
        self.run_dir, self.log, self.interval = Path(run_dir), log, interval
        self.current: tuple[str, int, float] | None = None  # (phase, step, since)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="reasonrl-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            cur = self.current
            if cur is None:
                continue
            name, step, since = cur
            limit, spent = self.deadlines[name], time.monotonic() - since
            if limit > 0 and spent > limit:
                self._stalled(name, step, spent, limit)

    def _stalled(self, name: str, step: int, spent: float, limit: float) -> None:
        msg = (f"reasonrl: watchdog: phase {name!r} of step {step} stalled: {spent:.1f}s > its deadline "
               f"watchdog.{name}_s={limit:g}; all thread stacks follow (also in {self.run_dir / 'stall.txt'})")  # fmt: skip
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            with open(self.run_dir / "stall.txt", "w") as f:
                f.write(msg + "\n")
                faulthandler.dump_traceback(file=f, all_threads=True)
        except OSError:
            pass
        print(msg, file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(EXIT_STALLED)


_ACTIVE: list[Watchdog] = []


@contextlib.contextmanager
def running(cfg: WatchdogConfig, run_dir, log=print):
    """A watchdog for the duration of a training run (phases marked with `phase`)."""
    wd = Watchdog(cfg, run_dir, log).start()
    _ACTIVE.append(wd)
    try:
        yield wd
    finally:
        wd.stop()
        _ACTIVE.remove(wd)


def enter(name: str, step: int) -> None:
    """From now on this process is in phase `name` (one of PHASES) of `step`."""
    from reasonrl import distributed as dist

    dist.set_phase(f"{name} (step {step})")
    if _ACTIVE:
        _ACTIVE[-1].current = (name, step, time.monotonic())


@contextlib.contextmanager
def phase(name: str):
    """A phase nested in the current one (e.g. reward inside generation), restored afterwards."""
    wd = _ACTIVE[-1] if _ACTIVE else None
    before = wd.current if wd else None
    if wd is not None:
        wd.current = (name, before[1] if before else 0, time.monotonic())
    try:
        yield
    finally:
        if wd is not None:
            wd.current = before
