"""algo.off_policy.tis_normalize (verl's rollout_is_batch_normalize): importance weights divided by their
mean, over tokens or sequences; over the step's batch when taken before the updates, over the micro-batch
in bypass mode; the config check and verl's key converted."""

from __future__ import annotations

import pytest
import torch
import yaml
from test_algo_correction import _loss
from test_bypass import _bypass_batch
from test_trainer_step import _batch

from reasonrl.algorithms.correction import normalized, weight_mean_parts
from reasonrl.config import AlgoConfig, ConfigError, OffPolicyConfig, load_config
from reasonrl.config.foreign import convert
from reasonrl.trainer.step import attach_tis_weights

T = torch.tensor
MASK = T([[True, True, False], [True, True, True]])


def test_the_mean_is_over_tokens_or_over_sequences():
    token = T([[2.0, 4.0, 0.0], [1.0, 1.0, 1.0]])
    assert weight_mean_parts(token, MASK, "token_truncate") == (9.0, 5.0)  # the padded token does not count
    seq = T([[3.0, 3.0, 0.0], [1.0, 1.0, 1.0]])  # one weight per row, on each of its tokens
    assert weight_mean_parts(seq, MASK, "sequence_truncate") == (4.0, 2.0)  # rows count once, not by length
    empty = MASK.clone()
    empty[0] = False
    assert weight_mean_parts(seq, empty, "sequence_mask") == (1.0, 1.0)  # a row with no trained token: out
    w, factor = normalized(token, 9.0, 5.0)
    assert factor == pytest.approx(1.8) and torch.allclose(w, token / 1.8)
    assert normalized(token, 0.0, 5.0) == (token, 1.0) and normalized(token, 1.0, 0.0) == (token, 1.0)


def test_weights_taken_before_the_updates_are_normalised_over_the_batch():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 1]])
    b.old_logprobs = torch.full((2, 2), -1.0)
    b.sampler_logprobs = b.old_logprobs - torch.log(T([[2.0, 2.0], [1.5, 4.0]]))
    metrics = attach_tis_weights(b, OffPolicyConfig(tis_cap=3.0, tis_normalize=True))
    # capped weights [[2, 2], [1.5, 3]], mean 8.5 / 4
    assert metrics["actor/is_norm_factor"] == pytest.approx(2.125)
    assert torch.allclose(b.is_weights, T([[2.0, 2.0], [1.5, 3.0]]) / 2.125)
    assert b.is_weights[b.mask].mean().item() == pytest.approx(1.0)
    seq = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 1]])
    seq.old_logprobs, seq.sampler_logprobs = b.old_logprobs, b.sampler_logprobs
    attach_tis_weights(seq, OffPolicyConfig(tis_cap=10.0, tis_mode="sequence_truncate", tis_normalize=True))
    # row weights 4 and 6 (products), mean 5 over the two rows
    assert torch.allclose(seq.is_weights, T([[0.8, 0.8], [1.2, 1.2]]))


def test_bypass_normalises_each_micro_batchs_weights():
    b, current = _bypass_batch()  # current / sampler = [[2, 2], [1.5, 4]], A = [+1, -1], reinforce
    op = OffPolicyConfig(tis_cap=3.0, bypass=True, tis_normalize=True)
    loss, metrics, _ = _loss(AlgoConfig(policy_loss="reinforce", off_policy=op), b, current)
    w = T([2.0, 2.0, 1.5, 3.0]) / 2.125
    assert loss.item() == pytest.approx(float(w[0] + w[1] - w[2] - w[3]) / 4, rel=1e-6)
    assert metrics["actor/is_norm_factor"].item() == pytest.approx(2.125)


def test_normalising_without_weights_is_refused():
    with pytest.raises(ConfigError, match="tis_normalize have no effect unless algo.off_policy.tis_cap > 0"):
        load_config(None, ["algo.off_policy.tis_normalize=true"])


def test_verl_batch_normalize_converts(tmp_path):
    rc = "algorithm.rollout_correction."
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=4 algorithm.adv_estimator=grpo "
                      f"{rc}rollout_is=sequence {rc}rollout_is_batch_normalize=True {rc}bypass_mode=True "
                      f"{rc}loss_type=reinforce\n")  # fmt: skip
    out = convert("verl", script)
    assert out.recipe["algo"]["off_policy"] == {"bypass": True, "tis_cap": 2.0, "tis_mode": "sequence_truncate",
                                                "tis_normalize": True}  # fmt: skip
    assert not any("normalize" in n for n in out.notes)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    assert load_config(recipe, ["rollout.engine=hf"]).algo.off_policy.tis_normalize
    script.write_text(
        f"python3 -m verl.trainer.main_ppo {rc}rollout_is=null {rc}rollout_is_batch_normalize=True\n"
    )
    out = convert("verl", script)  # no weights to normalise: read, nothing set, nothing to say
    assert "off_policy" not in out.recipe.get("algo", {}) and not any("normalize" in n for n in out.notes)
