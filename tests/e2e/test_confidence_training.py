"""Training with `reward.confidence`: the tiny model's completions are rewarded by its own certainty. With
negative entropy as the reward its entropy falls below the same run's with the verifiers' rewards (which
give the untrained model nothing to learn from): a flipped sign would raise it. Every measure runs through
the trainer and the asynchronous worker, and rollouts.jsonl records the confidence as the reward."""

from __future__ import annotations

import json

import pytest
from test_async_rollouts import ASYNC
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(400)


def _run(model_dir, run, *extra, steps=4):
    cfg = _cfg(model_dir, run, steps, "checkpoint.every=0", "log.rollouts_per_step=2", "val.every=0", *extra)
    return [h for h in train(cfg, log=lambda *a: None)["history"] if h["step"] > 0]


def test_rewarding_low_entropy_lowers_the_entropy(tiny_model_dir, tmp_path):
    plain = _run(tiny_model_dir, tmp_path / "plain", "train.lr=1e-2")
    sure = _run(tiny_model_dir, tmp_path / "sure", "train.lr=1e-2", "reward.confidence.measure=neg_entropy")
    assert plain[0]["actor/entropy"] == pytest.approx(sure[0]["actor/entropy"], rel=0.05)  # the same start
    assert sure[-1]["actor/entropy"] < plain[-1]["actor/entropy"] - 0.1
    assert all(h["reward/confidence/mean"] < 0 for h in sure)  # minus an entropy
    groups = [json.loads(x) for x in (tmp_path / "sure" / "rollouts.jsonl").read_text().splitlines()]
    rewards = [c["reward"] for g in groups for c in g["completions"]]
    assert all(r < 0 for r in rewards) and len(set(rewards)) > 1  # the confidence, not the verifier's 0 / 1


@pytest.mark.parametrize("measure", ["self_certainty", "logprob"])
def test_every_measure_trains_through_the_rollout_worker(tiny_model_dir, tmp_path, measure):
    hist = _run(tiny_model_dir, tmp_path / measure, f"reward.confidence.measure={measure}", *ASYNC, steps=2)
    assert len(hist) == 2
    for h in hist:
        assert (h["reward/confidence/mean"] > 0) is (measure == "self_certainty")  # a KL >= 0; a log-prob < 0
        assert 0.0 <= h["reward/confidence/pick_accuracy"] <= 1.0 and h["reward/confidence/std"] > 0


@pytest.mark.parametrize("measure", ["self_certainty", "neg_entropy", "logprob"])
def test_each_measure_rises_when_it_is_the_reward(tiny_model_dir, tmp_path, measure):
    """The policy moves towards what it is rewarded for: its mean confidence by that measure grows step by
    step (with the sign flipped it would fall), and the entropy falls with it."""
    hist = _run(
        tiny_model_dir, tmp_path / "run", "train.lr=1e-2", f"reward.confidence.measure={measure}", steps=6
    )
    conf = [h["reward/confidence/mean"] for h in hist]
    assert conf[-1] > conf[0] + 0.1 and hist[-1]["actor/entropy"] < hist[0]["actor/entropy"] - 0.1
