"""verl's bypass mode through the trainer (algo.off_policy.bypass): the sampler's log-probs are the old
ones. The rollout engine is made to report every token 0.3 nats less likely than it is; the learning rate
is too small to move the policy, so each update's ratio is exactly what it is measured against:
  - decoupled (the default): the trainer's own old log-probs, ratio 1, one extra forward per step;
  - bypass: the sampler's, ratio e^0.3 on every token (the clip bites), no old-log-prob forward at all;
  - bypass with reinforce and importance weights: weights e^0.3 from the current policy and the sampler."""

from __future__ import annotations

import math

import pytest
from test_train_loop import _cfg

from reasonrl.engines.single import SingleDeviceEngine
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.trainer.loop import train

QUIET = lambda *a: None  # noqa: E731
SHIFT = 0.3
# rewards that differ (nonzero advantages); mini-batches of 8 of 16 rows: decoupled PPO needs old log-probs
BASE = ("algo.shaping.overlong_buffer=10", "checkpoint.every=0", "train.lr=1e-12", "train.epochs=1")


@pytest.fixture
def shifted_sampler(monkeypatch):
    """Every sampled token reported SHIFT nats below what the engine computed; counts the trainer's
    log-prob forwards (old / reference log-probs; the updates run their own)."""
    generate, logprobs, calls = HFRolloutEngine.generate, SingleDeviceEngine.logprobs, []

    def shifted(self, prompts, params):
        out = generate(self, prompts, params)
        for group in out:
            for c in group:
                c.sampler_logprobs = [x - SHIFT for x in c.sampler_logprobs]
        return out

    def counted(self, *a, **kw):
        calls.append(kw.get("reference", False))
        return logprobs(self, *a, **kw)

    monkeypatch.setattr(HFRolloutEngine, "generate", shifted)
    monkeypatch.setattr(SingleDeviceEngine, "logprobs", counted)
    return calls


def test_bypass_takes_the_samplers_log_probs_as_the_old_ones(tiny_model_dir, tmp_path, shifted_sampler):
    decoupled = train(_cfg(tiny_model_dir, tmp_path / "d", 2, *BASE), log=QUIET)["history"]
    assert shifted_sampler == [False, False]  # one forward for the old log-probs each step
    shifted_sampler.clear()
    bypass = train(_cfg(tiny_model_dir, tmp_path / "b", 2, *BASE, "algo.off_policy.bypass=true"), log=QUIET)[
        "history"
    ]
    assert shifted_sampler == []  # none: the sampler's log-probs are used as they came
    for d, b in zip(decoupled[1:], bypass[1:]):
        assert d["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
        assert b["actor/ratio_mean"] == pytest.approx(math.exp(SHIFT), rel=1e-4)
        assert b["actor/ratio_max"] == pytest.approx(math.exp(SHIFT), rel=1e-4)
        # every positive-advantage token is past 1 + clip_high: clipped; none are in decoupled PPO
        assert d["actor/clipfrac_high"] == 0.0 and b["actor/clipfrac_high"] > 0.1
        for row in (d, b):  # the gap both measure: the sampler against the trainer's current policy
            assert row["rollout/logprob_gap_mean"] == pytest.approx(SHIFT, rel=1e-4)


def test_bypass_with_reinforce_weights_by_current_over_sampler(tiny_model_dir, tmp_path, shifted_sampler):
    pg = ("algo.off_policy.bypass=true", "algo.policy_loss=reinforce", "algo.off_policy.tis_cap=2.0")
    row = train(_cfg(tiny_model_dir, tmp_path / "r", 1, *BASE, *pg), log=QUIET)["history"][1]
    assert shifted_sampler == []
    assert row["actor/is_weight_mean"] == pytest.approx(math.exp(SHIFT), rel=1e-4)
    assert row["actor/is_capped_frac"] == 0.0
    capped = train(_cfg(tiny_model_dir, tmp_path / "c", 1, *BASE, *pg[:2], "algo.off_policy.tis_cap=1.2"),
                   log=QUIET)["history"][1]  # fmt: skip
    assert capped["actor/is_weight_mean"] == pytest.approx(1.2) and capped["actor/is_capped_frac"] == 1.0


def test_bypass_rejection_compares_the_current_policy_with_the_sampler(
    tiny_model_dir, tmp_path, shifted_sampler
):
    # the k1 modes bound pi_sampler / pi (verl's -log r with r = pi / pi_sampler): e^-0.3 = 0.74 is outside
    # [0.8, 1.25] -> every token rejected (with the old log-probs, here the sampler's: none would be)
    reject = "algo.off_policy.reject=[{mode: token_k1, low: 0.8, high: 1.25}]"
    row = train(
        _cfg(tiny_model_dir, tmp_path / "j", 1, *BASE, "algo.off_policy.bypass=true", reject), log=QUIET
    )["history"][1]
    assert row["actor/rs_masked_frac"] == 1.0 and row["loss/policy"] == 0.0
    wide = reject.replace("0.8", "0.7")
    row = train(
        _cfg(tiny_model_dir, tmp_path / "w", 1, *BASE, "algo.off_policy.bypass=true", wide), log=QUIET
    )["history"][1]
    assert row["actor/rs_masked_frac"] == 0.0 and row["loss/policy"] != 0.0


def test_normalised_weights_are_taken_over_the_whole_batch_before_the_update(tiny_model_dir, tmp_path,
                                                                             shifted_sampler):  # fmt: skip
    # one update per step: plain weights come from the loss's own forward (no old-log-prob pass); normalised
    # ones need the whole batch's mean first, so the trainer computes the old log-probs
    one = (*BASE, "train.mini_batch=16", "algo.off_policy.tis_cap=2.0")
    plain = train(_cfg(tiny_model_dir, tmp_path / "p", 1, *one), log=QUIET)["history"][1]
    assert shifted_sampler == [] and "actor/is_norm_factor" not in plain
    assert plain["actor/is_weight_mean"] == pytest.approx(math.exp(SHIFT), rel=1e-4)
    normal = train(
        _cfg(tiny_model_dir, tmp_path / "n", 1, *one, "algo.off_policy.tis_normalize=true"), log=QUIET
    )["history"][1]
    assert shifted_sampler == [False]
    # every weight e^0.3 (under the cap): their mean, so each becomes 1
    assert normal["actor/is_norm_factor"] == pytest.approx(math.exp(SHIFT), rel=1e-4)
    assert normal["loss/policy"] == pytest.approx(plain["loss/policy"] / math.exp(SHIFT), rel=1e-3)
