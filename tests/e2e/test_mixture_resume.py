"""Training on a mixture (a file routed to a plugin verifier, a built-in task, reasoning-gym) with the
curriculum on: levels move and prompts get skipped as logged per task, a trainer killed with SIGKILL
resumes to exactly the metrics of an uninterrupted run, and the asynchronous rollout worker (which
receives the sampler by pickling) trains on the same mixture."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_run_dir import _wait_for
from test_train_loop import _stable

from reasonrl.config import load_config
from reasonrl.data.schema import write_problems
from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.trainer.loop import train
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(600)
HERE = Path(__file__).parent


def _files(tmp_path) -> Path:
    words = "ab cd ef gh ij kl mn op qr st uv wx".split()
    rows = [Problem([{"role": "user", "content": f"tell me about {w}"}], "x", "parity_test", "x", {"index": i},
                    verifier="parity", uid=f"p{i}") for i, w in enumerate(words)]  # fmt: skip
    write_problems(tmp_path / "parity.parquet", rows)
    return tmp_path / "parity.parquet"


def _overrides(model_dir, run_dir, files, steps, *extra):
    mixture = json.dumps([{"name": "parity", "files": [str(files)], "weight": 2},
                          {"name": "arith", "task": "arithmetic", "difficulty": 3},
                          {"name": "gym", "reasoning_gym": "leg_counting:1"}])  # fmt: skip
    return [f"model.path={model_dir}", "model.device=cpu", f"log.run_dir={run_dir}", f"train.steps={steps}",
            "train.global_batch=16", "rollout.n=4", "train.mini_batch=8", "train.micro_batch=4", "train.lr=1e-3",
            "rollout.max_new_tokens=8", "val.size=4", "val.n=1", "val.every=0", "log.progress=false",
            "log.tensorboard=false", "checkpoint.every=2", "checkpoint.keep_last=10", "algo.entropy_coef=0.05",
            f"data.mixture={mixture}", "data.max_prompt_tokens=1024", "plugins=[parity_verifier]",
            "data.curriculum.enabled=true", "data.curriculum.last_k=2", "data.curriculum.skip_solved_after=1",
            "data.curriculum.skip_unsolved_after=1", *extra]  # fmt: skip


def _env():
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }


def test_mixture_with_curriculum_resumes_exactly_after_sigkill(tiny_model_dir, tmp_path):
    files, steps = _files(tmp_path), 8
    full_cmd = [
        sys.executable,
        "-m",
        "reasonrl.cli.main",
        "train",
        *_overrides(tiny_model_dir, tmp_path / "full", files, steps),
    ]
    res = subprocess.run(
        full_cmd, capture_output=True, text=True, timeout=400, env=_env()
    )  # same threads as below
    assert res.returncode == 0, res.stderr[-2000:]
    history = [
        json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    rows = {r["step"]: _stable(r) for r in history}
    last = history[-1]
    assert last["curriculum/arithmetic/level"] < 3  # a random policy fails: the level went down
    assert last["curriculum/skipped_solved"] + last["curriculum/skipped_unsolved"] > 0
    assert all(last[f"data/{s}/share"] > 0 for s in ("parity", "arith", "gym"))
    assert "curriculum/leg_counting/level" in last

    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "reasonrl.cli.main", "train", *_overrides(tiny_model_dir, run, files, steps)]
    resumed = kill_after_checkpoint_and_resume(cmd, run, 4, steps)
    for r in resumed:
        assert _stable(r) == rows[r["step"]], r["step"]


def kill_after_checkpoint_and_resume(cmd: list[str], run, step: int, steps: int, check=None) -> list[dict]:
    """Run `cmd` (a `train` command writing to `run`), SIGKILL it once the checkpoint of `step` is complete,
    run `check()` on what it left, resume it to the end; returns the resumed run's metrics rows, after
    checking they hold every step once."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    _wait_for(
        lambda: (run / "checkpoints" / f"step_{step:06d}" / "complete.json").exists(), proc, timeout=240
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert list_checkpoints(run)[-1].name != f"step_{steps:06d}", "the kill came too late to test anything"
    if check is not None:
        check()
    res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=400, env=_env())
    assert res.returncode == 0, res.stderr[-2000:]
    resumed = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert [r["step"] for r in resumed] == list(range(steps + 1))
    return resumed


def test_async_worker_trains_on_the_mixture(tiny_model_dir, tmp_path):
    sys.path.insert(0, str(HERE))
    cfg = load_config(None, _overrides(tiny_model_dir, tmp_path / "async", _files(tmp_path), 3,
                                       "rollout.max_staleness=1", "algo.off_policy.tis_cap=2.0"))  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    assert hist[-1]["step"] == 3 and "curriculum/arithmetic/level" in hist[-1]
