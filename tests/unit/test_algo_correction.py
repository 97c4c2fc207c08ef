"""Corrections for samples that drifted from the policy being trained: the four importance-weight modes
(token / sequence ratio, truncated / masked, with a floor: IcePop), DeepSeek-V3.2's off-policy sequence
mask, and how the trainer's loss applies them and the importance-weighted KL. Hand-computed values are in
comments; the plain token-truncate case is in test_algo_value.py."""

from __future__ import annotations

import math

import pytest
import torch
from _tolerance import close
from test_trainer_step import _batch
from test_trainer_step import test_bad_algo_fields_name_the_key as refused

from reasonrl.algorithms.correction import TIS_MODES, off_policy_sequence_mask, tis_weights
from reasonrl.config import AlgoConfig, KLConfig, OffPolicyConfig, load_config
from reasonrl.trainer.step import make_loss_fn

T = torch.tensor
LN = math.log

# old = 0; sampler = -log w. Row 0: w = [2, .5, 4] (sequence product 4); row 1: w = [1.5, .8] and a
# padding token with w = 100 (never counts). cap 3.
W = [[2.0, 0.5, 4.0], [1.5, 0.8, 100.0]]
MASK = T([[True, True, True], [True, True, False]])
# mismatch_kl = mean over the 5 tokens of w - 1 - ln w (token weights, whatever the mode)
MISMATCH = sum(w - 1 - LN(w) for w in [2.0, 0.5, 4.0, 1.5, 0.8]) / 5
MODES = [
    # mode, floor, weights, changed tokens, is_weight_mean
    ("token_truncate", 0.0, [[2.0, 0.5, 3.0], [1.5, 0.8, 0.0]], 1, 7.8 / 5),
    ("token_mask", 0.6, [[2.0, 0.0, 0.0], [1.5, 0.8, 0.0]], 2, 4.3 / 5),  # .5 < floor, 4 > cap
    ("sequence_truncate", 0.0, [[3.0, 3.0, 3.0], [1.2, 1.2, 0.0]], 3, 11.4 / 5),  # min(4, 3); 1.5 * .8
    ("sequence_mask", 0.6, [[0.0, 0.0, 0.0], [1.2, 1.2, 0.0]], 3, 2.4 / 5),
    ("sequence_mask", 1.5, [[0.0] * 3, [0.0] * 3], 5, 0.0),  # 1.2 < floor 1.5 as well
]


@pytest.mark.parametrize("mode,floor,weights,changed,mean", MODES)
def test_importance_weight_modes_hand_computed(mode, floor, weights, changed, mean):
    old = torch.zeros(2, 3, requires_grad=True)
    w, m = tis_weights(old, -torch.log(T(W)), MASK, cap=3.0, mode=mode, floor=floor)
    close(w, weights, rtol=1e-6)
    assert not w.requires_grad
    close(m["is_capped_frac"], changed / 5)
    close(m["is_weight_mean"], mean, rtol=1e-6)
    close(m["mismatch_kl"], MISMATCH, rtol=1e-6)


def test_a_mask_mode_without_a_floor_keeps_small_weights():
    old, mask = torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool)
    w, _ = tis_weights(old, -torch.log(T([[0.1, 9.0]])), mask, cap=3.0, mode="token_mask")
    close(w, [[0.1, 0.0]], rtol=1e-6)  # only the cap masks: no lower bound by default


def test_importance_weight_modes_refuse_bad_arguments():
    z = torch.zeros(1, 2)
    mask = torch.ones(1, 2, dtype=torch.bool)
    assert TIS_MODES == ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
    with pytest.raises(ValueError, match="unknown mode 'sequence'"):
        tis_weights(z, z, mask, mode="sequence")
    with pytest.raises(ValueError, match="floor must be in"):
        tis_weights(z, z, mask, cap=2.0, mode="token_mask", floor=2.0)


# Off-policy sequence mask, threshold .5; drift = mean over the row's tokens of behaviour - current:
# row 0  A = +1, drift 3              kept (non-negative advantage)
# row 1  A = -1, drift (1 + .2)/2 = .6  dropped
# row 2  A = -1, drift (.5 + .5)/2 = .5 kept (not above the threshold); its padding drift 99 never counts
# row 3  A = 0,  drift 2              kept (A >= 0)
# row 4  A = [-1, +1], drift 1        token-level advantages (gae): the negative token only
def test_off_policy_sequence_mask_hand_computed():
    current = torch.full((5, 2), -1.0, requires_grad=True)
    drift = T([[3.0, 3.0], [1.0, 0.2], [0.5, 99.0], [2.0, 2.0], [1.0, 1.0]])
    mask = T([[True, True], [True, True], [True, False], [True, True], [True, True]])
    adv = T([[1.0, 1.0], [-1.0, -1.0], [-1.0, -1.0], [0.0, 0.0], [-1.0, 1.0]])
    drift[2, 0] = 0.5
    keep, m = off_policy_sequence_mask(current, current.detach() + drift, adv, mask, threshold=0.5)
    assert keep.tolist() == [[True, True], [False, False], [True, True], [True, True], [False, True]]
    assert not keep.requires_grad
    close(m["opsm_masked_frac"], 3 / 9)  # 3 of the 9 trained tokens dropped


# ---------------------------------------------------------------- the trainer's loss


def _loss_batch():
    # two rows of two tokens; A = [+1, -1]; the current log-probs equal the old ones (ratio 1), so the
    # plain ppo_clip per-token loss is -A and token_mean over 4 tokens of -A is 0
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 1]])
    b.advantages = T([[1.0, 1.0], [-1.0, -1.0]])
    b.old_logprobs = torch.full((2, 2), -1.0)
    return b


def _loss(algo, b, logprobs=None):
    lp = (b.old_logprobs.clone() if logprobs is None else logprobs).requires_grad_(True)
    loss, metrics = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, lp, None)
    return loss, metrics, lp


def test_the_loss_applies_the_sequence_mask_mode():
    b = _loss_batch()
    # sampler: row 0 w = [2, 2] (sequence 4 > cap 3: masked), row 1 w = [1, 1.5] (1.5: kept)
    b.sampler_logprobs = b.old_logprobs - torch.log(T([[2.0, 2.0], [1.0, 1.5]]))
    algo = AlgoConfig(off_policy=OffPolicyConfig(tis_cap=3.0, tis_mode="sequence_mask"))
    loss, metrics, _ = _loss(algo, b)
    # row 0 weighted 0; row 1: -A * 1.5 = +1.5 on each token -> (1.5 + 1.5) / 4
    assert loss.item() == pytest.approx(0.75, rel=1e-6)
    assert metrics["actor/is_capped_frac"].item() == pytest.approx(0.5)
    token, _, _ = _loss(AlgoConfig(off_policy=OffPolicyConfig(tis_cap=3.0)), b)
    assert token.item() == pytest.approx((-2 - 2 + 1 + 1.5) / 4, rel=1e-6)  # token_truncate: w as is


def test_the_loss_drops_drifted_negative_sequences_by_the_sampler_log_probs():
    b = _loss_batch()
    b.sampler_logprobs = b.old_logprobs + T([[2.0, 2.0], [1.0, 0.0]])  # row 1 drift .5; row 0 drift 2
    algo = AlgoConfig(off_policy=OffPolicyConfig(mask_threshold=0.4))
    loss, metrics, lp = _loss(algo, b)
    # row 1 (A < 0, drift .5 > .4) dropped; row 0 kept (A > 0): (-1 - 1) / 4
    assert loss.item() == pytest.approx(-0.5, rel=1e-6)
    assert metrics["actor/opsm_masked_frac"].item() == pytest.approx(0.5)
    loss.backward()
    assert lp.grad[1].abs().max().item() == 0.0 and lp.grad[0].abs().min().item() > 0
    kept, _, _ = _loss(AlgoConfig(off_policy=OffPolicyConfig(mask_threshold=0.6)), b)
    assert kept.item() == pytest.approx(0.0, abs=1e-7)  # under the threshold: nothing dropped
    b.sampler_logprobs = None  # no sampler log-probs: the old ones, which equal the current: drift 0
    none, _, _ = _loss(algo, b)
    assert none.item() == pytest.approx(0.0, abs=1e-7)


def test_the_importance_weighted_kl_term():
    b = _loss_batch()
    b.ref_logprobs = b.old_logprobs - 0.5  # k3 at d = .5 on every token: .106531
    plain_cfg = AlgoConfig(kl=KLConfig(coef=1.0))
    weighted_cfg = AlgoConfig(kl=KLConfig(coef=1.0, importance_weighted=True))
    plain, pm, lp_p = _loss(plain_cfg, b)
    weighted, wm, lp_w = _loss(weighted_cfg, b)
    close(pm["loss/kl"], 0.106531)
    close(wm["loss/kl"], 0.106531)  # ratio 1: the same value
    (plain + 0 * lp_p.sum()).backward()
    weighted.backward()
    # the gradient gains the score term k3 * d logprobs / 4 tokens on every token
    close(lp_w.grad - lp_p.grad, torch.full((2, 2), 0.106531 / 4), rtol=1e-5)
    moved = b.old_logprobs + LN(2.0)  # pi / pi_old = 2 everywhere; d = .5 + ln 2 -> k3 = e^-d - 1 + d
    d = 0.5 + LN(2.0)
    _, mm, _ = _loss(weighted_cfg, b, moved)
    close(mm["loss/kl"], 2 * (math.exp(-d) - 1 + d), rtol=1e-6)
    _, pm2, _ = _loss(plain_cfg, b, moved)
    close(pm2["loss/kl"], math.exp(-d) - 1 + d, rtol=1e-6)


BAD = [
    (["algo.off_policy.tis_cap=2", "algo.off_policy.tis_mode=seq"], "algo.off_policy.tis_mode='seq'"),
    (["algo.off_policy.tis_mode=token_mask"], "unless algo.off_policy.tis_cap > 0"),
    (["algo.off_policy.tis_cap=2", "algo.off_policy.tis_floor=0.5"], "the *_mask modes only"),
    (["algo.off_policy.tis_cap=2", "algo.off_policy.tis_mode=token_mask", "algo.off_policy.tis_floor=2"],
     "algo.off_policy.tis_floor must be in [0, tis_cap)"),
    (["algo.off_policy.mask_threshold=0"], "algo.off_policy.mask_threshold must be > 0"),
    (["algo.kl.importance_weighted=true"], "algo.kl.importance_weighted=true"),
    (["algo.kl.coef=0.1", "algo.kl.in_reward=true", "algo.kl.importance_weighted=true"], "in_reward=false"),
    # option values of the estimator and the loss are tried on two tiny rows when the recipe loads
    (["algo.adv_kwargs.std_scope=global"], "algo.adv_kwargs: grpo: std_scope must be 'group' or 'batch'"),
    (["algo.loss_kwargs.clip_c=0.5"], "algo.loss_kwargs: ppo_clip: clip_c must be > 1"),
    (["algo.policy_loss=sapo", "algo.loss_kwargs.tau_neg=0"], "algo.loss_kwargs: sapo: tau_pos and tau_neg"),
]  # fmt: skip


@pytest.mark.parametrize("overrides,needle", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_settings_name_the_key(overrides, needle):
    refused(overrides, needle)


def test_icepop_settings_load():
    op = load_config(None, ["algo.off_policy.tis_cap=5", "algo.off_policy.tis_mode=token_mask",
                            "algo.off_policy.tis_floor=0.5"]).algo.off_policy  # fmt: skip
    assert (op.tis_cap, op.tis_mode, op.tis_floor, op.mask_threshold) == (5.0, "token_mask", 0.5, None)
