"""Critic (value) loss for PPO with a learned value function.

Owns: the clipped value loss and its diagnostics. Does not own: computing returns (`advantages.gae`),
aggregation (`masked.aggregate`), or the value-loss coefficient (the trainer scales the aggregate).

value_loss (PPO value clipping as in OpenAI baselines / Andrychowicz et al. 2021, arXiv:2006.05990):
    v_clip = old_values + clip(values - old_values, -clip_range, clip_range)
    L_t = 0.5 * max((values - returns)^2, (v_clip - returns)^2)
    clip_range=None gives the unclipped 0.5 * (values - returns)^2.
Shapes: values, old_values, returns [B, T], mask bool [B, T] -> per-token loss [B, T].
Metrics (masked means over this call): vf_clipfrac (tokens where the clipped term is the larger),
value_mean, value_error (mean squared error of values), explained_var = 1 - Var(R - V) / Var(R).
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.masked import masked_mean


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float | None = 0.2,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    returns = returns.detach()
    unclipped = (values - returns) ** 2
    if clip_range is None:
        loss = 0.5 * unclipped
        clip_hit = torch.zeros_like(mask)
    else:
        old = old_values.detach()
        v_clip = old + (values - old).clamp(-clip_range, clip_range)
        clipped = (v_clip - returns) ** 2
        loss = 0.5 * torch.maximum(unclipped, clipped)
        clip_hit = clipped > unclipped
    with torch.no_grad():
        v = values.detach()
        err = returns - v
        var_r = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
        var_e = masked_mean((err - masked_mean(err, mask)) ** 2, mask)
        metrics = {
            "vf_clipfrac": masked_mean(clip_hit.to(v.dtype), mask),
            "value_mean": masked_mean(v, mask),
            "value_error": masked_mean(err**2, mask),
            "explained_var": 1.0 - var_e / var_r.clamp_min(1e-8),
        }
    return loss, metrics
