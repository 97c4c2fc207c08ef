"""PPO's critic warm-up (algo.critic.warmup_steps; verl's trainer.critic_warmup, OpenRLHF's
critic.freezing_steps): for the first N steps the critic trains and the policy does not move at all (its
checkpoints are the starting weights, bit for bit); after them both train; a run resumed inside the
warm-up goes on exactly as the uninterrupted one."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file
from test_async_rollouts import _interrupted_copy
from test_train_loop import _cfg, _stable

from reasonrl.trainer.loop import train

QUIET = lambda *a: None  # noqa: E731
PPO = ("algo.adv_estimator=gae", "algo.critic.warmup_steps=2", "algo.entropy_coef=0.01", "checkpoint.every=1")


def _policy(run: Path, step: int) -> dict:
    return load_file(str(run / "checkpoints" / f"step_{step:06d}" / "model.safetensors"))


def test_the_policy_waits_while_the_critic_warms_up(tiny_model_dir, tmp_path):
    run = tmp_path / "a"
    hist = train(_cfg(tiny_model_dir, run, 3, *PPO), log=QUIET)["history"]
    start = load_file(str(Path(tiny_model_dir) / "model.safetensors"))
    for step in (1, 2):  # frozen: not one weight of the policy changed, while the critic learned
        weights = _policy(run, step)
        assert weights.keys() == start.keys()
        assert all(bool((weights[k] == start[k]).all()) for k in start), step
        row = hist[step]
        assert row["actor/frozen"] == 1.0 and "loss/policy" not in row and "actor/entropy" not in row
        assert row["loss/value"] > 0 and row["critic/grad_norm"] > 0
    moved = _policy(run, 3)  # then the policy trains too
    assert max((moved[k] - start[k]).abs().max().item() for k in start) > 1e-4
    assert hist[3]["actor/frozen"] == 0.0 and "loss/policy" in hist[3] and hist[3]["critic/grad_norm"] > 0
    # the critic's values moved between the steps: its loss is not the same number twice
    assert len({hist[s]["loss/value"] for s in (1, 2, 3)}) == 3
    # interrupted inside the warm-up and resumed: the remaining steps as in the uninterrupted run
    run_b = _interrupted_copy(run, tmp_path / "b", after_step=1)
    resumed = {r["step"]: _stable(r) for r in train(_cfg(tiny_model_dir, run_b, 3, *PPO), resume=True,
                                                    log=QUIET)["history"]}  # fmt: skip
    assert resumed[2] == _stable(hist[2]) and resumed[3] == _stable(hist[3])


def test_without_warm_up_the_policy_trains_from_the_first_step(tiny_model_dir, tmp_path):
    on = tuple(o for o in PPO if "warmup" not in o)
    hist = train(_cfg(tiny_model_dir, tmp_path / "n", 1, *on), log=QUIET)["history"]
    assert "loss/policy" in hist[1] and "actor/frozen" not in hist[1]
    start = load_file(str(Path(tiny_model_dir) / "model.safetensors"))
    moved = _policy(tmp_path / "n", 1)
    assert max((moved[k] - start[k]).abs().max().item() for k in start) > 1e-4


def test_the_critic_follows_model_gradient_checkpointing(tiny_model_dir, tmp_path):
    """The critic is a second whole backbone: model.gradient_checkpointing recomputes its activations too,
    with the same update (loss and gradient norm) as without."""
    import torch

    from reasonrl.trainer.batching import build_batch
    from reasonrl.trainer.critic import build_critic
    from reasonrl.types import Completion, Problem, RolloutGroup

    def one_update(*extra):
        torch.manual_seed(0)  # the same fresh value head for both
        critic = build_critic(_cfg(tiny_model_dir, tmp_path, 1, "algo.adv_estimator=gae", *extra), log=QUIET)
        comps = [Completion([5, 6, 7][: n + 1], "x", [-0.5] * (n + 1), "stop") for n in range(3)]
        problem = Problem([{"role": "user", "content": "q"}], "1", "arith", uid="q")
        batch = build_batch([RolloutGroup(problem, [7, 8, 9], comps, [1.0, 0.0, 1.0], [{}] * 3)], pad_id=0)
        batch.returns = torch.where(batch.mask, 1.0, 0.0)
        batch.values = critic.values(batch, 2)
        return critic, critic.train_step(batch, 2, 0.2)

    plain, a = one_update()
    ckpt, b = one_update("model.gradient_checkpointing=true")
    assert ckpt.model.is_gradient_checkpointing and not plain.model.is_gradient_checkpointing
    for key in ("loss/value", "critic/grad_norm"):
        assert float(b[key]) == pytest.approx(float(a[key]), rel=1e-5) and float(a[key]) > 0, key
