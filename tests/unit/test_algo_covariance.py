"""Clip-Cov / KL-Cov (algorithms/covariance.py) and VESPO (algorithms/losses.py), against hand-computed
values and gradients."""

from __future__ import annotations

import math

import pytest
import torch
from test_trainer_step import _batch

from reasonrl.algorithms import POLICY_LOSSES
from reasonrl.algorithms.covariance import clip_cov_select, kl_cov_select, select_options, token_covariance
from reasonrl.config import AlgoConfig, OffPolicyConfig
from reasonrl.trainer.step import attach_tis_weights, make_loss_fn

BAND = {"clip_cov_lb": 1.0, "clip_cov_ub": 5.0}


def test_token_covariance_by_hand():
    adv = torch.tensor([1.0, -1.0, 2.0, 2.0])  # mean 1
    lp = torch.tensor([-1.0, -3.0, -2.0, -2.0])  # mean -2
    assert token_covariance(adv, lp).tolist() == [0.0, 2.0, 0.0, 0.0]


def test_clip_cov_draws_its_quota_from_the_band_only():
    cov = torch.tensor([0.5, 1.5, 2.0, 4.9, 5.0, 7.0, 1.0, 3.0, -2.0, 1.2] * 100)  # 1000 tokens
    band = (cov > 1.0) & (cov < 5.0)
    picked = clip_cov_select(cov, torch.Generator().manual_seed(3), clip_cov_ratio=0.01, **BAND)
    assert int(picked.sum()) == 10 and bool((picked <= band).all())  # floor(0.01 * 1000) = 10
    again = clip_cov_select(cov, torch.Generator().manual_seed(3), clip_cov_ratio=0.01, **BAND)
    other = clip_cov_select(cov, torch.Generator().manual_seed(4), clip_cov_ratio=0.01, **BAND)
    assert torch.equal(picked, again) and not torch.equal(picked, other)  # seeded, and really drawn
    # at least one token, never more than the band holds; an empty band picks nothing
    assert int(clip_cov_select(cov[:10], torch.Generator(), clip_cov_ratio=2e-4, **BAND).sum()) == 1
    assert int(clip_cov_select(cov[:10], torch.Generator(), clip_cov_ratio=0.9, **BAND).sum()) == 5
    assert (
        int(
            clip_cov_select(
                cov, torch.Generator(), clip_cov_ratio=0.1, clip_cov_lb=8.0, clip_cov_ub=9.0
            ).sum()
        )
        == 0
    )
    assert int(clip_cov_select(cov[:0], torch.Generator(), clip_cov_ratio=0.1, **BAND).sum()) == 0
    with pytest.raises(ValueError, match="clip_cov_lb must be < clip_cov_ub"):
        clip_cov_select(cov, torch.Generator(), clip_cov_ratio=0.1, clip_cov_lb=5.0, clip_cov_ub=1.0)
    with pytest.raises(ValueError, match="ratio must be > 0"):
        clip_cov_select(cov, torch.Generator(), clip_cov_ratio=0.0, **BAND)


def test_the_selections_take_the_losses_defaults_and_the_recipes_values():
    clip, kl = POLICY_LOSSES.get("clip_cov"), POLICY_LOSSES.get("kl_cov")
    assert select_options(clip, {}) == {"clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0}
    assert select_options(clip, {"clip_cov_ub": 9.0, "clip_high": 0.28}) == {
        "clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 9.0}  # fmt: skip
    assert select_options(kl, {"kl_coef": 1.0}) == {"kl_cov_ratio": 2e-4}
    assert POLICY_LOSSES.options("kl_cov")["kl_coef"].default == 0.1  # verl's ppo_kl_coef


def test_kl_cov_picks_the_largest_covariances():
    cov = torch.tensor([0.1, 9.0, -4.0, 3.0, 8.0, 0.0, 2.0, 1.0, 5.0, 7.0])
    picked = kl_cov_select(cov, torch.Generator(), kl_cov_ratio=0.3)
    assert picked.nonzero().squeeze(-1).tolist() == [1, 4, 9]
    assert kl_cov_select(cov, torch.Generator(), kl_cov_ratio=1e-4).nonzero().squeeze(-1).tolist() == [1]
    assert kl_cov_select(cov[:0], torch.Generator(), kl_cov_ratio=0.3).numel() == 0


def _inputs():
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -4.0]])
    old = lp + torch.tensor([[0.0, 0.5, -0.5], [0.2, 0.0, -0.6]])  # ratios 1, e^-.5, e^.5 / e^-.2, 1, e^.6
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    return lp, old, adv, mask


def _grad(name, selected, **opts):
    lp, old, adv, mask = _inputs()
    lp = lp.clone().requires_grad_(True)
    chosen = {} if selected is None else {"selected": selected}
    loss, metrics = POLICY_LOSSES.get(name)(lp, old, adv, mask, **chosen, **opts)
    (loss * mask).sum().backward()
    return loss.detach(), lp.grad, metrics


def test_clip_cov_removes_exactly_the_chosen_tokens_from_ppo_clip():
    sel = torch.tensor([[False, False, True], [True, False, False]])
    loss, grad, metrics = _grad("clip_cov", sel)
    ref, ref_grad, _ = _grad("ppo_clip", None)
    mask = _inputs()[3]
    assert loss[sel].tolist() == [0.0, 0.0] and grad[sel].tolist() == [0.0, 0.0]
    assert float(ref_grad[1, 0]) != 0.0  # a token that learns under ppo_clip
    keep = mask & ~sel
    torch.testing.assert_close(loss[keep], ref[keep])
    torch.testing.assert_close(grad[keep], ref_grad[keep])
    assert float(grad[keep].abs().min()) > 0  # the kept tokens (unclipped here) still learn
    assert float(metrics["cov_selected_frac"]) == pytest.approx(2 / 5)


def test_kl_cov_is_the_unclipped_surrogate_plus_abs_kl_on_the_chosen_tokens():
    sel = torch.tensor([[False, False, False], [False, False, True]])  # row 1's last token is masked out
    sel[1, 0] = True
    loss, grad, metrics = _grad("kl_cov", sel, kl_coef=0.5)
    lp, old, adv, mask = _inputs()
    r = torch.exp(lp - old)
    # d/dlp [-A r] = -A r; the chosen token (log r = -0.2) adds 0.5 * sign(-0.2) = -0.5
    expect = -adv * r
    expect[1, 0] += -0.5
    torch.testing.assert_close(grad[mask], expect[mask])
    assert float(loss[1, 0]) == pytest.approx(2.0 * math.exp(-0.2) + 0.5 * 0.2)
    # row 0's last token (r = e^.5 > 1.2, A > 0) is clipped by ppo_clip, not here
    _, ppo_grad, _ = _grad("ppo_clip", None)
    assert float(ppo_grad[0, 2]) == 0.0 and float(grad[0, 2]) == pytest.approx(-math.exp(0.5))
    assert float(metrics["clipfrac_high"]) == 0.0
    assert float(metrics["cov_selected_frac"]) == pytest.approx(1 / 5)
    with pytest.raises(ValueError, match="kl_coef must be >= 0"):
        _grad("kl_cov", sel, kl_coef=-1.0)


def test_without_a_selection_a_loss_chooses_from_its_own_tokens():
    lp, old, adv, mask = _inputs()
    cov = token_covariance(adv[mask], lp[mask])
    own = torch.zeros_like(mask)
    own[mask] = kl_cov_select(cov, torch.Generator(), kl_cov_ratio=0.4)
    a, _ = POLICY_LOSSES.get("kl_cov")(lp, old, adv, mask, kl_cov_ratio=0.4)
    b, _ = POLICY_LOSSES.get("kl_cov")(lp, old, adv, mask, selected=own)
    c, _ = POLICY_LOSSES.get("kl_cov")(lp, old, adv, mask, selected=torch.zeros_like(mask))
    assert int(own.sum()) == 2 and torch.equal(a, b) and not torch.equal(a, c)


def test_vespo_weight_is_the_gamma_kernel_of_the_sequence_ratio():
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -4.0]], requires_grad=True)
    log_w = torch.tensor([math.log(2.0), math.log(0.5)])  # row 0: w = 2 (A > 0); row 1: w = 0.5 (A < 0)
    old = lp.detach() - torch.tensor([[log_w[0], 0.0, 0.0], [0.0, log_w[1], 9.0]])  # masked token ignored
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    loss, metrics = POLICY_LOSSES.get("vespo")(lp, old, adv, mask)
    (loss * mask).sum().backward()
    phi_pos = math.exp(3.0) * 2.0**2 * math.exp(-3.0 * 2.0)  # k_pos 2, lambda_pos 3
    phi_neg = math.exp(2.0) * 0.5**3 * math.exp(-2.0 * 0.5)  # k_neg 3, lambda_neg 2
    torch.testing.assert_close(lp.grad[0], torch.full((3,), -phi_pos))
    torch.testing.assert_close(lp.grad[1, :2], torch.full((2,), 2.0 * phi_neg))
    assert float(metrics["phi_mean"]) == pytest.approx((3 * phi_pos + 2 * phi_neg) / 5)
    # on-policy (w = 1) the weight is 1: the plain policy gradient
    lp2 = lp.detach().clone().requires_grad_(True)
    loss2, m2 = POLICY_LOSSES.get("vespo")(lp2, lp.detach(), adv, mask)
    (loss2 * mask).sum().backward()
    torch.testing.assert_close(lp2.grad[mask], -adv[mask])
    assert float(m2["phi_mean"]) == pytest.approx(1.0)
    for bad in ({"lambda_pos": 0.0}, {"lambda_neg": 0.0}, {"k_pos": -1.0}, {"k_neg": -0.5}):
        with pytest.raises(ValueError, match="vespo: k must be >= 0 and lambda > 0"):
            POLICY_LOSSES.get("vespo")(lp, old, adv, mask, **bad)
    POLICY_LOSSES.get("vespo")(lp, old, adv, mask, k_pos=0.0, k_neg=0.5)  # k = 0 is allowed


def test_vespo_small_advantages_and_far_off_policy_rows():
    lp = torch.zeros(2, 2, requires_grad=True)
    # row 0: A = 0.5 > 0 takes (k_pos, lambda_pos); row 1: w = e^-30, clamped to 1e-8 (phi ~ 1e-15, not 0.25-ish)
    old = torch.tensor([[-math.log(2.0), 0.0], [15.0, 15.0]])
    adv = torch.tensor([[0.5, 0.5], [1.0, 1.0]])
    loss, _ = POLICY_LOSSES.get("vespo")(lp, old, adv, torch.ones(2, 2, dtype=torch.bool))
    loss.sum().backward()
    phi = math.exp(3.0) * 2.0**2 * math.exp(-6.0)
    torch.testing.assert_close(lp.grad[0], torch.full((2,), -0.5 * phi))
    assert 0 < float(-lp.grad[1, 0]) < 1e-12


def test_vespo_folds_the_sampler_weights_into_its_sequence_ratio():
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -4.0]])
    old = lp - torch.tensor([[0.3, -0.1, 0.0], [0.2, 0.0, 7.0]])
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    c = torch.tensor([[0.4, 0.0, -0.2], [-0.5, 0.25, 3.0]])  # log pi_old / pi_sampler per token
    vespo = POLICY_LOSSES.get("vespo")
    # w = prod pi/pi_old * prod pi_old/pi_sampler: the same as measuring the ratio against the sampler
    folded, m1 = vespo(lp, old, adv, mask, is_weights=torch.exp(c))
    as_sampler, m2 = vespo(lp, old - c, adv, mask)
    torch.testing.assert_close(folded[mask], as_sampler[mask])
    assert float(m1["phi_mean"]) == pytest.approx(float(m2["phi_mean"]))
    plain, _ = vespo(lp, old, adv, mask)
    assert not torch.allclose(folded[mask], plain[mask])  # (the weights changed phi)
    # a token masked out by token_mask (weight 0) counts as 1e-8: its row's weight is ~0, not NaN
    zeroed = torch.exp(c).index_put((torch.tensor([0]), torch.tensor([1])), torch.tensor(0.0))
    loss, _ = vespo(lp, old, adv, mask, is_weights=zeroed)
    assert torch.isfinite(loss).all() and float(loss[0].abs().max()) < 1e-12 and float(loss[1, 0]) != 0


def test_vespo_takes_the_sampler_weights_into_its_ratio_instead_of_as_a_factor():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    b.advantages = torch.tensor([[1.0, 1.0], [-1.0, 0.0]])
    current = torch.tensor([[-1.0, -1.0], [-1.0, -1.0]])
    b.sampler_logprobs = current - torch.log(
        torch.tensor([[3.0, 1.0], [0.5, 1.0]])
    )  # w: [2 (capped), 1], [0.5]
    algo = AlgoConfig(policy_loss="vespo", off_policy=OffPolicyConfig(tis_cap=2.0))
    loss, _ = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, current.clone(), None)
    # sequence ratios: row 0 w = 2 (A > 0: phi = e^3 2^2 e^-6), row 1 w = 0.5 (A < 0: phi = e^2 0.5^3 e^-1);
    # per-token loss -phi * A * logprobs (logprobs -1): +phi0 on row 0's 2 tokens, -phi1; token mean over 3
    phi0, phi1 = math.exp(3 - 6) * 4, math.exp(2 - 1) * 0.125
    assert loss.item() == pytest.approx((2 * phi0 - phi1) / 3, rel=1e-6)
    # as a factor instead (every other loss): phi 1, the token weights times A * -logprobs: (2 + 1 - 0.5) / 3
    assert loss.item() != pytest.approx(2.5 / 3, rel=1e-3)
    # precomputed weights (several updates per step) fold the same way
    b.old_logprobs = current.clone()
    attach_tis_weights(b, algo.off_policy)
    again, _ = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, current.clone(), None)
    assert again.item() == pytest.approx(loss.item(), rel=1e-6)
