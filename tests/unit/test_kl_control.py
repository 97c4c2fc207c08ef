"""The adaptive KL controller (Ziegler et al. 2019; verl's kl_ctrl.type=adaptive): the pure update,
its state across a run, the trainer folding the current coefficient into the rewards and feeding it
the step's per-sequence KL, the config checks and the conversion of verl's settings."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import yaml
from test_trainer_step import _batch

from reasonrl.algorithms.kl import adaptive_kl_coef
from reasonrl.config import AlgoConfig, ConfigError, KLConfig, load_config
from reasonrl.config.foreign import convert
from reasonrl.trainer.kl_control import KLControl
from reasonrl.trainer.step import compute_advantages, make_loss_fn, sequence_kl


@pytest.mark.parametrize(
    "kl,expected",
    [
        (0.15, 0.1 * (1 + 0.2 * 100 / 1000)),  # 0.15 / 0.1 - 1 = 0.5, clipped to 0.2: x1.02
        (0.11, 0.1 * (1 + 0.1 * 100 / 1000)),  # error 0.1 (inside the clip): x1.01
        (0.10, 0.1),  # on target: unchanged
        (0.09, 0.1 * (1 - 0.1 * 100 / 1000)),  # below: shrinks by the same rule
        (0.0, 0.1 * (1 - 0.2 * 100 / 1000)),  # error -1, clipped to -0.2: x0.98
    ],
)
def test_adaptive_coef_hand_computed(kl, expected):
    assert adaptive_kl_coef(0.1, kl, target=0.1, horizon=1000, n=100) == pytest.approx(expected, rel=1e-12)


def test_adaptive_coef_scales_with_the_sequences_seen_and_refuses_no_target():
    # twice the sequences in one call: twice the relative move (1 + 0.2 * 200 / 1000)
    assert adaptive_kl_coef(0.5, 1.0, 0.1, 1000, 200) == pytest.approx(0.5 * 1.04)
    assert adaptive_kl_coef(0.1, 1.0, 0.1, 1, 1) == pytest.approx(0.12)  # the shortest horizon, 1, is fine
    for target, horizon in ((0.0, 1000), (0.1, 0)):
        with pytest.raises(ValueError, match="target > 0 and horizon > 0"):
            adaptive_kl_coef(0.1, 0.1, target, horizon, 10)


def _algo(target: float) -> AlgoConfig:
    return AlgoConfig(adv_estimator="grpo", adv_kwargs={"scale_by_std": False},
                      kl=KLConfig(coef=0.1, estimator="k1", in_reward=True, target=target, horizon=4))  # fmt: skip


def _kl_batch():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    b.old_logprobs = torch.tensor([[-1.0, -1.0], [-1.0, -9.0]])
    b.ref_logprobs = torch.tensor([[-1.5, -2.0], [-0.5, 0.0]])  # k1: row 0 [0.5, 1.0], row 1 [-0.5] (+ pad)
    return b


def test_the_trainer_folds_the_controllers_coefficient_then_updates_it():
    algo = _algo(target=0.1)
    control = KLControl(algo)
    control.coef = 0.2  # (as after earlier steps): the rewards use this, not algo.kl.coef
    b = _kl_batch()
    m = compute_advantages(b, algo, kl_control=control)
    # r' = r - 0.2 * sum kl: row 0 1 - 0.3 = 0.7, row 1 0 + 0.1 = 0.1; mean 0.4 -> A = [0.3, -0.3]
    torch.testing.assert_close(b.advantages, torch.tensor([[0.3, 0.3], [-0.3, 0.0]]), rtol=1e-5, atol=1e-7)
    # per-sequence means 0.75 and -0.5 (the pad token is not counted): 0.125 over 2 sequences
    assert m["reward/kl_seq_mean"] == pytest.approx(0.125) and m["reward/kl_coef"] == pytest.approx(0.2)
    # 0.125 / 0.1 - 1 = 0.25 -> 0.2; x (1 + 0.2 * 2 / 4) = 1.1
    assert control.coef == pytest.approx(0.22)
    state = control.state_dict()
    fresh = KLControl(algo)
    assert fresh.coef == pytest.approx(0.1)
    fresh.load_state_dict(state)
    assert fresh.coef == pytest.approx(0.22)


def test_the_measured_kl_is_the_mean_of_each_sequences_token_mean():
    kl = torch.tensor([[0.3, 0.1, 9.0], [0.6, 9.0, 9.0], [0.0, 0.2, 0.4], [9.0, 9.0, 9.0]])
    mask = torch.tensor(
        [[True, True, False], [True, False, False], [True, True, True], [False, False, False]]
    )
    # per sequence 0.2, 0.6, 0.2, and 0 for the row with no token (still a sequence): (0.2 + 0.6 + 0.2) / 4
    mean, sequences = sequence_kl(kl, mask)
    assert mean == pytest.approx(0.25) and sequences == 4
    assert sequence_kl(kl[:1], mask[:1]) == (pytest.approx(0.2), 1)  # one sequence


def test_a_fixed_coefficient_never_moves_and_logs_no_controller_metrics():
    algo = _algo(target=0.0)
    control = KLControl(algo)
    b = _kl_batch()
    m = compute_advantages(b, algo, kl_control=control)
    assert control.coef == 0.1 and not control.adaptive
    assert "reward/kl_coef" not in m and "reward/kl_seq_mean" not in m
    plain = _kl_batch()
    compute_advantages(plain, algo)  # no controller: algo.kl.coef, the same advantages
    assert torch.equal(plain.advantages, b.advantages)
    # the loss-side KL is not steered: a controller beside it has nothing to update
    loss_side = dataclasses.replace(algo, kl=KLConfig(coef=0.1))
    assert "reward/kl_penalty" not in compute_advantages(
        _kl_batch(), loss_side, kl_control=KLControl(loss_side)
    )


def test_with_the_kl_as_a_loss_term_the_updates_measured_kl_moves_it():
    algo = dataclasses.replace(_algo(target=0.1), kl=KLConfig(coef=0.1, target=0.1, horizon=4))
    control = KLControl(algo)
    # two updates measured 0.2 and 0.1 (a third was early-stopped: no loss/kl): mean 0.15 over 2 sequences
    out = control.after_updates(
        [{"loss/kl": torch.tensor(0.2)}, {"loss/kl": 0.1}, {"grad_norm": 1.0}], rows=2
    )
    assert out == {"actor/kl_coef": pytest.approx(0.1)}  # the coefficient the updates used
    assert control.coef == pytest.approx(0.1 * (1 + 0.2 * 2 / 4))  # error 0.5, clipped to 0.2
    control.after_updates([{"grad_norm": 1.0}], rows=2)  # every update early-stopped: nothing measured
    assert control.coef == pytest.approx(0.11)
    # in the reward the step's advantages update it instead; a fixed one never moves
    assert KLControl(_algo(target=0.1)).after_updates([{"loss/kl": 9.0}], 2) == {}
    fixed = KLControl(dataclasses.replace(algo, kl=KLConfig(coef=0.1)))
    assert fixed.after_updates([{"loss/kl": 9.0}], 2) == {} and fixed.coef == 0.1


def test_the_loss_takes_the_controllers_coefficient():
    b = _kl_batch()
    b.advantages = torch.tensor([[1.0, 1.0], [-1.0, 0.0]])
    b.ref_logprobs = b.old_logprobs - 0.5  # k1 = 0.5 on every token
    algo = AlgoConfig(kl=KLConfig(coef=0.1, estimator="k1", target=0.1))
    logprobs = b.old_logprobs.clone()
    base, m = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, logprobs, None)
    moved, _ = make_loss_fn(algo, b.mask.sum(), 2, 2, kl_coef=0.3)(b, logprobs, None)
    assert float(m["loss/kl"]) == pytest.approx(0.5)
    assert float(moved - base) == pytest.approx((0.3 - 0.1) * 0.5)  # only the KL term's weight changed


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["algo.kl.target=0.1"], "needs a starting algo.kl.coef > 0"),
        (["algo.kl.coef=0.01", "algo.kl.in_reward=true", "algo.kl.target=-1"], "algo.kl.target must be >= 0"),
        (["algo.kl.coef=0.01", "algo.kl.in_reward=true", "algo.kl.horizon=0"], "algo.kl.horizon > 0"),
    ],
)
def test_bad_controller_settings_name_the_key(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)


def test_verl_adaptive_kl_ctrl_converts(tmp_path):
    script = tmp_path / "run.sh"
    base = ("python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
            "actor_rollout_ref.rollout.n=4 algorithm.use_kl_in_reward=True algorithm.kl_ctrl.kl_coef=0.002 ")  # fmt: skip
    script.write_text(base + "algorithm.kl_ctrl.type=adaptive algorithm.kl_ctrl.target_kl=0.05 "
                      "algorithm.kl_ctrl.horizon=5000\n")  # fmt: skip
    out = convert("verl", script)
    kl = out.recipe["algo"]["kl"]
    assert (kl["coef"], kl["in_reward"], kl["target"], kl["horizon"]) == (0.002, True, 0.05, 5000)
    assert "kl_ctrl" not in "\n".join(out.notes)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    cfg = load_config(recipe, ["rollout.engine=hf"])
    assert (cfg.algo.kl.target, cfg.algo.kl.horizon) == (0.05, 5000)
    script.write_text(base + "algorithm.kl_ctrl.type=adaptive\n")  # verl's defaults: 0.1 and 10000
    kl = convert("verl", script).recipe["algo"]["kl"]
    assert (kl["target"], kl["horizon"]) == (0.1, 10000)
    script.write_text(base + "algorithm.kl_ctrl.type=fixed algorithm.kl_ctrl.target_kl=0.05\n")
    out = convert("verl", script)  # verl reads target_kl only for the adaptive controller
    assert "target" not in out.recipe["algo"]["kl"]
    assert "algorithm.kl_ctrl.target_kl=0.05: no reasonrl equivalent" in "\n".join(out.notes)
    script.write_text(base + "algorithm.kl_ctrl.type=pid\n")
    assert (
        "algorithm.kl_ctrl.type='pid' (verl knows fixed and adaptive): left fixed"
        in convert("verl", script).notes
    )
    # beside the KL loss verl uses no controller: its settings are read, not converted, not noted
    script.write_text(base.replace("use_kl_in_reward=True", "use_kl_in_reward=False")
                      + "actor_rollout_ref.actor.use_kl_loss=True algorithm.kl_ctrl.type=adaptive algorithm.kl_ctrl.horizon=9\n")  # fmt: skip
    out = convert("verl", script)
    assert "target" not in out.recipe["algo"]["kl"] and "kl_ctrl" not in "\n".join(out.notes)
