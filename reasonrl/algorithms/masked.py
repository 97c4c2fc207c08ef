"""Masked reductions and loss aggregation over `[B, T]` per-token values.

Owns: `masked_sum`, `masked_mean`, and `aggregate` (the loss aggregation modes). Global normalisers
(`total_tokens`, `total_seqs`) are arguments so that a batch split into micro-batches or data-parallel
shards sums to exactly the loss of the whole batch: pass the whole batch's counts to every piece.

Modes (L = per-token loss [B, T], M = bool mask [B, T], |M_i| = tokens of row i):
  token_mean             sum(L*M) / total_tokens                       (DAPO; default total = sum(M))
  seq_mean_token_mean    sum_i [sum_t L_it M_it / |M_i|] / total_seqs  (original GRPO)
  seq_mean_token_sum     sum_i [sum_t L_it M_it] / total_seqs
  seq_mean_token_sum_norm  sum(L*M) / (total_seqs * norm_len)          (Dr.GRPO: constant normaliser,
                         norm_len defaults to T, the max response length)
"""

from __future__ import annotations

import torch

AGG_MODES = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm")


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    m = mask.to(x.dtype)
    return (x * m).sum() if dim is None else (x * m).sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean over masked entries; 0 where nothing is masked in (never NaN)."""
    m = mask.to(x.dtype)
    if dim is None:
        return (x * m).sum() / m.sum().clamp_min(1.0)
    return (x * m).sum(dim) / m.sum(dim).clamp_min(1.0)


def aggregate(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_mean",
    *,
    total_tokens: torch.Tensor | float | None = None,
    total_seqs: torch.Tensor | float | None = None,
    norm_len: float | None = None,
) -> torch.Tensor:
    """Reduce per-token `loss` [B, T] to a scalar; see the module docstring for the formulas."""
    m = mask.to(loss.dtype)
    if mode == "token_mean":
        denom = m.sum() if total_tokens is None else total_tokens
        return (loss * m).sum() / torch.as_tensor(denom, dtype=loss.dtype).clamp_min(1.0)
    seqs = torch.as_tensor(loss.shape[0] if total_seqs is None else total_seqs, dtype=loss.dtype)
    seqs = seqs.clamp_min(1.0)
    if mode == "seq_mean_token_mean":
        per_seq = (loss * m).sum(-1) / m.sum(-1).clamp_min(1.0)
        return per_seq.sum() / seqs
    if mode == "seq_mean_token_sum":
        return (loss * m).sum() / seqs
    if mode == "seq_mean_token_sum_norm":
        n = float(loss.shape[-1] if norm_len is None else norm_len)
        return (loss * m).sum() / (seqs * n)
    raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGG_MODES)}")
