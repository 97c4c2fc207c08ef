"""Adaptive entropy control through the trainer on the tiny model: the coefficient moves once per
optimizer update, the bonus waits for a measurement at or below the target, and a resumed run goes on
with the saved coefficient."""

from __future__ import annotations

import json

import pytest
from test_async_rollouts import _interrupted_copy
from test_train_loop import _cfg, _stable

from reasonrl.trainer.loop import train

QUIET = lambda *a: None  # noqa: E731
ON = ("algo.entropy_control.enabled=true", "algo.entropy_coef=0.01", "algo.entropy_control.delta=0.005")


def test_below_the_target_the_coefficient_rises_each_update_and_resumes(tiny_model_dir, tmp_path):
    # the tiny model's entropy is a few nats: all of it is below a target of 50
    opts = (*ON, "algo.entropy_control.target=50", "checkpoint.every=1")
    hist = train(_cfg(tiny_model_dir, tmp_path / "a", 3, *opts), log=QUIET)["history"]
    # 2 epochs x 2 mini-batches = 4 updates a step; the first update has no measurement yet (no bonus)
    assert [round(r["actor/entropy_coef"], 6) for r in hist[1:]] == [0.03, 0.05, 0.07]
    assert [r["actor/entropy_bonus_frac"] for r in hist[1:]] == [0.75, 1.0, 1.0]
    state = json.loads((tmp_path / "a" / "checkpoints" / "step_000001" / "state.json").read_text())
    assert (
        state["entropy_control"]["coef"] == pytest.approx(0.03)
        and state["entropy_control"]["last_entropy"] > 0
    )
    run_b = _interrupted_copy(tmp_path / "a", tmp_path / "b", after_step=1)
    resumed = {r["step"]: _stable(r) for r in train(_cfg(tiny_model_dir, run_b, 3, *opts), resume=True,
                                                    log=QUIET)["history"]}  # fmt: skip
    assert resumed[2] == _stable(hist[2]) and resumed[3] == _stable(hist[3])


def test_above_the_target_no_bonus_is_applied(tiny_model_dir, tmp_path):
    opts = (*ON, "algo.entropy_control.target=1e-6", "checkpoint.every=0", "algo.shaping.overlong_buffer=10")
    hist = train(_cfg(tiny_model_dir, tmp_path / "c", 2, *opts), log=QUIET)["history"]
    assert [r["actor/entropy_coef"] for r in hist[1:]] == [0.0, 0.0]  # 0.01 walked down to coef_min
    assert [r["actor/entropy_bonus_frac"] for r in hist[1:]] == [0.0, 0.0]
    plain = train(_cfg(tiny_model_dir, tmp_path / "p", 2, "checkpoint.every=0", "algo.shaping.overlong_buffer=10"),
                  log=QUIET)["history"]  # fmt: skip
    for key in ("loss/policy", "loss/total", "grad_norm"):  # the plain run's numbers (no entropy term)
        assert hist[2][key] == pytest.approx(plain[2][key], rel=1e-4, abs=1e-7), key
    assert plain[2]["loss/policy"] != 0 and "actor/entropy_coef" not in plain[2]
