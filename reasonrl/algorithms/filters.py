"""Group filters, length shaping and update guards, as pure tensor functions.

Owns: which rows / groups to keep (DAPO dynamic sampling), the DAPO soft overlong penalty, masking of
truncated completions, the entropy threshold of high-entropy token training, and the RLinf mini-batch
early-stop test. Does not own: re-sampling until a
batch is full, adding penalties to rewards, or skipping optimizer steps (the trainer does those with
these results), nor cross-rank reductions (pass already-reduced statistics).

dynamic_sampling_mask (DAPO, Yu et al. 2025, arXiv:2503.14476, "dynamic sampling"):
    keep[i] = max_g(r) - min_g(r) > eps for row i's group g. Groups whose completions all got the same
    reward have zero GRPO advantage and only dilute the batch. Returns bool [N].
overlong_penalty (DAPO "soft overlong punishment"), L = lengths, Lmax = max_len, Lc = buffer:
    0                              if L <= Lmax - Lc
    ((Lmax - Lc) - L) / Lc * f     if Lmax - Lc < L <= Lmax
    -f                             if L > Lmax                    (f = penalty_factor)
    Returns float [N], added to the rewards by the trainer.
mask_truncated (DAPO "overlong filtering"): mask [B, T] with rows of truncated completions cleared.
entropy_threshold (Wang et al. 2025, arXiv:2506.01939, "Beyond the 80/20 rule"): the value at or above
    which the top `quantile` share of a batch's token entropies lies; the trainer trains the
    policy-gradient term on those tokens only (0.2 in the paper).
minibatch_early_stop (RLinf / ReaL `early_stop_imp_ratio`, `early_stop_kl`): True when the global mean
    importance ratio exceeds max_ratio or the global approx KL exceeds max_kl (None = no test). RLinf
    then zeroes the loss of the rest of the mini-batch. Returns a 0-dim bool tensor (no host sync).
"""

from __future__ import annotations

import math

import torch


def dynamic_sampling_mask(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """bool [N]: True for rows whose group's rewards are not all equal (spread > eps)."""
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    k = uniq.numel()
    hi = torch.full((k,), -torch.inf, dtype=rewards.dtype, device=rewards.device)
    lo = torch.full((k,), torch.inf, dtype=rewards.dtype, device=rewards.device)
    hi = hi.scatter_reduce(0, inv, rewards, reduce="amax")
    lo = lo.scatter_reduce(0, inv, rewards, reduce="amin")
    return (hi - lo)[inv] > eps


def overlong_penalty(
    lengths: torch.Tensor, max_len: int, buffer: int, penalty_factor: float = 1.0
) -> torch.Tensor:
    """float [N] penalties (<= 0) for completion `lengths` [N] (tokens)."""
    if not 0 < buffer <= max_len:
        raise ValueError(
            f"overlong_penalty: need 0 < buffer <= max_len, got buffer={buffer}, max_len={max_len}"
        )
    expected = max_len - buffer
    lengths = lengths.to(torch.get_default_dtype())
    frac = ((expected - lengths) / buffer).clamp(-1.0, 0.0)
    return frac * penalty_factor


def entropy_threshold(entropies: torch.Tensor, quantile: float) -> torch.Tensor:
    """0-dim: the entropy at or above which the top `quantile` share of `entropies` (1-D: every trained
    token's) lies, the ceil(quantile * n)-th largest value (ties at it are kept too); -inf for no tokens."""
    if not 0 < quantile <= 1:
        raise ValueError(f"top_entropy_quantile must be in (0, 1], got {quantile}")
    flat = entropies.float().reshape(-1)
    n = flat.numel()
    if n == 0:
        return flat.new_full((), float("-inf"))
    keep = math.ceil(quantile * n - 1e-9)  # (0.2 * 10 is 2.0000000000000004 in floats: 2, not 3)
    return torch.kthvalue(flat, n - keep + 1).values


def mask_truncated(mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """mask bool [B, T] with every row where `truncated` bool [B] is True cleared."""
    return mask & ~truncated.to(torch.bool).unsqueeze(-1)


def minibatch_early_stop(
    ratio_mean: torch.Tensor,
    approx_kl: torch.Tensor,
    max_ratio: float | None = None,
    max_kl: float | None = None,
) -> torch.Tensor:
    """0-dim bool: stop updating on this mini-batch. Inputs are global (all-reduced) scalars."""
    stop = torch.zeros((), dtype=torch.bool, device=ratio_mean.device)
    if max_ratio is not None:
        stop = stop | (ratio_mean > max_ratio)
    if max_kl is not None:
        stop = stop | (approx_kl > max_kl)
    return stop
