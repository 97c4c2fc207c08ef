"""Importance correction for the rollout-engine / trainer mismatch (the sampler is not exactly the
policy whose log-probabilities the trainer recomputes: different kernels, precision, batching).

Owns: truncated importance sampling weights. Does not own: producing `sampler_logprobs` (the rollout
engine) or applying the weights (the trainer multiplies the per-token policy loss by them before
`masked.aggregate`).

tis_weights (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training",
fengyao.notion.site/off-policy-rl; Ionides 2008 for truncated IS):
    w_t = min(exp(old_logprobs_t - sampler_logprobs_t), cap)        token level, no gradient
    L'_t = w_t * L_t  (per-token policy loss)
Shapes: [B, T] in, weights [B, T] out (0 where `mask` is False). Metrics (masked means over this call):
is_weight_mean, is_capped_frac (tokens where the cap bit), mismatch_kl (k3 estimate of
KL(sampler || trainer) from the sampled tokens: w - 1 - log w with the uncapped w).
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.masked import masked_mean


def tis_weights(
    old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor, cap: float = 2.0
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Truncated IS weights [B, T] (detached) and their metrics."""
    if cap <= 0:
        raise ValueError(f"tis_weights: cap must be > 0, got {cap}")
    with torch.no_grad():
        log_w = (old_logprobs - sampler_logprobs).clamp(-20.0, 20.0)
        w = torch.exp(log_w)
        capped = w > cap
        weights = torch.where(mask, w.clamp(max=cap), 0.0)
        metrics = {
            "is_weight_mean": masked_mean(weights, mask),
            "is_capped_frac": masked_mean(capped.to(w.dtype), mask),
            "mismatch_kl": masked_mean(torch.expm1(log_w) - log_w, mask),
        }
    return weights, metrics
