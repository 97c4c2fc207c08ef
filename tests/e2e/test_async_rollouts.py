"""Asynchronous rollouts (rollout.max_staleness=k): a worker process generates up to k policy versions
ahead. Checked: the schedule (versions, staleness) and overlap are logged; the run is reproducible and
an interrupted + resumed run equals the uninterrupted one (the pending batches are replayed); a worker
that raises, dies or hangs stops the trainer with an error naming the worker and its phase, the last
checkpoint intact and no process left; SIGKILL of the trainer leaves no worker behind."""

from __future__ import annotations

import gc
import json
import re
import shutil
import signal
import sys
import time
import weakref
from pathlib import Path

import pytest
import torch
from test_run_dir import _descendants, _overrides, _running, _spawn, _wait_for, assert_all_exit
from test_train_loop import _cfg, _stable

from reasonrl.config import load_config
from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
from reasonrl.trainer.loop import train
from reasonrl.trainer.rollout_source import RolloutWorkerError

pytestmark = pytest.mark.timeout(300)
ASYNC = (
    "rollout.max_staleness=1",
    "algo.off_policy.tis_cap=2.0",
    "algo.entropy_coef=0.05",
    "log.tensorboard=false",
)
HERE = str(Path(__file__).parent)


def _interrupted_copy(src: Path, dst: Path, after_step: int) -> Path:
    """A copy of the finished run `src` as if it had been interrupted after `after_step`: the checkpoints
    saved later are dropped (the one at `after_step` must exist)."""
    shutil.copytree(src, dst)
    steps = {int(c.name.rsplit("_", 1)[1]): c for c in list_checkpoints(dst)}
    assert after_step in steps, sorted(steps)
    for step, ckpt in steps.items():
        if step > after_step:
            shutil.rmtree(ckpt)
    return dst


def _watch_async_source(monkeypatch) -> tuple[list, list, list]:
    """(weak references to the async rollout sources the trainer builds, their worker processes, the
    trainer's torch threads at each `get`), filled as a run goes."""
    import reasonrl.trainer.loop as loop
    from reasonrl.trainer.rollout_source import AsyncRollouts

    sources, workers, threads = [], [], []
    build, get = loop.rollout_source, AsyncRollouts.get

    def watched_build(*args):
        source = build(*args)
        sources.append(weakref.ref(source))
        workers.append(source.proc)
        return source

    def watched_get(self, step):
        threads.append(torch.get_num_threads())
        return get(self, step)

    monkeypatch.setattr(loop, "rollout_source", watched_build)
    monkeypatch.setattr(AsyncRollouts, "get", watched_get)
    return sources, workers, threads


def test_async_schedule_is_logged_and_resume_is_exact(tiny_model_dir, tmp_path, monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the worker takes one (rollout.worker_threads) while the run lasts
    calls = _engine_calls(monkeypatch)
    sources, workers, threads = _watch_async_source(monkeypatch)
    try:
        full = train(_cfg(tiny_model_dir, tmp_path / "a", 5, *ASYNC))["history"]
        # the trainer has its threads back after the run (a synchronous run after an asynchronous one
        # in the same process once trained on one thread)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    rows = {r["step"]: r for r in full}
    gc.collect()  # the closed source is not kept (its exit hook, which holds the run, is unregistered)
    assert len(sources) == 1 and sources[0]() is None
    assert workers[0].exitcode == 0  # told to stop, not killed
    assert threads == [1] * 5  # the trainer trained on the cores the worker (one thread) left it
    # the trainer's own engine (validation samples it) follows every update too
    assert [c for c in calls if isinstance(c, int)] == [1, 2, 3, 4, 5]
    # each checkpoint's sampler position is past the batches asked for by then: at 4, step 5's batch is
    # pending and its position is saved with it; at 5 nothing is pending and the position is the
    # trainer's own sampler's, which must follow the batches it trains on (the worker draws them)
    saved = {int(c.name.rsplit("_", 1)[1]): json.loads((c / "state.json").read_text())["sampler"]
             for c in list_checkpoints(tmp_path / "a")}  # fmt: skip
    assert sorted(saved) == [2, 4, 5] and saved[5] == saved[4] != saved[2]
    # step s samples policy max(0, s - 2): one version stale once the pipeline is full
    assert [rows[s]["rollout/policy_version"] for s in range(1, 6)] == [0, 0, 1, 2, 3]
    assert [rows[s]["rollout/staleness"] for s in range(1, 6)] == [0, 1, 1, 1, 1]
    for s in range(1, 6):
        r = rows[s]
        # the wait is part of the step's generation phase, and the overlap is the share of the worker's
        # time that the wait did not cost
        assert 0.0 <= r["perf/rollout_wait_seconds"] <= r["perf/generate_seconds"]
        hidden = 1.0 - r["perf/rollout_wait_seconds"] / r["perf/rollout_worker_seconds"]
        assert r["perf/rollout_worker_seconds"] > 0 and r["perf/rollout_overlap"] == pytest.approx(
            min(1.0, max(0.0, hidden))
        )
        assert rows[s]["actor/is_weight_mean"] > 0  # the off-policy correction is applied
    # step 1 is on-policy (the gap is numerical noise); stale steps show the policy moved since
    assert rows[1]["rollout/logprob_gap_max"] < 1e-4
    assert rows[3]["rollout/logprob_gap_mean"] > 1e-4
    again = train(_cfg(tiny_model_dir, tmp_path / "a2", 5, *ASYNC))["history"]
    assert [_stable(r) for r in again] == [_stable(r) for r in full]  # versions fixed by the step, not timing
    # interrupted after step 2: the full run's checkpoint at 2 holds the batches already asked for
    # (steps 3 and 4, from policies 1 and 2); resuming from it replays them
    run_b = _interrupted_copy(tmp_path / "a", tmp_path / "b", after_step=2)
    resumed = {
        r["step"]: _stable(r) for r in train(_cfg(tiny_model_dir, run_b, 5, *ASYNC), resume=True)["history"]
    }
    for step in (3, 4, 5):
        assert resumed[step] == _stable(rows[step]), step


def test_async_resume_with_dropout_restores_the_trainers_random_state(tiny_model_dir, tmp_path, monkeypatch):
    """Attention dropout draws from the trainer's torch generator in every update, and with a rollout
    worker nothing reseeds it between steps (a synchronous HF rollout seeds it for each step's sampling):
    the resumed run equals the uninterrupted one because the checkpoint's random state is restored."""
    from transformers import AutoConfig

    import reasonrl.trainer.state as state

    model = tmp_path / "dropout_model"
    shutil.copytree(tiny_model_dir, model)
    config = AutoConfig.from_pretrained(model)
    config.attention_dropout = 0.3
    config.save_pretrained(model)
    live = (*ASYNC, "model.disable_dropout=false")  # (on by default: dropout off for training)
    full = {r["step"]: _stable(r) for r in train(_cfg(model, tmp_path / "a", 4, *live))["history"]}

    def resumed(run_dir):  # interrupted after step 2 (checkpoints every 2 steps)
        _interrupted_copy(tmp_path / "a", run_dir, after_step=2)
        return {r["step"]: _stable(r) for r in train(_cfg(model, run_dir, 4, *live), resume=True)["history"]}

    again = resumed(tmp_path / "b")
    assert [again[s] for s in (3, 4)] == [full[s] for s in (3, 4)]
    monkeypatch.setattr(state, "set_rng_state", lambda rng: None)  # the restore left out: other masks
    other = resumed(tmp_path / "c")
    assert other[3]["loss/total"] != full[3]["loss/total"]
    assert other[3]["grad_norm"] != full[3]["grad_norm"]


def test_async_worker_samples_a_lora_policy_with_merged_weights(tiny_model_dir, tmp_path):
    """The worker's plain model gets W + scale * B @ A under HF names (before: peft's names did not load)."""
    rows = train(_cfg(tiny_model_dir, tmp_path / "l", 3, *ASYNC, "model.lora.rank=4", "train.lr=1e-2"))[
        "history"
    ]
    assert [r["rollout/policy_version"] for r in rows[1:]] == [0, 0, 1]
    assert rows[1]["rollout/logprob_gap_max"] < 1e-4  # the worker samples exactly the trainer's policy
    assert rows[3]["rollout/logprob_gap_mean"] > 1e-4  # one update later the adapters have moved it


def _engine_calls(monkeypatch) -> list:
    """The trainer's rollout engine's wake / sleep / generate calls and the versions it is synced to,
    in order (an engine holding its own weights, vLLM, is stale without the syncs, and a sleeping
    one has no memory to generate in; the HF engine ignores both, so only the calls show them)."""
    from reasonrl.rollout.hf import HFRolloutEngine

    calls = []
    for name in ("wake", "sleep", "generate", "sync_weights"):
        original = getattr(HFRolloutEngine, name)

        def spy(self, *a, _original=original, _name=name, **kw):
            calls.append(a[1] if _name == "sync_weights" else _name)
            return _original(self, *a, **kw)

        monkeypatch.setattr(HFRolloutEngine, name, spy)
    return calls


def _awake_only_to_generate(calls: list) -> bool:
    """Every generate call while the engine is awake, every sync (after an update) while it sleeps."""
    awake = False
    for c in calls:
        awake = {"wake": True, "sleep": False}.get(c, awake) if isinstance(c, str) else awake
        if (c == "generate" and not awake) or (isinstance(c, int) and awake):
            return False
    return True


def test_max_staleness_zero_is_the_synchronous_loop(tiny_model_dir, tmp_path, monkeypatch):
    sync = train(_cfg(tiny_model_dir, tmp_path / "s", 3, "algo.off_policy.tis_cap=2.0"))["history"]
    calls = _engine_calls(monkeypatch)
    zero = train(
        _cfg(tiny_model_dir, tmp_path / "z", 3, "algo.off_policy.tis_cap=2.0", "rollout.max_staleness=0")
    )["history"]
    assert [_stable(r) for r in zero] == [_stable(r) for r in sync]
    assert [r["rollout/policy_version"] for r in sync[1:]] == [0, 1, 2]
    assert "rollout/staleness" not in sync[1]
    # the engine is synced after every update (asleep: the update had the memory), and generates only
    # while awake
    assert [c for c in calls if isinstance(c, int)] == [1, 2, 3]
    assert calls.count("generate") >= 3 and _awake_only_to_generate(calls)


def test_async_needs_the_off_policy_correction(tiny_model_dir, tmp_path):
    from reasonrl.config import ConfigError

    with pytest.raises(ConfigError, match="algo.off_policy.tis_cap"):
        load_config(None, [f"model.path={tiny_model_dir}", "rollout.max_staleness=1"])


@pytest.mark.parametrize(
    "flags, whole",
    [
        ((), False),
        (("algo.dynamic_sampling.enabled=true",), True),
        (("data.curriculum.enabled=true",), True),
        (("algo.dynamic_sampling.enabled=true", "data.curriculum.enabled=true"), True),
    ],
)
def test_the_ranks_workers_share_a_step_for_dynamic_sampling_or_the_curriculum(tiny_model_dir, flags, whole):
    """Each alone decides on the whole step (refill rounds; levels), so either makes the ranks' workers form
    their group (the 2-rank test in test_fsdp2_train enables both at once)."""
    from reasonrl.trainer.rollout_source import decides_on_whole_step

    assert decides_on_whole_step(load_config(None, [f"model.path={tiny_model_dir}", *flags])) is whole


@pytest.mark.parametrize(
    "how, expect",
    [
        ("raise", r"rollout worker \(pid \d+\) failed while generating step 3 from policy 1: RuntimeError: planted"),
        ("die", r"rollout worker \(pid \d+\) died with exit code 3 while generating step 3 from policy 1"),
        ("hang", r"rollout worker \(pid \d+\) hung: nothing for the rollouts of step 3 \(checkpoint\) within 4s "
                 r"\(rollout.worker_timeout_s=4\); its phase: generating step 3 from policy 1"),
    ],
)  # fmt: skip
def test_failing_worker_stops_the_run_naming_worker_and_phase(tiny_model_dir, tmp_path, how, expect,
                                                              monkeypatch):  # fmt: skip
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    monkeypatch.syspath_prepend(HERE)  # the plugin module, for this process and the spawned worker
    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))  # undone afterwards
    monkeypatch.delitem(sys.modules, "faulty_engines", raising=False)  # registers again into the copy
    run = tmp_path / "run"
    cfg = _cfg(tiny_model_dir, run, 5, *ASYNC, "plugins=[faulty_engines]", "rollout.engine=faulty",
               f"rollout.engine_kwargs={{fail_at: 3, how: {how}}}", "rollout.worker_timeout_s=4")  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(RolloutWorkerError, match=expect) as err:
        train(cfg)
    assert time.monotonic() - t0 < 120
    pid = int(re.search(r"pid (\d+)", str(err.value)).group(1))
    assert not _running(pid)  # the worker is gone (killed when it hung)
    # step 3's rollouts never came (the step-2 checkpoint waited for them, then was written without
    # them): nothing after step 2 was written, and that checkpoint verifies
    ckpts = list_checkpoints(run)
    assert [c.name for c in ckpts] == ["step_000002"] and verify_checkpoint(ckpts[0]) is None
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]


def test_a_worker_that_cannot_start_stops_the_run_before_step_one(tiny_model_dir, tmp_path, monkeypatch):
    """The worker's engine cannot be built: the run stops naming the worker and its start-up phase,
    with the worker gone and nothing trained (only step 0's validation logged)."""
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    monkeypatch.syspath_prepend(HERE)
    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))
    monkeypatch.delitem(sys.modules, "faulty_engines", raising=False)
    run = tmp_path / "run"
    cfg = _cfg(tiny_model_dir, run, 3, *ASYNC, "plugins=[faulty_engines]", "rollout.engine=faulty",
               "rollout.engine_kwargs={fail_at: 0}")  # fmt: skip
    with pytest.raises(RolloutWorkerError, match=r"rollout worker \(pid \d+\) failed while starting: "
                                                 r"RuntimeError: planted start-up failure") as err:  # fmt: skip
        train(cfg)
    pid = int(re.search(r"pid (\d+)", str(err.value)).group(1))
    assert not _running(pid)
    assert list_checkpoints(run) == []
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [0]


def test_sigkill_of_an_async_trainer_leaves_no_worker_and_resumes(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    proc = _spawn(_overrides(tiny_model_dir, run, 6, *ASYNC[:2]))
    _wait_for(lambda: (run / "checkpoints" / "step_000002" / "complete.json").exists(), proc)
    spawned = _descendants(proc.pid)
    assert spawned, "expected a rollout worker process"
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert_all_exit(spawned)
    res = _spawn(_overrides(tiny_model_dir, run, 6, *ASYNC[:2]), "--resume")
    out, err = res.communicate(timeout=240)
    assert res.returncode == 0, err[-2000:]
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(7))


def test_a_verifier_failing_under_async_rollouts_stops_the_run_and_its_worker(tiny_model_dir, tmp_path,
                                                                            monkeypatch):  # fmt: skip
    """The worker process scores with a plugin verifier whose service is down (a flag file): the trainer
    warns at step 1, stops before step 2's update naming it, and the worker is gone."""
    from reasonrl.data.schema import write_problems
    from reasonrl.trainer.verifier_watch import VerifierFailing
    from reasonrl.types import Problem

    monkeypatch.syspath_prepend(HERE)  # the plugin module, for this process and the spawned worker
    down = tmp_path / "down"
    down.touch()
    problems = [Problem([{"role": "user", "content": f"{i} + 1 = ?"}], "x", "parity_test", "x",
                        {"index": i, "down_if": str(down)}, verifier="parity_unless_down", uid=f"p{i}")
                for i in range(64)]  # fmt: skip
    write_problems(tmp_path / "train.jsonl", problems)
    _, workers, _ = _watch_async_source(monkeypatch)
    logs = []
    cfg = _cfg(tiny_model_dir, tmp_path / "run", 5, *ASYNC, "plugins=[parity_verifier]", "reward.error_patience=2",
               f"data.train_files=[{tmp_path / 'train.jsonl'}]")  # fmt: skip
    with pytest.raises(VerifierFailing, match=r"^verifier 'parity_unless_down' failed on 100% of its calls \(e.g. "
                                              r"'error: ConnectionError: the parity service is down'\), above "
                                              r"reward.max_error_rate=0.5 for 2 steps in a row \(steps 1-2\)"):  # fmt: skip
        train(cfg, log=logs.append)
    assert [x for x in logs if str(x).startswith("warning: step 1: verifier 'parity_unless_down'")]
    assert len(workers) == 1 and not _running(workers[0].pid)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]  # step 1 trained (patience 2), step 2 did not
