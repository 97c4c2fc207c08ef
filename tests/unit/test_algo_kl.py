"""KL estimators and KL-in-reward shaping: hand-computed values and gradients, exact expectations over
a small vocabulary (k1 and k3 are unbiased for KL(pi || ref); expected gradients of k1 / k2 / k3 as
loss terms are 0 / grad KL(pi || ref) / grad KL(ref || pi), as the module docstring states)."""

from __future__ import annotations

import math

import pytest
import torch
from _tolerance import close

from reasonrl.algorithms.kl import KL_ESTIMATORS, fold_kl_into_rewards, importance_weighted, kl_penalty

T = torch.tensor


# d = logprobs - ref = [.5, -.5, 0, 2]
# k1 = d ; k2 = d^2/2 = [.125, .125, 0, 2] ; abs = [.5, .5, 0, 2]
# k3 = e^-d - 1 + d = [.606531 - .5, 1.648721 - 1.5, 0, .135335 + 1] = [.106531, .148721, 0, 1.135335]
# gradients d/dlogprobs: k1 1 ; k2 d ; k3 1 - e^-d = [.393469, -.648721, 0, .864665] ; abs sign(d)
D = [0.5, -0.5, 0.0, 2.0]
KL_CASES = [
    ("k1", D, [1.0, 1.0, 1.0, 1.0]),
    ("k2", [0.125, 0.125, 0.0, 2.0], D),
    ("k3", [0.106531, 0.148721, 0.0, 1.135335], [0.393469, -0.648721, 0.0, 0.864665]),
    ("abs", [0.5, 0.5, 0.0, 2.0], [1.0, -1.0, 0.0, 1.0]),
]


@pytest.mark.parametrize("est,value,grad", KL_CASES)
def test_kl_estimators_hand_computed(est, value, grad):
    ref = T([[-1.0, -2.0, -0.5, -3.0]])
    lp = (ref + T([D])).requires_grad_(True)
    kl = kl_penalty(lp, ref, est)
    close(kl, [value])
    kl.sum().backward()
    close(lp.grad, [grad])


def test_k3_is_stable_for_extreme_ratios():
    kl = kl_penalty(T([0.0, -100.0]), T([-100.0, 0.0]), "k3")
    assert torch.isfinite(kl).all() and (kl >= 0).all()


def test_the_default_estimator_is_k3():  # (GRPO's choice)
    lp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -0.5]])
    close(kl_penalty(lp, ref), kl_penalty(lp, ref, "k3"))
    assert not torch.allclose(kl_penalty(lp, ref), kl_penalty(lp, ref, "k1"))


def test_unknown_estimator():
    with pytest.raises(ValueError, match="k1, k2, k3, abs"):
        kl_penalty(T([0.0]), T([0.0]), "low_var")


def _exact(est: str):
    """E_{a ~ pi}[k(a)] and E_{a ~ pi}[grad k(a)] (the sampling distribution held fixed)."""
    theta = T([0.3, -0.2, 1.0, 0.0, -1.5], requires_grad=True)
    ref = torch.log_softmax(T([0.0, 0.5, -0.5, 1.0, 0.2]), -1)
    logp = torch.log_softmax(theta, -1)
    p = logp.exp().detach()
    expected = (p * kl_penalty(logp, ref, est)).sum()
    (grad,) = torch.autograd.grad(expected, theta)
    return theta, logp, ref, expected, grad


def test_k1_k3_unbiased_and_expected_gradients():
    theta, _, ref, e1, g1 = _exact("k1")
    logp = torch.log_softmax(theta, -1)  # fresh graph (_exact's was consumed)
    kl_fwd = (logp.exp() * (logp - ref)).sum()  # KL(pi || ref)
    kl_rev = (ref.exp() * (ref - logp)).sum()  # KL(ref || pi)
    (g_fwd,) = torch.autograd.grad(kl_fwd, theta, retain_graph=True)
    (g_rev,) = torch.autograd.grad(kl_rev, theta)
    close(e1, kl_fwd.detach())
    close(g1, torch.zeros(5), atol=1e-6)  # k1 as a loss: zero expected gradient
    _, _, _, e3, g3 = _exact("k3")
    close(e3, kl_fwd.detach())
    close(g3, g_rev)  # k3 as a loss: gradient of KL(ref || pi)
    _, _, _, _, g2 = _exact("k2")
    close(g2, g_fwd)  # k2 as a loss: gradient of KL(pi || ref)


def test_importance_weighted_k3_is_unbiased_off_policy_in_value_and_gradient():
    # tokens drawn from pi_old != pi: E_old[(pi / pi_old) k3] = KL(pi || ref) and its gradient is that of
    # KL(pi || ref) exactly (DeepSeek-V3.2); plain k3 under pi_old is neither (the comparison below)
    theta = T([0.3, -0.2, 1.0, 0.0, -1.5], requires_grad=True)
    ref = torch.log_softmax(T([0.0, 0.5, -0.5, 1.0, 0.2]), -1)
    old = torch.log_softmax(T([1.0, 0.0, -1.0, 0.5, 0.0]), -1)  # the sampling policy
    logp = torch.log_softmax(theta, -1)
    p_old = old.exp()
    weighted = (p_old * importance_weighted(kl_penalty(logp, ref, "k3"), logp, old)).sum()
    kl_fwd = (logp.exp() * (logp - ref)).sum()
    (g_w,) = torch.autograd.grad(weighted, theta, retain_graph=True)
    (g_fwd,) = torch.autograd.grad(kl_fwd, theta, retain_graph=True)
    close(weighted.detach(), kl_fwd.detach())
    close(g_w, g_fwd)
    plain = (p_old * kl_penalty(logp, ref, "k3")).sum()
    (g_plain,) = torch.autograd.grad(plain, theta)
    assert abs(plain.item() - kl_fwd.item()) > 1e-2 and (g_plain - g_fwd).abs().max() > 1e-2


def test_importance_weighted_clamps_the_log_ratio_to_20():
    w = importance_weighted(T([[1.0, 1.0]]), T([[50.0, -50.0]]), T([[0.0, 0.0]]))
    close(w, [[math.exp(20.0), math.exp(-20.0)]], rtol=1e-6)


def test_importance_weighted_on_policy_is_value_one_plus_the_score_term():
    # pi_old = sg(pi): value unchanged, gradient d kl + kl * d logprobs. kl = k3 at d = .5: .106531,
    # d k3 / d logprobs = .393469, so the gradient is .393469 + .106531 = .5
    lp = T([[-1.0]], requires_grad=True)
    w = importance_weighted(kl_penalty(lp, T([[-1.5]]), "k3"), lp, lp.detach())
    close(w, [[0.106531]])
    w.sum().backward()
    close(lp.grad, [[0.5]])


def test_fold_kl_into_rewards():
    # coef .1: row 0 kl [.1, .2, .3] -> [-.01, -.02, -.03 + 1] ; row 1 mask [1, 1, 0], kl [.5, .5, 9]
    # -> [-.05, -.05 + 0 (reward 0 on last trainable), 0 on padding]
    kl = T([[0.1, 0.2, 0.3], [0.5, 0.5, 9.0]], requires_grad=True)
    mask = T([[True, True, True], [True, True, False]])
    out = fold_kl_into_rewards(T([1.0, 0.0]), kl, mask, kl_coef=0.1)
    close(out, [[-0.01, -0.02, 0.97], [-0.05, -0.05, 0.0]])
    assert not out.requires_grad  # rewards are constants
    # summed over tokens: r_i - coef * sum_t kl_it = [1 - .06, 0 - .1]
    close(out.sum(-1), [0.94, -0.1])


def test_estimator_list():
    assert KL_ESTIMATORS == ("k1", "k2", "k3", "abs")


def test_log_ratios_are_clamped_to_plus_minus_20():
    """docs/algorithms.md: k3's d, the policy loss's log ratio and the TIS log weight are clamped to
    [-20, 20], so one token the sampler found near-impossible cannot overflow a batch."""
    from reasonrl.algorithms.correction import tis_weights
    from reasonrl.algorithms.losses import POLICY_LOSSES

    far = torch.tensor([[-50.0, 50.0]])
    zero, mask = torch.zeros_like(far), torch.ones_like(far, dtype=torch.bool)
    k3 = kl_penalty(far, zero, "k3")
    assert torch.equal(k3, torch.expm1(torch.tensor([[20.0, -20.0]])) + torch.tensor([[-20.0, 20.0]]))
    _, metrics = POLICY_LOSSES.get("ppo_clip")(far, zero, torch.ones_like(far), mask)
    assert metrics["ratio_max"].item() == pytest.approx(torch.exp(torch.tensor(20.0)).item(), rel=1e-6)
    weights, _ = tis_weights(far, zero, mask, cap=1e12)  # exp(old - sampler), capped far above
    assert weights[0, 0].item() == pytest.approx(torch.exp(torch.tensor(-20.0)).item(), rel=1e-6)
    assert weights[0, 1].item() == pytest.approx(torch.exp(torch.tensor(20.0)).item(), rel=1e-6)
