"""Per-phase watchdogs: a stall planted in each phase (generation, reward, sync, update, checkpoint,
validation) at step 2 is caught within its deadline: the run prints and saves every thread's stack,
names the phase, the step and the elapsed time, exits with status 70, and leaves the step-1
checkpoint intact (a resume continues from it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
from reasonrl.trainer.watchdog import EXIT_STALLED, PHASES

pytestmark = pytest.mark.timeout(300)
HERE = Path(__file__).parent
DEADLINE = 4.0


def _cmd(model_dir, run_dir, phase):
    return [sys.executable, "-m", "reasonrl.cli.main", "train", f"model.path={model_dir}", "model.device=cpu",
            f"log.run_dir={run_dir}", "train.steps=3", "train.global_batch=8", "rollout.n=4", "train.mini_batch=8",
            "train.micro_batch=8", "rollout.max_new_tokens=6", "data.train_size=32", "val.size=4", "val.n=1",
            "val.every=2", "log.progress=false", "log.tensorboard=false", "checkpoint.every=1",
            "plugins=[stall_phase]", f"watchdog.{phase}_s={DEADLINE}"]  # fmt: skip


@pytest.mark.parametrize("phase", PHASES)
def test_a_stalled_phase_is_caught_within_its_deadline(phase, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "REASONRL_TEST_STALL": phase,
           "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}  # fmt: skip
    t0 = time.monotonic()
    res = subprocess.run(
        _cmd(tiny_model_dir, run, phase), capture_output=True, text=True, timeout=240, env=env
    )
    spent = time.monotonic() - t0
    assert res.returncode == EXIT_STALLED, res.stderr[-3000:]
    assert f"watchdog: phase {phase!r} of step 2 stalled" in res.stderr
    assert f"watchdog.{phase}_s={DEADLINE:g}" in res.stderr and "Thread 0x" in res.stderr  # all stacks dumped
    stall = (run / "stall.txt").read_text()
    assert f"phase {phase!r} of step 2" in stall and 'File "' in stall
    assert spent < 120  # the stall would have lasted 600 s
    ckpts = list_checkpoints(run)
    assert ckpts and ckpts[-1].name == "step_000001" and verify_checkpoint(ckpts[-1]) is None
