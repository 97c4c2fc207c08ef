"""The run directory: who may use it, and what a start or a resume finds there.

Owns: the exclusive lock (`<run_dir>/.lock`, flock, holder's pid inside: a second trainer refuses,
naming it; the kernel drops the lock when the holder dies, SIGKILL included), refusing to start a
new run over another run's checkpoints (unless `overwrite`, which clears that run's files), removing
half-written checkpoint directories left by a crash, and comparing a resumed run's config with the
checkpoint's (`config_changes`). Does not own: what a checkpoint holds (`engines.checkpoint`,
`trainer.state`) or the logs' contents (`trainer.metrics`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path

from reasonrl.config import ConfigError, dotted
from reasonrl.engines.checkpoint import checkpoint_dir, list_checkpoints, remove_temp_dirs

LOCK = ".lock"
RUN_FILES = ("metrics.jsonl", "rollouts.jsonl", "config.yaml", "training.png", "config_changes.jsonl")
# settings a resume may change without breaking its exactness (what is logged, saved, validated, watched)
_FREE_PREFIXES = ("log.", "checkpoint.", "val.", "name", "reward.max_error_rate", "reward.error_patience",
                  "reward.service_wait_s")  # fmt: skip


class RunDirError(ConfigError):
    """The run directory cannot be used as asked; the message says why and what to do."""


class RunDirLock:
    def __init__(self, run_dir: Path):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / LOCK
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            raise RunDirError(
                f"run directory {run_dir} is in use by another trainer (pid {holder}); "
                "wait for it to finish or choose another log.run_dir"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


def claim(run_dir: str | Path, resume: bool, overwrite: bool, log=print) -> RunDirLock:
    """Lock `run_dir` and make it ready for a new run or a resume (see the module docstring)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"log.run_dir {run_dir} is a file, not a directory")
    lock = RunDirLock(run_dir)
    try:
        for p in remove_temp_dirs(run_dir):
            log(f"removed a half-written checkpoint left by a crash: {p}")
        ckpts = list_checkpoints(run_dir)
        if not resume and ckpts and not overwrite:
            raise RunDirError(
                f"run directory {run_dir} already holds another run's checkpoints (latest {ckpts[-1].name}); "
                "continue it with --resume, start over with --overwrite (deletes them), or set another log.run_dir"
            )
        if not resume:  # a new run: nothing of an earlier run may stay mixed in with it
            shutil.rmtree(checkpoint_dir(run_dir), ignore_errors=True)
            shutil.rmtree(run_dir / "tensorboard", ignore_errors=True)
            for name in RUN_FILES:
                (run_dir / name).unlink(missing_ok=True)
    except BaseException:
        lock.release()
        raise
    return lock


def config_changes(saved: dict, current: dict) -> dict[str, tuple]:
    """{key: (checkpoint's value, current value)} for the keys whose change breaks an exact resume. A key
    the checkpoint lacks (a setting added since its release) counts as its default, which is how that
    release ran: a new setting is added with the earlier behaviour as its default."""
    from reasonrl.config import load_config, to_dict

    old, new = {**dotted(to_dict(load_config(None, []))), **dotted(saved)}, dotted(current)
    # train.steps sets the learning rate's schedule unless it is constant without a warm-up share of the run
    steps_free = new.get("train.lr_schedule") == "constant" and not new.get("train.warmup_ratio")
    free = _FREE_PREFIXES + (("train.steps",) if steps_free else ())
    return {k: (old.get(k), new.get(k)) for k in sorted(old.keys() | new.keys())
            if old.get(k) != new.get(k) and not k.startswith(free)}  # fmt: skip


def _shown(changes: dict[str, tuple]) -> str:
    return "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in list(changes.items())[:6])


def _refuse(changes: dict[str, tuple]) -> RunDirError:
    more = f" (and {len(changes) - 6} more)" if len(changes) > 6 else ""
    # the usual one: a run extended with more steps, whose learning rate decays over all of them
    steps = ("; train.steps sets the learning rate's schedule (train.lr_schedule=constant without "
             "train.warmup_ratio leaves it free)") if "train.steps" in changes else ""  # fmt: skip
    return RunDirError(
        f"the config differs from the checkpoint's, which breaks an exact resume: {_shown(changes)}{more}"
        f"{steps}. Resume with the checkpoint's settings, or pass --allow-config-change to apply the new ones"
    )


def refuse_config_change_early(run_dir: str | Path, current: dict, allow: bool) -> None:
    """Before anything loads (the model: minutes for a large one), the refusal `check_resume_config`
    makes: against the config in the newest checkpoint's state.json. Not verified here; a checkpoint
    that turns out bad is passed over by the resume, which checks the one it takes again."""
    from reasonrl.config import migrate
    from reasonrl.engines.checkpoint import list_checkpoints

    if allow:
        return
    for ckpt in reversed(list_checkpoints(run_dir)):
        try:
            saved = json.loads((ckpt / "state.json").read_text()).get("config", {})
        except (OSError, ValueError, AttributeError):
            continue
        changes = config_changes(migrate(saved), current)
        if changes:
            raise _refuse(changes)
        return


def check_resume_config(saved: dict, current: dict, allow: bool, run_dir: Path, step: int, log=print) -> bool:
    """Refuse a config that differs from the checkpoint's unless `allow`; with `allow`, record the
    change in `config_changes.jsonl` and return True (the caller applies the new values)."""
    changes = config_changes(saved, current)
    if not changes:
        return False
    shown = _shown(changes)
    if not allow:
        raise _refuse(changes)
    log(f"resuming with a changed config (applied from step {step + 1}): {shown}")
    record = {
        "time": time.time(),
        "resumed_from_step": step,
        "changes": {k: list(v) for k, v in changes.items()},
    }
    with open(run_dir / "config_changes.jsonl", "a") as f:
        f.write(json.dumps(record, default=str) + "\n")
    return True
