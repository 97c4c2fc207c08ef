"""The adaptive KL controller through the trainer on the tiny model: each step folds the current
coefficient into the rewards, the step's measured KL moves it (verl's rule, recomputed here from the
logged values), and a resumed run goes on with the saved coefficient."""

from __future__ import annotations

import json

import pytest
from test_async_rollouts import _interrupted_copy
from test_train_loop import _cfg, _stable

from reasonrl.algorithms.kl import adaptive_kl_coef
from reasonrl.trainer.loop import train

# (a random model earns no reward: the entropy bonus is what moves the policy off the reference)
QUIET = lambda *a: None  # noqa: E731
ON = ("algo.kl.coef=0.05", "algo.kl.in_reward=true", "algo.kl.estimator=k1", "algo.kl.target=0.001",
      "algo.kl.horizon=32", "train.lr=3e-3", "checkpoint.every=1", "algo.entropy_coef=0.01")  # fmt: skip


def test_the_coefficient_follows_the_measured_kl_and_resumes(tiny_model_dir, tmp_path):
    hist = train(_cfg(tiny_model_dir, tmp_path / "a", 4, *ON), log=QUIET)["history"]
    rows = hist[1:]
    assert rows[0]["reward/kl_coef"] == pytest.approx(0.05)
    # step 1 samples the initial policy, which is the reference: KL exactly 0 -> error clipped to -0.2,
    # x (1 - 0.2 * 16 sequences / 32) = 0.9
    assert rows[0]["reward/kl_seq_mean"] == 0.0 and rows[1]["reward/kl_coef"] == pytest.approx(0.045)
    for before, after in zip(rows, rows[1:]):  # each step's coefficient from the previous step's KL
        expected = adaptive_kl_coef(before["reward/kl_coef"], before["reward/kl_seq_mean"], 0.001, 32, 16)
        assert after["reward/kl_coef"] == pytest.approx(expected, rel=1e-9)
    # the policy moved off the reference, above the target: the coefficient grows again
    assert rows[1]["reward/kl_seq_mean"] > 0.001 and rows[2]["reward/kl_coef"] > rows[1]["reward/kl_coef"]
    state = json.loads((tmp_path / "a" / "checkpoints" / "step_000002" / "state.json").read_text())
    assert state["kl_control"]["coef"] == pytest.approx(rows[2]["reward/kl_coef"], rel=1e-12)
    run_b = _interrupted_copy(tmp_path / "a", tmp_path / "b", after_step=2)
    resumed = {r["step"]: _stable(r) for r in train(_cfg(tiny_model_dir, run_b, 4, *ON), resume=True,
                                                    log=QUIET)["history"]}  # fmt: skip
    assert resumed[3] == _stable(hist[3]) and resumed[4] == _stable(hist[4])


def test_a_fixed_coefficient_saves_no_controller_state(tiny_model_dir, tmp_path):
    fixed = tuple(o for o in ON if "target" not in o)
    hist = train(_cfg(tiny_model_dir, tmp_path / "f", 2, *fixed), log=QUIET)["history"]
    assert "reward/kl_coef" not in hist[2] and hist[2]["reward/kl_penalty"] != 0
    state = json.loads((tmp_path / "f" / "checkpoints" / "step_000002" / "state.json").read_text())
    assert "kl_control" not in state


def test_with_the_kl_as_a_loss_term_it_follows_the_updates_kl(tiny_model_dir, tmp_path):
    # (OpenRLHF's --algo.kl.use_loss with --algo.kl.target): the step's mean loss/kl moves the coefficient
    opts = ("algo.kl.coef=0.05", "algo.kl.estimator=k3", "algo.kl.target=1e-4", "algo.kl.horizon=32",
            "train.lr=3e-3", "checkpoint.every=0", "algo.entropy_coef=0.01")  # fmt: skip
    rows = train(_cfg(tiny_model_dir, tmp_path / "l", 3, *opts), log=QUIET)["history"][1:]
    assert rows[0]["actor/kl_coef"] == pytest.approx(0.05) and "reward/kl_coef" not in rows[0]
    for before, after in zip(rows, rows[1:]):  # 16 sequences a step
        expected = adaptive_kl_coef(before["actor/kl_coef"], before["loss/kl"], 1e-4, 32, 16)
        assert after["actor/kl_coef"] == pytest.approx(expected, rel=1e-6)
    assert rows[0]["loss/kl"] > 1e-4 and rows[1]["actor/kl_coef"] > 0.05  # above the target: it grew
