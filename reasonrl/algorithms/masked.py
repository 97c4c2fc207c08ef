"""Masked reductions and loss aggregation over `[B, T]` per-token values.

Owns: `masked_sum`, `masked_mean`, `masked_whiten`, `last_token_values` (put one value per row on its
last trainable token), `normalisers` (the global counts to pass to `aggregate`), and `aggregate` (the
loss aggregation modes). Does not own: the per-token losses themselves (`losses`, `kl`, `value`) or
any cross-rank reduction (the trainer all-reduces the counts from `normalisers`).

Modes (L = per-token loss [B, T], M = bool mask [B, T], |M_i| = tokens of row i):
  token_mean               sum(L*M) / total_tokens                       (DAPO; default total = sum(M))
  seq_mean_token_mean      sum_i [sum_t L_it M_it / |M_i|] / total_seqs  (original GRPO, GSPO)
  seq_mean_token_sum       sum_i [sum_t L_it M_it] / total_seqs
  seq_mean_token_sum_norm  sum(L*M) / (total_seqs * norm_len)           (Dr.GRPO: constant normaliser)

Invariance: every mode is a sum over rows divided by a normaliser that does not depend on the rows of
this call once `total_tokens` / `total_seqs` / `norm_len` are given. So a batch split into micro-batches
and data-parallel shards gives exactly the whole batch's loss and gradient when every piece receives
the whole batch's `normalisers(mask)` (summed over ranks) and the same `norm_len`, and the pieces' losses
are summed (gradient accumulation without dividing by the number of micro-batches; across ranks, sum the
gradients, or multiply each rank's loss by the world size when the backend averages them).
Defaults (when the normalisers are None) use this call's own counts, which is only right for a single
un-split batch. `norm_len` defaults to T of this call; pass the max response length whenever micro-batches
may be padded to different lengths.
"""

from __future__ import annotations

import torch

AGG_MODES = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm")


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of `x` where `mask` is True (masked-out entries contribute 0 even if they hold inf/NaN)."""
    x = torch.where(mask, x, torch.zeros_like(x))
    return x.sum() if dim is None else x.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean over masked entries; 0 where nothing is masked in (never NaN)."""
    count = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim)
    return masked_sum(x, mask, dim) / count.clamp_min(1.0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / (std + eps) over the masked entries, std with Bessel's correction; masked-out
    entries (and everything when fewer than two entries are masked in) become 0."""
    n = mask.to(x.dtype).sum()
    mean = masked_mean(x, mask)
    var = masked_sum((x - mean) ** 2, mask) / (n - 1.0).clamp_min(1.0)
    out = (x - mean) / (var.sqrt() + eps)
    keep = mask & (n > 1)
    return torch.where(keep, out, torch.zeros_like(out))


def last_token_values(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] values placed on each row's last True position of `mask` [B, T]; 0 elsewhere (rows with no
    trainable token get nothing). Used to turn outcome rewards into token rewards."""
    pos = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    last = torch.where(mask, pos, torch.full_like(pos, -1)).amax(-1, keepdim=True)
    hit = (pos == last) & mask
    return torch.where(hit, values.unsqueeze(-1), 0.0)


def normalisers(mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Counts of `mask` [B, T] to pass to `aggregate` as global normalisers: total_tokens (True
    entries) and total_seqs (rows with at least one True). Compute them over the whole mini-batch (all
    micro-batches; all ranks, summed) and give the same values to every piece."""
    m = mask.to(torch.float32)
    return {"total_tokens": m.sum(), "total_seqs": (m.sum(-1) > 0).to(torch.float32).sum()}


def aggregate(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_mean",
    *,
    total_tokens: torch.Tensor | float | None = None,
    total_seqs: torch.Tensor | float | None = None,
    norm_len: float | None = None,
) -> torch.Tensor:
    """Reduce per-token `loss` [B, T] to a scalar; see the module docstring for the formulas.

    `total_seqs` defaults to the rows of this call with at least one trainable token.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGG_MODES)}")

    def as_t(v: torch.Tensor | float) -> torch.Tensor:
        return torch.as_tensor(v, dtype=loss.dtype, device=loss.device)

    counts = normalisers(mask)
    token_sum = masked_sum(loss, mask)
    if mode == "token_mean":
        denom = counts["total_tokens"] if total_tokens is None else total_tokens
        return token_sum / as_t(denom).clamp_min(1.0)
    seqs = as_t(counts["total_seqs"] if total_seqs is None else total_seqs).clamp_min(1.0)
    if mode == "seq_mean_token_mean":
        per_seq = masked_sum(loss, mask, dim=-1) / mask.to(loss.dtype).sum(-1).clamp_min(1.0)
        return per_seq.sum() / seqs
    if mode == "seq_mean_token_sum":
        return token_sum / seqs
    n = float(loss.shape[-1] if norm_len is None else norm_len)
    return token_sum / (seqs * n)
