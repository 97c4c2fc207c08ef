"""The reference model moved to the policy every `algo.kl.ref_sync_steps` (ProRL's reset, TRL's
sync_ref_model): the KL term restarts from 0 after each reset, a mixed sync lands between the two models,
the synced reference is saved and comes back on resume (a trainer killed with SIGKILL resumes to exactly
the uninterrupted run's metrics), and the settings that cannot work are refused when the recipe loads."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch
from test_mixture_resume import _env, kill_after_checkpoint_and_resume
from test_train_loop import _cfg, _overrides, _stable

from reasonrl.config import ConfigError, load_config
from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.engines.single import SingleDeviceEngine
from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(600)
# one update per step (the KL at a step is then that of the policy at the step's start), a policy that moves
ONE_UPDATE = ("algo.kl.coef=0.01", "algo.entropy_coef=0.05", "train.epochs=1", "train.mini_batch=16",
              "train.lr=1e-2")  # fmt: skip


def test_the_kl_restarts_from_zero_after_each_reset(tiny_model_dir, tmp_path):
    hist = train(_cfg(tiny_model_dir, tmp_path / "r", 4, *ONE_UPDATE, "algo.kl.ref_sync_steps=2",
                      "checkpoint.every=0"), log=lambda *a: None)["history"]  # fmt: skip
    kl = [row["loss/kl"] for row in hist[1:]]
    # step 1: the policy is the initial reference; step 3: the reference is the policy after step 2
    assert kl[0] < 1e-6 and kl[2] < 1e-6, kl
    assert kl[1] > 1e-3 and kl[3] > 1e-3, kl
    assert [row["actor/ref_synced"] for row in hist[1:]] == [0.0, 1.0, 0.0, 1.0]
    plain = train(_cfg(tiny_model_dir, tmp_path / "p", 3, *ONE_UPDATE, "checkpoint.every=0"),
                  log=lambda *a: None)["history"]  # fmt: skip
    assert plain[3]["loss/kl"] > 1e-3  # without the reset the KL at step 3 is the accumulated drift
    assert "actor/ref_synced" not in plain[3]


def test_a_mixed_sync_is_the_weighted_average_and_makes_the_reference_part_of_the_state(
    tiny_model_and_tokenizer,
):
    model = copy.deepcopy(tiny_model_and_tokenizer[0])  # the fixture is shared: this test moves weights
    ref = copy.deepcopy(model).requires_grad_(False)
    engine = SingleDeviceEngine(model, lr=1e-3, ref_model=ref)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)  # the policy moved
    before = {k: v.clone() for k, v in ref.state_dict().items()}
    assert "reference" not in engine.state_dict()  # never synced: nothing extra saved
    engine.sync_reference(0.6)
    policy = model.state_dict()
    for name, p in ref.named_parameters():
        assert torch.allclose(p, 0.6 * policy[name] + 0.4 * before[name], atol=1e-6), name
    saved = engine.state_dict()
    engine.sync_reference(1.0)
    assert all(torch.equal(p, policy[n]) for n, p in ref.named_parameters())
    engine.load_state_dict(saved)  # a resume puts the saved reference back
    assert all(torch.equal(p, saved["reference"][n]) for n, p in ref.named_parameters())


def test_a_trainer_killed_after_a_reset_resumes_with_that_reference(tiny_model_dir, tmp_path):
    # resets after steps 2 and 4, checkpoints at 3 and 6: the checkpoint at step 3 holds a reference that is
    # neither the initial model nor the policy; a resume that lost it would measure another KL at step 4
    steps = 6
    args = (*ONE_UPDATE, "algo.kl.ref_sync_steps=2", "checkpoint.every=3", "val.every=0")
    base = [sys.executable, "-m", "reasonrl.cli.main", "train"]
    res = subprocess.run([*base, *_overrides(tiny_model_dir, tmp_path / "full", steps, *args)],
                         capture_output=True, text=True, timeout=400, env=_env())  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    rows = {r["step"]: _stable(r) for r in map(json.loads, (tmp_path / "full" / "metrics.jsonl").open())}
    run = tmp_path / "killed"

    def saved_reference():  # synced at step 2, so the checkpoint of step 3 holds it
        assert list_checkpoints(run)[-1].name == "step_000003"
        assert "reference" in torch.load(
            run / "checkpoints" / "step_000003" / "engine.pt", weights_only=False
        )

    cmd = [*base, *_overrides(tiny_model_dir, run, steps, *args)]
    resumed = kill_after_checkpoint_and_resume(cmd, run, 3, steps, check=saved_reference)
    for r in resumed:
        assert _stable(r) == rows[r["step"]], r["step"]
    assert rows[4]["loss/kl"] > 1e-4  # the step the saved reference decides


def test_a_reset_optimizer_is_a_new_optimizer(tiny_model_and_tokenizer):
    model = copy.deepcopy(tiny_model_and_tokenizer[0])  # the fixture is shared: this test moves weights
    engine = SingleDeviceEngine(model, lr=1e-2, ref_model=copy.deepcopy(model).requires_grad_(False))
    params = [p for p in model.parameters() if p.requires_grad]
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(p.shape, generator=g) for p in params]

    def step():
        for p, gr in zip(params, grads):
            p.grad = gr.clone()
        engine.optimizer.step()

    step()
    step()
    assert all(
        float(s["exp_avg"].abs().sum()) > 0 and float(s["step"]) == 2 for s in engine.optimizer.state.values()
    )
    engine.reset_optimizer()
    fresh = SingleDeviceEngine(copy.deepcopy(model), lr=1e-2)
    step()
    own = [p.detach().clone() for p in params]
    for p, gr in zip([p for p in fresh.model.parameters() if p.requires_grad], grads):
        p.grad = gr.clone()
    fresh.optimizer.step()
    # a first Adam step moves every weight by about lr; a reset one moves exactly as a fresh optimizer's
    theirs = [p.detach() for p in fresh.model.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(own, theirs))
    assert all(float(s["step"]) == 1 for s in engine.optimizer.state.values())


def test_the_optimizer_restarts_with_the_reference_and_resumes(tiny_model_dir, tmp_path, monkeypatch):
    from test_async_rollouts import _interrupted_copy

    quiet = lambda *a: None  # noqa: E731
    reset = (*ONE_UPDATE, "algo.kl.ref_sync_steps=2", "algo.kl.ref_sync_reset_optimizer=true")
    calls, real = [], SingleDeviceEngine.reset_optimizer

    def spy(engine):
        real(engine)
        calls.append(
            all(float(v.abs().sum()) == 0 for s in engine.optimizer.state.values() for v in s.values())
        )

    monkeypatch.setattr(SingleDeviceEngine, "reset_optimizer", spy)
    hist = train(_cfg(tiny_model_dir, tmp_path / "a", 4, *reset, "checkpoint.every=1"), log=quiet)["history"]
    assert calls == [True, True]  # after steps 2 and 4, each leaving a zero (fresh) state
    plain = train(_cfg(tiny_model_dir, tmp_path / "p", 4, *ONE_UPDATE, "algo.kl.ref_sync_steps=2",
                       "checkpoint.every=0"), log=quiet)["history"]  # fmt: skip
    # the same run up to step 3's gradient (taken before its update); its update restarts Adam, so step 4
    # starts from other weights
    assert [_stable(r) for r in hist[:3]] == [_stable(r) for r in plain[:3]]
    assert hist[3]["grad_norm"] == plain[3]["grad_norm"] and hist[4]["loss/kl"] != plain[4]["loss/kl"]
    # interrupted after step 2 (its checkpoint holds the restarted optimizer): the same steps 3 and 4
    run_b = _interrupted_copy(tmp_path / "a", tmp_path / "b", after_step=2)
    resumed = {r["step"]: _stable(r) for r in train(_cfg(tiny_model_dir, run_b, 4, *reset), resume=True,
                                                    log=quiet)["history"]}  # fmt: skip
    assert resumed[3] == _stable(hist[3]) and resumed[4] == _stable(hist[4])


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["algo.kl.ref_sync_steps=2"], "only exists with algo.kl.coef > 0"),
        (["algo.kl.coef=0.1", "algo.kl.ref_sync_steps=-1"], "algo.kl.ref_sync_steps must be >= 0"),
        (
            ["algo.kl.coef=0.1", "algo.kl.ref_sync_steps=2", "algo.kl.ref_sync_alpha=0"],
            "ref_sync_alpha in (0, 1]",
        ),
        (
            ["algo.kl.coef=0.1", "algo.kl.ref_sync_steps=2", "model.lora.rank=4"],
            "not supported with model.lora",
        ),
        (
            ["algo.kl.coef=0.1", "algo.kl.ref_sync_reset_optimizer=true"],
            "it needs algo.kl.ref_sync_steps > 0",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused(extra, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, extra)
    assert needle in str(e.value)
