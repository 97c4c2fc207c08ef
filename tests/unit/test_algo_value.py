"""Clipped PPO value loss and truncated importance sampling weights: hand-computed values, gradients
and metrics."""

from __future__ import annotations

import pytest
import torch
from _tolerance import close

from reasonrl.algorithms.correction import tis_weights
from reasonrl.algorithms.value import value_loss

T = torch.tensor


# clip_range .2. token: values, old, returns -> v_clip = old + clip(v - old, +-.2)
#  t0: 1.1, .8, 1.2 -> v_clip 1.0 ; unclipped .01, clipped .04 -> L = .02, clipped wins, grad 0
#  t1: .5, .8, 1.0  -> v_clip .6  ; unclipped .25, clipped .16 -> L = .125, grad (v - R) = -.5
#  t2: 2.0, 1.0, 1.0 -> v_clip 1.2 ; unclipped 1.0, clipped .04 -> L = .5, grad 1.0
#  t3: padding (masked out)
# metrics over t0..t2: vf_clipfrac 1/3 ; value_mean 3.6/3 = 1.2 ; value_error (.01+.25+1)/3 = .42
# explained_var: Var(R) = .008889, Var(R - V) = Var([.1, .5, -1]) = .402222 -> 1 - 45.25 = -44.25
def test_value_loss_hand_computed():
    v = T([[1.1, 0.5, 2.0, 50.0]], requires_grad=True)
    old, ret = T([[0.8, 0.8, 1.0, 0.0]]), T([[1.2, 1.0, 1.0, 0.0]])
    mask = T([[True, True, True, False]])
    loss, m = value_loss(v, old, ret, mask, clip_range=0.2)
    close(loss[mask], [0.02, 0.125, 0.5])
    torch.where(mask, loss, 0.0).sum().backward()
    close(v.grad, [[0.0, -0.5, 1.0, 0.0]])
    close(m["vf_clipfrac"], 1 / 3)
    close(m["value_mean"], 1.2)
    close(m["value_error"], 0.42)
    close(m["explained_var"], -44.25, rtol=1e-4)
    assert torch.equal(value_loss(v, old, ret, mask)[0], loss)  # the default clip range is 0.2


def test_value_loss_unclipped():
    # .5 * (v - R)^2 = [.005, .125, .5] ; grad (v - R) = [-.1, -.5, 1]
    v = T([[1.1, 0.5, 2.0]], requires_grad=True)
    loss, m = value_loss(
        v, T([[0.8, 0.8, 1.0]]), T([[1.2, 1.0, 1.0]]), torch.ones(1, 3, dtype=torch.bool), clip_range=None
    )
    close(loss, [[0.005, 0.125, 0.5]])
    loss.sum().backward()
    close(v.grad, [[-0.1, -0.5, 1.0]])
    close(m["vf_clipfrac"], 0.0)


def test_value_clip_holds_a_value_moving_down():
    # v .2, old .8, R .1: v_clip = .8 + clip(-.6, +-.2) = .6; unclipped .01, clipped .25 -> L = .125, the
    # clipped branch wins, so no gradient (the value may not move more than .2 below its old value)
    v = T([[0.2]], requires_grad=True)
    loss, m = value_loss(v, T([[0.8]]), T([[0.1]]), torch.ones(1, 1, dtype=torch.bool), clip_range=0.2)
    close(loss, [[0.125]])
    loss.sum().backward()
    close(v.grad, [[0.0]])
    close(m["vf_clipfrac"], 1.0)


def test_a_value_moving_within_the_clip_range_is_not_clipped():
    # v .9, old .8 (moved .1 < .2): v_clip = v, both branches equal: loss .5 * (.9 - 1)^2, full gradient
    v = T([[0.9]], requires_grad=True)
    loss, m = value_loss(v, T([[0.8]]), T([[1.0]]), torch.ones(1, 1, dtype=torch.bool), clip_range=0.2)
    close(loss, [[0.005]])
    close(m["vf_clipfrac"], 0.0)


def test_perfect_critic_explains_everything():
    r = T([[1.0, 2.0, 4.0]])
    _, m = value_loss(r.clone(), r.clone(), r, torch.ones(1, 3, dtype=torch.bool))
    close(m["explained_var"], 1.0)
    close(m["value_error"], 0.0)


# old = -1 everywhere; sampler [-1, -1.5, -.5, -3] -> log w = [0, .5, -.5, 2]
# w = [1, 1.648721, .606531, 7.389056] ; cap 2 -> [1, 1.648721, .606531, 2]
# is_weight_mean 5.255252/4 = 1.313813 ; is_capped_frac 1/4
# mismatch_kl = mean(w - 1 - log w) = (0 + .148721 + .106531 + 4.389056)/4 = 1.161077
# row 1 is padding with a huge mismatch: weight 0, excluded from metrics
def test_tis_weights_hand_computed():
    old = T([[-1.0, -1.0, -1.0, -1.0], [0.0, 0.0, 0.0, 0.0]], requires_grad=True)
    sampler = T([[-1.0, -1.5, -0.5, -3.0], [-50.0, -50.0, -50.0, -50.0]])
    mask = T([[True] * 4, [False] * 4])
    w, m = tis_weights(old, sampler, mask, cap=2.0)
    close(w, [[1.0, 1.648721, 0.606531, 2.0], [0.0] * 4])
    assert not w.requires_grad
    close(m["is_weight_mean"], 1.313813)
    close(m["is_capped_frac"], 0.25)
    close(m["mismatch_kl"], 1.161077)


def test_tis_identical_logprobs_give_unit_weights():
    lp = -torch.rand(3, 4)
    w, m = tis_weights(lp, lp.clone(), torch.ones(3, 4, dtype=torch.bool), cap=1.0)
    close(w, torch.ones(3, 4))
    close(m["mismatch_kl"], 0.0)
    close(m["is_capped_frac"], 0.0)  # a weight exactly at the cap is not cut by it
    assert (
        tis_weights(lp, lp - 3.0, torch.ones(3, 4, dtype=torch.bool))[0].max().item() == 2.0
    )  # default cap 2
    with pytest.raises(ValueError, match="cap"):
        tis_weights(lp, lp, torch.ones(3, 4, dtype=torch.bool), cap=0.0)
