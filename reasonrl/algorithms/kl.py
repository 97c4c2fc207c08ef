"""KL between the current policy and a reference: per-token estimators and the shaping that folds
them into token rewards.

Owns: `kl_penalty` (the estimators, used as a loss term or as a reward penalty),
`fold_kl_into_rewards` (PPO / REINFORCE++ style KL-in-reward) and `adaptive_kl_coef` (one step of the
adaptive controller). Does not own: the coefficient's state across a run (`trainer.kl_control`) or
aggregation (`masked.aggregate`).

Estimators (Schulman, "Approximating KL divergence", 2020), with d = logprobs - ref_logprobs on
tokens sampled from the current policy:

  k1  = d                      unbiased for KL(pi || ref), high variance, can be negative
  k2  = d^2 / 2                ("mse"), biased, low variance
  k3  = exp(-d) - 1 + d        ("low_var_kl"), unbiased, always >= 0 (GRPO's choice)
  abs = |d|

Shapes: [B, T] in, [B, T] out. d is clamped to [-20, 20] for k3 (exp overflow).
As a differentiable loss term, the expected gradients differ from the values' meaning: k1's expected
gradient is 0, k2's equals the gradient of KL(pi || ref), k3's that of KL(ref || pi) (on-policy
samples). GRPO uses k3 as a loss term; REINFORCE++ uses k2; PPO-RLHF folds k1 into the reward.

`importance_weighted(kl, logprobs, old_logprobs)` = kl * pi / pi_old per token, the ratio kept in the
graph (DeepSeek-AI 2025, DeepSeek-V3.2, arXiv:2512.02556, section 3.1's unbiased KL estimate; TRL's
`use_bias_correction_kl`). With k3 and tokens sampled from pi_old, E[r k3] = KL(pi || ref) and its
expected gradient is exactly that of KL(pi || ref), however far pi has moved from pi_old; k3 alone has
the gradient of KL(ref || pi) only on-policy and drifts off-policy (tested by enumeration). On-policy
(pi_old = sg(pi)) the weight has value 1 and adds the score-function term kl * d logprobs.

`adaptive_kl_coef(coef, kl, target, horizon, n)` (Ziegler et al. 2019, "Fine-Tuning Language Models from
Human Preferences", arXiv:1909.08593, section 2.2; verl's AdaptiveKLController, OpenRLHF's kl_target):
    e = clip(kl / target - 1, -0.2, 0.2);   coef <- coef * (1 + e * n / horizon)
a proportional controller: the coefficient grows while the measured KL is above the target and shrinks
while below, by at most 20% of n / horizon per call (n: the sequences the KL was measured on).
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.masked import last_token_values

KL_ESTIMATORS = ("k1", "k2", "k3", "abs")


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL estimate [B, T]; differentiable in `logprobs`."""
    d = logprobs - ref_logprobs
    if estimator == "k1":
        return d
    if estimator == "k2":
        return 0.5 * d * d
    if estimator == "k3":
        d = d.clamp(-20.0, 20.0)
        return torch.expm1(-d) + d
    if estimator == "abs":
        return d.abs()
    raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")


def fold_kl_into_rewards(
    rewards: torch.Tensor, kl: torch.Tensor, mask: torch.Tensor, kl_coef: float
) -> torch.Tensor:
    """Token rewards [B, T] = -kl_coef * kl_t on every trainable token, plus the outcome reward [B]
    on each row's last trainable token; 0 where `mask` is False.

    `kl` [B, T] comes from `kl_penalty(old_logprobs, ref_logprobs, estimator)` (no gradient: rewards
    are constants). Feed the result to `gae(..., token_rewards=...)` or sum it over tokens for a
    sequence-level estimator: r'_i = r_i - kl_coef * sum_t kl_it.
    """
    penalty = torch.where(mask, -kl_coef * kl.detach(), 0.0)
    return penalty + last_token_values(rewards.to(penalty.dtype), mask)


def importance_weighted(kl: torch.Tensor, logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """`kl` [B, T] times pi / pi_old (log ratio clamped to [-20, 20]); differentiable in `logprobs`."""
    return kl * torch.exp((logprobs - old_logprobs.detach()).clamp(-20.0, 20.0))


def adaptive_kl_coef(coef: float, kl: float, target: float, horizon: int, n: int) -> float:
    """The KL coefficient after a batch of `n` sequences whose mean KL was `kl` (see the module doc)."""
    if target <= 0 or horizon <= 0:
        raise ValueError(
            f"adaptive KL needs target > 0 and horizon > 0, got target={target}, horizon={horizon}"
        )
    error = min(max(kl / target - 1.0, -0.2), 0.2)
    return coef * (1.0 + error * n / horizon)
