"""Policy losses (registry `POLICY_LOSSES`).

Signature: `fn(logprobs [B,T], old_logprobs [B,T], advantages [B,T], mask bool [B,T], **options)
-> (per_token_loss [B,T], metrics: dict[str, scalar tensor])`. Aggregation over tokens is separate
(`algorithms.masked.aggregate`); metrics are masked means over this call's tokens.

ppo_clip (Schulman et al. 2017, arXiv:1707.06347; asymmetric "clip-higher" from DAPO, arXiv:2503.14476):
    ratio = exp(logprobs - old_logprobs)
    L = -min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)
    dual-clip (Ye et al. 2020, arXiv:1912.09729) when clip_c is set (> 1): for A < 0 the loss is
    further bounded, L = min(L, -clip_c * A).
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.masked import masked_mean
from reasonrl.registry import Registry

POLICY_LOSSES: Registry = Registry("policy loss", positional=4)


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_c: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    log_ratio = (logprobs - old_logprobs).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    if clip_c is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * clip_c), loss)
    with torch.no_grad():
        metrics = {
            "clipfrac_low": masked_mean(((ratio < 1.0 - clip_low) & (advantages < 0)).float(), mask),
            "clipfrac_high": masked_mean(((ratio > 1.0 + clip_high) & (advantages > 0)).float(), mask),
            "ratio_mean": masked_mean(ratio, mask),
            "ratio_max": torch.where(mask, ratio, torch.zeros_like(ratio)).max(),
            "approx_kl": masked_mean(0.5 * log_ratio**2, mask),
        }
    return loss, metrics
