"""verl's rejection sampling through the trainer (`algo.off_policy.reject` from the command line, a list
of criteria): on this CPU the sampler's log-probs are the trainer's, so a +-0.1% geometric-mean filter
keeps every token; bounds that exclude ratio 1 reject every token and the policy loss is 0."""

from __future__ import annotations

from test_train_loop import _cfg

from reasonrl.trainer.loop import train

QUIET = lambda *a: None  # noqa: E731
SHAPED = ("algo.shaping.overlong_buffer=10", "checkpoint.every=0")  # rewards that differ: nonzero advantages


def test_rejection_criteria_reach_the_loss(tiny_model_dir, tmp_path):
    geo = "algo.off_policy.reject=[{mode: seq_mean_k1, low: 0.999, high: 1.001}]"
    kept = train(_cfg(tiny_model_dir, tmp_path / "k", 1, *SHAPED, geo), log=QUIET)["history"][1]
    assert kept["actor/rs_masked_frac"] == 0.0 and kept["loss/policy"] != 0
    away = "algo.off_policy.reject=[{mode: token_k2, high: 1.0}, {mode: seq_mean_k1, low: 1.5, high: 2.0}]"
    out = train(_cfg(tiny_model_dir, tmp_path / "a", 1, *SHAPED, away), log=QUIET)["history"][1]
    assert out["actor/rs_masked_frac"] == 1.0 and out["loss/policy"] == 0.0
