"""Advantage estimators (registry `ADVANTAGES`).

Signature: `fn(rewards [N] float, group_ids [N] long, **options) -> advantages [N]`
(sequence-level; the trainer broadcasts over the completion tokens).

grpo (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300):
    A_i = (r_i - mean_g(r)) / (std_g(r) + eps), std unbiased (Bessel) as in the paper's reference code;
    `scale_by_std=False` gives Dr.GRPO (Liu et al. 2025, arXiv:2503.20783): A_i = r_i - mean_g(r).
    A group of one sample gets advantage 0.
"""

from __future__ import annotations

import torch

from reasonrl.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator", positional=2)


def group_stats(
    values: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row group mean, unbiased group std (0 for singleton groups) and group size, all [N]."""
    _, inv = torch.unique(group_ids, return_inverse=True)
    k = int(inv.max()) + 1 if inv.numel() else 0
    count = torch.zeros(k, dtype=values.dtype).index_add_(0, inv, torch.ones_like(values))
    total = torch.zeros(k, dtype=values.dtype).index_add_(0, inv, values)
    mean = total / count
    sq = torch.zeros(k, dtype=values.dtype).index_add_(0, inv, (values - mean[inv]) ** 2)
    var = sq / (count - 1).clamp_min(1.0)
    return mean[inv], var.sqrt()[inv], count[inv]


@ADVANTAGES.register("grpo")
def grpo(
    rewards: torch.Tensor, group_ids: torch.Tensor, scale_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    mean, std, count = group_stats(rewards, group_ids)
    adv = rewards - mean
    if scale_by_std:
        adv = adv / (std + eps)
    return torch.where(count > 1, adv, torch.zeros_like(adv))
