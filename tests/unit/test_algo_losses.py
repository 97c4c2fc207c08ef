"""Policy losses: hand-computed values, gradients and metrics (intermediate values in comments), the
GSPO sequence-objective identity, and a sign test that one gradient step on a tiny categorical policy
moves probability toward positive advantages for every registered loss."""

from __future__ import annotations

import math

import pytest
import torch
from _tolerance import close

from reasonrl.algorithms import POLICY_LOSSES
from reasonrl.algorithms.masked import aggregate, masked_mean

T = torch.tensor
LN = math.log


def leaf(x):
    return T(x, dtype=torch.float32).requires_grad_(True)


def grad_of(loss, mask, lp):
    """d(sum of masked per-token loss)/d logprobs."""
    (g,) = torch.autograd.grad(torch.where(mask, loss, 0.0).sum(), lp)
    return g


# ---- ppo_clip ----------------------------------------------------------------------------------
# old_logprobs = 0, logprobs = log r. clip_low .2 (lower bound .8), clip_high .28 (upper 1.28).
# token  r     A    -rA    -clip(r)A   L = max      active branch -> dL/dlogprob = -A r or 0
#  a    1.5   +1   -1.5    -1.28      -1.28        clipped high   0
#  b    1.5   -1   +1.5    +1.28      +1.5         unclipped      1.5
#  c    0.5   -1   +0.5    +0.8       +0.8         clipped low    0
#  d    0.5   +1   -0.5    -0.8       -0.5         unclipped     -0.5
#  e    0.75  -2   +1.5    +1.6       +1.6         clipped low    0     (swapped bounds: .72 -> 1.5)
#  f    1.25  +2   -2.5    -2.5       -2.5         unclipped     -2.5   (swapped bounds: 1.2 -> -2.4)
#  pad  3.0   +1   masked out
PPO_R = [1.5, 1.5, 0.5, 0.5, 0.75, 1.25, 3.0]
PPO_A = [1.0, -1.0, -1.0, 1.0, -2.0, 2.0, 1.0]
PPO_MASK = T([[True] * 6 + [False]])


def test_ppo_clip_hand_computed():
    lp = leaf([[LN(r) for r in PPO_R]])
    loss, m = POLICY_LOSSES.get("ppo_clip")(
        lp, torch.zeros(1, 7), T([PPO_A]), PPO_MASK, clip_low=0.2, clip_high=0.28
    )
    close(loss[PPO_MASK], [-1.28, 1.5, 0.8, -0.5, 1.6, -2.5])
    close(grad_of(loss, PPO_MASK, lp), [[0.0, 1.5, 0.0, -0.5, 0.0, -2.5, 0.0]])
    # clipfrac_high: {a} -> 1/6 ; clipfrac_low: {c, e} -> 2/6 ; ratio mean (1.5+1.5+.5+.5+.75+1.25)/6 = 1
    # ratio_max 1.5 (3.0 is padding) ; approx_kl = mean(r - 1 - ln r):
    # 2*.094535 + 2*.193147 + .037682 + .026856 = .639902 -> /6 = .106650
    close(m["clipfrac_high"], 1 / 6)
    close(m["clipfrac_low"], 2 / 6)
    close(m["ratio_mean"], 1.0)
    close(m["ratio_max"], 1.5)
    close(m["approx_kl"], 0.106650)
    close(m["clipfrac_dual"], 0.0)


def test_ppo_dual_clip():
    # clip_c = 3. token g: r = 4, A = -1: max(4, 1.28) = 4 > bound -A*c = 3 -> 3, gradient 0.
    # token b (r 1.5, A -1) loss 1.5 < 3 is untouched; token h: r = 4, A = +1: max(-4, -1.28) = -1.28
    lp = leaf([[LN(4.0), LN(1.5), LN(4.0)]])
    mask = T([[True, True, True]])
    fn = POLICY_LOSSES.get("ppo_clip")
    loss, m = fn(
        lp, torch.zeros(1, 3), T([[-1.0, -1.0, 1.0]]), mask, clip_low=0.2, clip_high=0.28, clip_c=3.0
    )
    close(loss, [[3.0, 1.5, -1.28]])
    close(grad_of(loss, mask, lp), [[0.0, 1.5, 0.0]])
    close(m["clipfrac_dual"], 1 / 3)
    # without dual clip the first token's loss is the unbounded 4
    loss0, _ = fn(lp, torch.zeros(1, 3), T([[-1.0, -1.0, 1.0]]), mask, clip_low=0.2, clip_high=0.28)
    close(loss0, [[4.0, 1.5, -1.28]])
    with pytest.raises(ValueError, match="clip_c"):
        fn(lp, torch.zeros(1, 3), T([[-1.0, -1.0, 1.0]]), mask, clip_c=1.0)


def test_ppo_clip_and_dual_clip_with_fractional_advantages():
    # A = +-0.5 (GRPO's advantages are rarely +-1), clip .2 / .28, clip_c = 3:
    #  a: r 4,  A +.5: max(-2, -.5*1.28 = -.64) = -.64; clipped high; never dual-clipped (A > 0)
    #  b: r 4,  A -.5: max(2, .64) = 2 > bound -A*c = 1.5 -> 1.5 (dual)
    #  c: r .5, A -.5: max(.25, .5*.8 = .4) = .4, clipped low; under the bound
    #  d: r .5, A +.5: max(-.25, -.4) = -.25; r < .8 but A > 0: not clipped
    lp = leaf([[LN(4.0), LN(4.0), LN(0.5), LN(0.5)]])
    mask = T([[True, True, True, True]])
    adv = T([[0.5, -0.5, -0.5, 0.5]])
    loss, m = POLICY_LOSSES.get("ppo_clip")(lp, torch.zeros(1, 4), adv, mask, clip_low=0.2, clip_high=0.28,
                                            clip_c=3.0)  # fmt: skip
    close(loss, [[-0.64, 1.5, 0.4, -0.25]])
    close(m["clipfrac_high"], 1 / 4)
    close(m["clipfrac_low"], 1 / 4)
    close(m["clipfrac_dual"], 1 / 4)


def test_ppo_dual_clip_fraction_counts_the_tokens_over_the_bound():
    # clip_c = 2, A = -1 (bound 2): r 3 and r 5 are over it (loss 3, 5 -> 2), r 1.5 under; the fraction is
    # 2 of 3 tokens, not the 1 of 3 a reversed comparison would count
    lp = leaf([[LN(3.0), LN(5.0), LN(1.5)]])
    mask = T([[True, True, True]])
    loss, m = POLICY_LOSSES.get("ppo_clip")(lp, torch.zeros(1, 3), T([[-1.0, -1.0, -1.0]]), mask, clip_c=2.0)
    close(loss, [[2.0, 2.0, 1.5]])
    close(m["clipfrac_dual"], 2 / 3)


# ---- gspo --------------------------------------------------------------------------------------
# row 0: log ratios [.1, .3, pad 5] -> mean .2, s0 = e^.2 = 1.221403, A = +1
# row 1: log ratios [-.1, -.2, -.3]  -> mean -.2, s1 = e^-.2 = .818731, A = -1
# clip_low .3 (lower .7), clip_high .1 (upper 1.1):
# row 0: max(-1.221403, -1.1) = -1.1 (clipped high: gradient 0)
#        [swapped bounds: upper 1.3 -> -1.221403]
# row 1: clip(.818731) = .818731 -> +.818731 unclipped; d L_1t / d logprob_t = -A s1 = .818731
#        [swapped bounds: lower .9 -> max(.818731, .9) = .9]
def test_gspo_hand_computed():
    old = torch.zeros(2, 3)
    lp = leaf([[0.1, 0.3, 5.0], [-0.1, -0.2, -0.3]])
    mask = T([[True, True, False], [True, True, True]])
    adv = T([[1.0] * 3, [-1.0] * 3])
    loss, m = POLICY_LOSSES.get("gspo")(lp, old, adv, mask, clip_low=0.3, clip_high=0.1)
    close(loss[0, :2], [-1.1, -1.1])
    close(loss[1], [0.818731] * 3)
    close(grad_of(loss, mask, lp), [[0.0, 0.0, 0.0], [0.818731] * 3])
    # ratio metrics report s_i on each token: mean (2*1.221403 + 3*.818731)/5 = .979800
    close(m["ratio_mean"], 0.979800)
    close(m["ratio_max"], 1.221403)
    close(m["clipfrac_high"], 2 / 5)
    close(m["clipfrac_low"], 0.0)


def test_gspo_equals_sequence_objective():
    # with A constant per row and seq_mean_token_mean aggregation, GSPO-token equals the paper's
    # J = mean_i min(s_i A_i, clip(s_i) A_i) in value and gradient
    g = torch.Generator().manual_seed(1)
    B, Tn = 6, 7
    old = -torch.rand(B, Tn, generator=g) * 3
    lp = (old + 0.2 * torch.randn(B, Tn, generator=g)).requires_grad_(True)
    mask = torch.arange(Tn).expand(B, Tn) < T([7, 1, 4, 5, 3, 6]).unsqueeze(-1)
    a = torch.randn(B, generator=g)
    loss, _ = POLICY_LOSSES.get("gspo")(
        lp, old, a.unsqueeze(-1).expand(B, Tn), mask, clip_low=0.05, clip_high=0.08
    )
    ours = aggregate(loss, mask, "seq_mean_token_mean")
    s = torch.exp(masked_mean(lp - old, mask, dim=-1))
    ref = -torch.minimum(s * a, s.clamp(0.95, 1.08) * a).mean()
    close(ours, ref)
    g1 = torch.autograd.grad(ours, lp)[0]
    g2 = torch.autograd.grad(ref, lp)[0]
    close(g1, g2)
    assert g1.abs().sum() > 0


# ---- cispo -------------------------------------------------------------------------------------
# old = [-1, -2, -.5], r = [1.5, .5, 1] -> logprobs = [-.594535, -2.693147, -.5], A = [1, -1, 2]
# clip_low .2, clip_high .28: w = sg(clip(r, .8, 1.28)) = [1.28, .8, 1]
# L = -w A logprob = [-1.28*1*-.594535, -.8*-1*-2.693147, -1*2*-.5] = [.761005, -2.154518, 1.0]
# dL/dlogprob = -w A = [-1.28, .8, -2]      [swapped bounds: w = [1.2, .72, 1] -> [-1.2, .72, -2]]
def test_cispo_hand_computed():
    old = T([[-1.0, -2.0, -0.5]])
    lp = leaf([[-1.0 + LN(1.5), -2.0 + LN(0.5), -0.5]])
    mask = T([[True, True, True]])
    loss, m = POLICY_LOSSES.get("cispo")(lp, old, T([[1.0, -1.0, 2.0]]), mask, clip_low=0.2, clip_high=0.28)
    close(loss, [[0.761005, -2.154518, 1.0]])
    close(grad_of(loss, mask, lp), [[-1.28, 0.8, -2.0]])
    # clipped whatever the sign of A: high {1.5} 1/3, low {.5} 1/3; approx_kl (.094535 + .193147 + 0)/3
    close(m["clipfrac_high"], 1 / 3)
    close(m["clipfrac_low"], 1 / 3)
    close(m["approx_kl"], 0.095894)


def test_cispo_default_has_no_lower_bound():
    # clip_low=1.0 by default: a ratio of .1 is not raised; weight .1 -> gradient -.1 * A
    lp = leaf([[LN(0.1)]])
    loss, _ = POLICY_LOSSES.get("cispo")(lp, torch.zeros(1, 1), T([[1.0]]), T([[True]]))
    close(grad_of(loss, T([[True]]), lp), [[-0.1]])


# ---- reinforce ---------------------------------------------------------------------------------
def test_reinforce_hand_computed():
    # L = -A logprob: [-2*-.5, -(-1)*-1] = [1, -1]; gradient -A = [-2, 1]; ratio e^(lp-old) = [e^.5, 1]
    lp = leaf([[-0.5, -1.0]])
    mask = T([[True, True]])
    loss, m = POLICY_LOSSES.get("reinforce")(
        lp, T([[-1.0, -1.0]]), T([[2.0, -1.0]]), mask, clip_low=0.2, clip_high=0.2
    )
    close(loss, [[1.0, -1.0]])
    close(grad_of(loss, mask, lp), [[-2.0, 1.0]])
    close(m["ratio_max"], math.exp(0.5))
    close(m["clipfrac_low"], 0.0)


# ---- gmpo --------------------------------------------------------------------------------------
# old = 0, logprobs = l; clip .4 / .4 in log space.
# row 0: A = +1, l = [.1, .5, -.2] -> min(l, clip(l)) = [.1, .4, -.2], mean .1, rho = e^.1 = 1.1051709
#        loss -1.1051709 on each token; d(row value)/dl_t = -A rho / 3 = -.3683903, 0 for the clipped .5
# row 1: A = -2, l = [-.6, .3], padding l = 5 -> max(l, clip(l)) = [-.4, .3], mean -.05,
#        rho = e^-.05 = .9512294; loss +1.9024588; d/dl_t = 2 rho / 2 = .9512294, 0 for the clipped -.6
def test_gmpo_hand_computed():
    lp = leaf([[0.1, 0.5, -0.2], [-0.6, 0.3, 5.0]])
    adv = T([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    mask = T([[True, True, True], [True, True, False]])
    loss, m = POLICY_LOSSES.get("gmpo")(lp, torch.zeros(2, 3), adv, mask)
    close(loss[0], [-1.1051709] * 3, rtol=1e-6)
    close(loss[1, :2], [1.9024588] * 2, rtol=1e-6)
    (g,) = torch.autograd.grad(loss[0, 0] + loss[1, 0], lp)  # one copy of each row's value
    close(g, [[-0.3683903, 0.0, -0.3683903], [0.0, 0.9512294, 0.0]], rtol=1e-6)
    close(m["clipfrac_high"], 0.2)  # row 0's .5
    close(m["clipfrac_low"], 0.2)  # row 1's -.6
    close(m["ratio_max"], 1.1051709, rtol=1e-6)
    close(m["ratio_mean"], (3 * 1.1051709 + 2 * 0.9512294) / 5, rtol=1e-6)
    # seq_mean_token_mean gives the paper's -mean_i A_i rho_i
    close(aggregate(loss, mask, "seq_mean_token_mean"), (-1.1051709 + 1.9024588) / 2, rtol=1e-6)


def test_gmpo_clip_fractions_count_only_the_side_the_advantage_pushes():
    # A = .5 > 0 with l = -.6 below the band: the clip is not active there (it only caps gains); A = -1
    # with l = .2, .3 inside the band: nothing clipped either
    _, m = POLICY_LOSSES.get("gmpo")(
        T([[-0.6], [0.2]]), torch.zeros(2, 1), T([[0.5], [-1.0]]), T([[True], [True]])
    )
    assert (m["clipfrac_low"].item(), m["clipfrac_high"].item()) == (0.0, 0.0)


def test_gmpo_on_policy_gradient_equals_grpo_sequence_mean():
    # rho = 1 on policy: the gradient of -A rho per row is -A mean_t d logprobs, GRPO's (ppo_clip with
    # seq_mean_token_mean) exactly
    g = torch.Generator().manual_seed(4)
    base = -torch.rand(3, 4, generator=g)
    mask = T([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]).bool()
    adv = torch.randn(3, 1, generator=g).expand(3, 4)
    grads = []
    for name in ("gmpo", "ppo_clip"):
        lp = base.clone().requires_grad_(True)
        loss, _ = POLICY_LOSSES.get(name)(lp, lp.detach(), adv, mask)
        (grad,) = torch.autograd.grad(aggregate(loss, mask, "seq_mean_token_mean"), lp)
        grads.append(grad)
    close(grads[0], grads[1], rtol=1e-6)


# ---- sapo --------------------------------------------------------------------------------------
# old = 0, logprobs = log r; s = sigmoid(tau (r - 1)), tau = 1.0 where A > 0, 1.05 otherwise;
# L = -s * 4 / tau * A; dL/dlogprob = -4 A s (1 - s) r.
# token  r    A     tau   s          L           dL/dlogprob
#  a    1.5  +1    1.0   0.6224593  -2.4898373  -1.4100223
#  b    0.5  -1    1.05  0.3716838  +1.4159383  +0.4670699
#  c    1.0  +2    1.0   0.5        -4.0        -2.0        (on policy: exactly the plain gradient -A)
#  d    2.0  -0.5  1.05  0.7407749  +1.4109998  +0.7681098
#  pad  3.0  +1    masked out
def test_sapo_hand_computed():
    lp = leaf([[LN(1.5), LN(0.5), 0.0, LN(2.0), LN(3.0)]])
    adv, mask = T([[1.0, -1.0, 2.0, -0.5, 1.0]]), T([[True] * 4 + [False]])
    loss, m = POLICY_LOSSES.get("sapo")(lp, torch.zeros(1, 5), adv, mask)
    close(loss[0, :4], [-2.4898373, 1.4159383, -4.0, 1.4109998], rtol=1e-6)
    close(grad_of(loss, mask, lp)[0], [-1.4100223, 0.4670699, -2.0, 0.7681098, 0.0], rtol=1e-6)
    close(m["gate_weight_mean"], (1.4100223 + 0.4670699 + 1.0 + 1.5362196) / 4, rtol=1e-6)
    close(m["clipfrac_low"], 0.0)
    close(m["clipfrac_high"], 0.0)
    close(m["ratio_max"], 2.0)


def test_sapo_takes_its_temperatures_and_refuses_nonpositive_ones():
    lp = leaf([[LN(1.5), LN(0.5)]])
    adv, mask = T([[1.0, -1.0]]), T([[True, True]])
    # tau_pos 2 on token a: s = sigmoid(1) = 0.7310586, L = -s * 2 = -1.4621172; tau_neg 0.5 on b:
    # s = sigmoid(-0.25) = 0.4378235, L = +s * 8 = 3.5025880
    loss, _ = POLICY_LOSSES.get("sapo")(lp, torch.zeros(1, 2), adv, mask, tau_pos=2.0, tau_neg=0.5)
    close(loss[0], [-1.4621172, 3.5025880], rtol=1e-6)
    with pytest.raises(ValueError, match="tau_pos and tau_neg must be > 0"):
        POLICY_LOSSES.get("sapo")(lp, torch.zeros(1, 2), adv, mask, tau_neg=0.0)


# ---- shared behaviour --------------------------------------------------------------------------
ALL = ["ppo_clip", "gspo", "gmpo", "cispo", "sapo", "reinforce"]


@pytest.mark.parametrize("name", ALL)
def test_api_shape_metrics_and_padding_garbage(name):
    g = torch.Generator().manual_seed(2)
    old = -torch.rand(3, 5, generator=g)
    lp = (old + 0.1 * torch.randn(3, 5, generator=g)).requires_grad_(True)
    mask = T([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]).bool()
    adv = torch.randn(3, 1, generator=g).expand(3, 5)
    old = torch.where(mask, old, T(100.0))  # huge log ratio on padding must not leak into metrics
    loss, m = POLICY_LOSSES.get(name)(lp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    assert loss.shape == (3, 5)
    assert {"clipfrac_low", "clipfrac_high", "ratio_mean", "ratio_max", "approx_kl"} <= set(m)
    for k, v in m.items():
        assert v.dim() == 0 and torch.isfinite(v), k
        assert not v.requires_grad, k
    assert m["ratio_max"] < 2.0
    POLICY_LOSSES.check_kwargs(name, ["clip_low", "clip_high"])


@pytest.mark.parametrize("name", ALL)
def test_one_step_moves_probability_toward_positive_advantage(name):
    # a 4-action categorical policy; sampled actions [0, 1, 0, 2] with advantages [+1, -1, +1, -.5].
    # One SGD step on the aggregated loss must raise p(0) and lower p(1) and p(2) (flip a sign anywhere
    # in a loss and this fails).
    logits = torch.zeros(4, requires_grad=True)
    actions = T([[0, 1, 0, 2]])
    adv = T([[1.0, -1.0, 1.0, -0.5]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    lp = torch.log_softmax(logits, -1)[actions]
    loss, _ = POLICY_LOSSES.get(name)(lp, lp.detach(), adv, mask, clip_low=0.2, clip_high=0.28)
    aggregate(loss, mask, "token_mean").backward()
    with torch.no_grad():
        p0 = torch.softmax(logits, -1)
        p1 = torch.softmax(logits - 0.5 * logits.grad, -1)
    assert p1[0] > p0[0] and p1[1] < p0[1] and p1[2] < p0[2]


def test_api_example():
    logprobs = T([[-1.0, -2.0]], requires_grad=True)
    old_logprobs = T([[-1.0, -2.1]])
    advantages = T([[0.5, 0.5]])
    mask = T([[True, True]])
    loss, metrics = POLICY_LOSSES.get("ppo_clip")(
        logprobs, old_logprobs, advantages, mask, clip_low=0.2, clip_high=0.28
    )
    # r = [1, e^.1 = 1.105171] (< 1.28, unclipped) -> L = -.5 r = [-.5, -.552585]
    close(loss, [[-0.5, -0.552585]])
    close(metrics["ratio_mean"], (1 + 1.105171) / 2)


def test_clip_fractions_count_only_tokens_strictly_past_a_bound_with_an_advantage_pushing_past_it():
    # float64, ratios exactly 0.5 and 2.0 = the bounds for clip_low 0.5 / clip_high 1.0: at a bound
    # the clipped and unclipped terms are equal, so the clip is not active there (verl counts
    # pg_losses2 > pg_losses1, strictly); a zero advantage never makes a token clipped
    r = T([[0.5, 2.0, 0.25, 4.0, 0.25, 4.0, 0.25, 4.0]], dtype=torch.float64)
    adv = T([[-1.0, 1.0, -1.0, 1.0, 0.0, 0.0, 1.0, -1.0]], dtype=torch.float64)
    mask = torch.ones_like(r, dtype=torch.bool)
    _, m = POLICY_LOSSES.get("ppo_clip")(r.log(), torch.zeros_like(r), adv, mask, clip_low=0.5, clip_high=1.0)
    assert m["clipfrac_low"].item() == pytest.approx(1 / 8)  # only token 2 (0.25 < 0.5, A < 0)
    assert m["clipfrac_high"].item() == pytest.approx(1 / 8)  # only token 3 (4 > 2, A > 0)
    # cispo clips the weight whatever the sign of A, but not at the bounds themselves
    _, m = POLICY_LOSSES.get("cispo")(r.log(), torch.zeros_like(r), adv, mask, clip_low=0.5, clip_high=1.0)
    assert m["clipfrac_low"].item() == pytest.approx(3 / 8) and m["clipfrac_high"].item() == pytest.approx(
        3 / 8
    )
    # the dual clip accepts any c > 1
    _, m = POLICY_LOSSES.get("ppo_clip")(r.log(), torch.zeros_like(r), adv, mask, clip_c=1.5)
    assert m["clipfrac_dual"].item() > 0
