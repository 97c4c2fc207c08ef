"""Per-token log-probabilities and entropy from logits.

`token_logprobs(logits [B, T, V], targets [B, T]) -> [B, T]` uses log_softmax + gather in fp32.
`entropy_from_logits(logits [B, T, V]) -> [B, T]` computes H = logsumexp(z) - sum softmax(z) z, in
chunks of rows so the [B, T, V] fp32 temporaries never all exist at once.
Does not own: running the model or slicing completion positions out of its logits (`engines/`).
"""

from __future__ import annotations

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor, chunk_rows: int = 1024) -> torch.Tensor:
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for i in range(0, flat.shape[0], chunk_rows):
        z = flat[i : i + chunk_rows].float()
        p = torch.softmax(z, dim=-1)
        out.append(torch.logsumexp(z, dim=-1) - (p * z).sum(-1))
    return torch.cat(out).reshape(logits.shape[:-1]) if out else flat.new_zeros(logits.shape[:-1])
