"""Run directories that never lose, mix or corrupt data: SIGKILL + resume with a torn log line, a
corrupt latest checkpoint and a leftover temp directory; the lock; refusing to mix runs; config
changes on resume; SIGTERM; no processes left behind after the trainer is SIGKILLed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from test_train_loop import _cfg, _stable

from reasonrl.config import load_config
from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
from reasonrl.trainer.loop import train
from reasonrl.trainer.rundir import RunDirError, RunDirLock

pytestmark = pytest.mark.timeout(300)
ENT = "algo.entropy_coef=0.05"  # the random policy moves, so lost weights would show


def _overrides(model_dir, run_dir, steps, *extra):
    return [f"model.path={model_dir}", "model.device=cpu", f"log.run_dir={run_dir}", f"train.steps={steps}",
            "train.global_batch=16", "rollout.n=4", "train.mini_batch=8", "train.micro_batch=4", "train.lr=1e-3",
            "rollout.max_new_tokens=12", "data.train_size=64", "val.size=8", "val.n=2", "log.progress=false",
            "checkpoint.every=2", "checkpoint.keep_last=5", ENT, *extra]  # fmt: skip


def _spawn(overrides, *flags):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "reasonrl.cli.main", "train", *flags, *overrides]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def killed_and_resumed(
    args, tmp_path, kill_after: int, steps: int, spawned: dict | None = None
) -> tuple[dict, list[dict]]:
    """({step: stable metrics} of an uninterrupted run of `args(run_dir)`, the metrics rows of a run of it
    killed with SIGKILL once checkpoint `kill_after` is complete and then resumed with --resume). `spawned`:
    gets {pid: command line} of the processes the killed run had started (its workers, their servers), each
    gone after the kill."""
    ref = _spawn(args(tmp_path / "a"))
    assert ref.wait(timeout=300) == 0, ref.communicate()[1][-2000:]
    run = tmp_path / "b"
    proc = _spawn(args(run))
    _wait_for(
        lambda: (run / "checkpoints" / f"step_{kill_after:06d}" / "complete.json").exists(), proc, timeout=300
    )
    if spawned is not None:
        for pid in _descendants(proc.pid):
            try:
                spawned[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:  # gone meanwhile
                pass
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    if spawned is not None:
        assert_all_exit(spawned)
    assert list_checkpoints(run)[-1].name != f"step_{steps:06d}", "the kill came too late to test anything"
    res = _spawn(args(run), "--resume")
    _, err = res.communicate(timeout=300)
    assert res.returncode == 0, err[-2000:]
    rows = lambda d: [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    return {r["step"]: _stable(r) for r in rows(tmp_path / "a")}, rows(run)


def _wait_for(pred, proc, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.02)
    raise AssertionError("timed out")


def _steps(path):
    return [json.loads(x)["step"] for x in path.read_text().splitlines() if x.strip()]


def _tb_scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {e.step: e.value for e in acc.Scalars(tag)}


def test_sigkill_then_resume_survives_torn_line_corrupt_checkpoint_and_temp_dir(tiny_model_dir, tmp_path):
    steps = 8
    ref = _spawn(_overrides(tiny_model_dir, tmp_path / "a", steps))  # same process setup as the killed run
    assert ref.wait(timeout=240) == 0, ref.communicate()[1][-2000:]
    full = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    run = tmp_path / "b"
    proc = _spawn(_overrides(tiny_model_dir, run, steps))
    _wait_for(lambda: (run / "checkpoints" / "step_000004" / "complete.json").exists(), proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    ckpts = list_checkpoints(run)
    assert len(ckpts) >= 2 and ckpts[-1].name != f"step_{steps:06d}", (
        "the kill came too late to test anything"
    )
    # damage: a torn last line, a corrupt newest checkpoint, a temp directory left by a crash
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 99, "reward/me')
    (ckpts[-1] / "rng.pt").write_bytes(b"")
    leftover = run / "checkpoints" / ".step_000009.crashed"
    leftover.mkdir()
    res = _spawn(_overrides(tiny_model_dir, run, steps), "--resume")  # same process setup as the others
    out, err = res.communicate(timeout=240)
    assert res.returncode == 0, err[-2000:]
    messages = out.splitlines()
    resumed = {"history": [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]}
    assert any(ckpts[-1].name in m and "rng.pt" in m for m in messages), messages  # names the bad file
    assert any(f"resumed from {ckpts[-2]}" in m for m in messages), messages  # fell back one checkpoint
    assert not leftover.exists()
    assert _steps(run / "metrics.jsonl") == list(range(steps + 1))
    full_by_step = {r["step"]: _stable(r) for r in full}
    for row in resumed["history"]:
        assert _stable(row) == full_by_step[row["step"]], row["step"]
    # tensorboard holds exactly what metrics.jsonl holds, once per step
    jsonl = {r["step"]: r["reward/mean"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
             if r.get("reward/mean") is not None}  # fmt: skip
    tb = _tb_scalars(run, "reward/mean")
    assert tb.keys() == jsonl.keys() and all(abs(tb[s] - jsonl[s]) < 1e-6 for s in jsonl)


def test_second_trainer_on_the_same_run_dir_is_refused_naming_the_holder(tmp_path):
    lock = RunDirLock(tmp_path)
    try:
        with pytest.raises(RunDirError, match=f"in use by another trainer \\(pid {os.getpid()}\\)"):
            train(load_config(None, [f"log.run_dir={tmp_path}", "model.device=cpu"]))
    finally:
        lock.release()
    RunDirLock(tmp_path).release()  # free again once released


def test_new_run_over_old_checkpoints_is_refused_unless_overwrite(tiny_model_dir, tmp_path):
    cfg = _cfg(tiny_model_dir, tmp_path, 2)
    train(cfg)
    with pytest.raises(RunDirError, match="already holds another run's checkpoints .*--resume.*--overwrite"):
        train(cfg)
    out = train(_cfg(tiny_model_dir, tmp_path, 2, "checkpoint.every=0"), overwrite=True)
    assert [c.name for c in list_checkpoints(tmp_path)] == [
        "step_000002"
    ]  # the old run's step_2 was replaced
    assert _steps(tmp_path / "metrics.jsonl") == [0, 1, 2] and len(out["history"]) == 3


def test_config_change_on_resume_is_refused_or_applied_and_recorded(tiny_model_dir, tmp_path, monkeypatch):
    from reasonrl.trainer import setup

    train(_cfg(tiny_model_dir, tmp_path, 2, "checkpoint.every=1"))
    changed = _cfg(tiny_model_dir, tmp_path, 4, "train.lr=5e-4")
    with monkeypatch.context() as m:  # refused before the model loads
        m.setattr(setup, "load_model", lambda *a, **k: pytest.fail("weights loaded"))
        with pytest.raises(RunDirError, match=r"train.lr: 0.001 -> 0.0005.*--allow-config-change"):
            train(changed, resume=True)
        newest = tmp_path / "checkpoints" / "step_000002" / "state.json"
        kept = newest.read_text()
        newest.write_text(kept[:10])  # torn: the early check reads the one before
        with pytest.raises(RunDirError, match=r"train.lr: 0.001 -> 0.0005"):
            train(changed, resume=True)
        newest.write_text(kept)
    out = train(changed, resume=True, allow_config_change=True)
    assert [round(r["lr"], 10) for r in out["history"] if r["step"] > 2] == [5e-4, 5e-4]
    record = json.loads((tmp_path / "config_changes.jsonl").read_text().splitlines()[-1])
    assert record["resumed_from_step"] == 2 and record["changes"]["train.lr"] == [1e-3, 5e-4]


def test_more_steps_are_refused_with_a_decaying_learning_rate_and_say_why(tmp_path):
    from reasonrl.config import load_config, to_dict
    from reasonrl.trainer.rundir import check_resume_config

    def cfg(*extra):
        return to_dict(load_config(None, list(extra)))

    saved = cfg("train.steps=2", "train.lr_schedule=cosine")
    with pytest.raises(RunDirError, match=r"train.steps: 2 -> 3; train.steps sets the learning rate's schedule "
                                          r"\(train.lr_schedule=constant without train.warmup_ratio leaves it free\)"):  # fmt: skip
        check_resume_config(saved, cfg("train.steps=3", "train.lr_schedule=cosine"), False, tmp_path, 2)
    constant = cfg("train.steps=2", "train.lr_schedule=constant")
    assert (
        check_resume_config(constant, cfg("train.steps=3", "train.lr_schedule=constant"), False, tmp_path, 2)
        is False
    )
    # a warm-up that is a share of the run: more steps, a longer warm-up
    warm = cfg("train.steps=2", "train.warmup_ratio=0.5")
    with pytest.raises(
        RunDirError, match=r"train.steps: 2 -> 3; train.steps sets the learning rate's schedule"
    ):
        check_resume_config(warm, cfg("train.steps=3", "train.warmup_ratio=0.5"), False, tmp_path, 2)


def test_the_verifier_watch_settings_may_change_on_resume_and_need_not_be_in_an_older_checkpoint(tmp_path):
    """They stop a run, they do not change its numbers; a checkpoint of an earlier release lacks them."""
    from reasonrl.config import load_config, to_dict
    from reasonrl.trainer.rundir import check_resume_config

    saved = to_dict(load_config(None, []))
    for key in ("max_error_rate", "error_patience", "service_wait_s"):
        del saved["reward"][key]
    current = to_dict(load_config(None, ["reward.max_error_rate=0.2", "reward.error_patience=0",
                                         "reward.service_wait_s=5"]))  # fmt: skip
    assert check_resume_config(saved, current, False, tmp_path, 2) is False
    # the rest of the section is not free
    with pytest.raises(RunDirError, match=r"reward.timeout_s: 10.0 -> 5.0"):
        check_resume_config(saved, to_dict(load_config(None, ["reward.timeout_s=5"])), False, tmp_path, 2)


def test_a_setting_added_since_the_checkpoints_release_counts_as_its_default(tmp_path):
    """A checkpoint of an earlier release lacks the settings added since (algo.top_entropy_quantile): they
    ran as their defaults, so resuming with the defaults is no change; another value is named as one."""
    from reasonrl.config import load_config, to_dict
    from reasonrl.trainer.rundir import check_resume_config

    saved = to_dict(load_config(None, []))
    del saved["algo"]["top_entropy_quantile"], saved["train"]["micro_tokens"]
    assert check_resume_config(saved, to_dict(load_config(None, [])), False, tmp_path, 2) is False
    changed = to_dict(load_config(None, ["algo.top_entropy_quantile=0.2"]))
    with pytest.raises(RunDirError, match=r"algo.top_entropy_quantile: 1.0 -> 0.2"):
        check_resume_config(saved, changed, False, tmp_path, 2)


def test_sigterm_finishes_the_step_checkpoints_and_exits_without_traceback(tiny_model_dir, tmp_path):
    proc = _spawn(_overrides(tiny_model_dir, tmp_path, 500, "checkpoint.every=0"))
    _wait_for(
        lambda: (tmp_path / "metrics.jsonl").exists() and len(_steps(tmp_path / "metrics.jsonl")) >= 2, proc
    )
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "Traceback" not in err and "reasonrl: stopped by SIGTERM after step" in err
    step = int(err.split("after step ")[1].split()[0])
    assert [c.name for c in list_checkpoints(tmp_path)] == [f"step_{step:06d}"]
    assert verify_checkpoint(list_checkpoints(tmp_path)[0]) is None
    assert _steps(tmp_path / "metrics.jsonl")[-1] == step
    # the message names the checkpoint to resume from (save_state's path)
    assert f"(checkpoint {list_checkpoints(tmp_path)[0]}; continue with --resume)" in err, err[-2000:]


_WORKERS = """
import time
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rewards.sandbox.server import run_job
from reasonrl.types import Problem

run_job({"kind": "stdio", "program": "print(1)", "stdin": "", "timeout_s": 5, "memory_mb": 256})
runner = RewardRunner(workers=2, timeout_s=30)
runner.score(["\\boxed{2}"], [Problem([{"role": "user", "content": "1+1"}], "2", "math", "math", {})])
print("ready", flush=True)
time.sleep(600)
"""


def _descendants(pid):
    out, frontier = set(), {pid}
    while frontier:
        children = set()
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid in frontier:
                    children.add(int(p))
        out |= children
        frontier = children
    return out


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_sigkill_of_the_trainer_leaves_no_worker_or_sandbox_processes():
    proc = subprocess.Popen([sys.executable, "-c", _WORKERS], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    spawned = _descendants(proc.pid)
    assert len(spawned) >= 2, "expected verifier workers and a sandbox server"
    proc.kill()
    proc.wait()
    assert_all_exit(spawned)


def assert_all_exit(pids, within: float = 20.0) -> None:
    """Every process in `pids` is gone (or a zombie) within `within` seconds."""
    end = time.monotonic() + within
    alive = set(pids)
    while alive and time.monotonic() < end:
        alive = {p for p in alive if _running(p)}
        time.sleep(0.1)
    assert not alive, f"left behind: {alive}"


def test_ppo_resume_without_critic_state_is_a_clear_error(tiny_model_dir, tmp_path):
    from reasonrl.config import ConfigError

    train(_cfg(tiny_model_dir, tmp_path, 2))  # GRPO: no critic in its checkpoints
    with pytest.raises(ConfigError, match="has no critic state, but algo.adv_estimator=gae needs one"):
        train(
            _cfg(tiny_model_dir, tmp_path, 4, "algo.adv_estimator=gae"), resume=True, allow_config_change=True
        )


def test_overrides_are_accepted_after_flags(capsys):
    from reasonrl.cli.main import main

    assert main(["train", "--resume", "train.steps=7", "--print-config", "rollout.n=4"]) == 0
    out = capsys.readouterr().out
    assert "steps: 7" in out and "'n': 4" in out


@pytest.mark.parametrize("other", [{"intermediate_size": 48}, {"layers": 3}], ids=["shapes", "names"])
def test_resuming_with_another_model_is_refused_before_anything_is_loaded_or_recorded(other, tmp_path):
    """model.path changed (allowed) to a model of other shapes or other layers: a one-line error naming
    the tensors, raised before the policy is touched or the change is recorded as applied."""
    from reasonrl.config import ConfigError
    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import TinySpec, build_model, build_tokenizer, corpus

    probs = generate("arithmetic", 200, seed=0, difficulty=2, split="train")
    dirs = {}
    for name, kw in (("a", {}), ("b", other)):
        spec = TinySpec(**{"hidden_size": 32, "layers": 2, "heads": 2, "intermediate_size": 64, "vocab_size": 64,
                           **kw})  # fmt: skip
        tok = build_tokenizer(corpus(probs), spec.vocab_size)
        build_model(spec, tok).save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
        dirs[name] = str(tmp_path / name)
    run = tmp_path / "run"
    train(_cfg(dirs["a"], run, 2))
    expect = re.escape("other shapes, model.layers.0.mlp.down_proj.weight [32, 64] (model: [32, 48])")
    if "layers" in other:
        expect = re.escape("missing ['model.layers.2.")
    with pytest.raises(ConfigError, match=expect):
        train(_cfg(dirs["b"], run, 4), resume=True, allow_config_change=True)
    assert not (run / "config_changes.jsonl").exists()


def test_a_warm_up_share_of_the_run_reaches_the_optimizer(tiny_model_dir, tmp_path):
    """train.warmup_ratio=0.5 of 3 steps x 2 updates: 3 warm-up updates at 1/3, 2/3, 3/3 of lr, so the
    logged mean rates of the steps are 0.5, 1 and 1 (without the warm-up: 1, 1, 1)."""
    out = train(
        _cfg(tiny_model_dir, tmp_path, 3, "train.warmup_ratio=0.5", "train.epochs=1", "checkpoint.every=0"),
        log=lambda *a: None,
    )
    lrs = [round(r["lr"] / 1e-3, 6) for r in out["history"] if "lr" in r]
    assert lrs == [0.5, 1.0, 1.0]
