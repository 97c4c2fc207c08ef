"""The attention arithmetic of a pack's sequences (`engines.packing.segment_attention` runs it).

Owns: `slot_groups` (a pack's sequences side by side in groups of similar length, each right-padded to
its group's longest), `explicit_attention` (causal attention written out, for what SDPA cannot do:
soft-capping, sinks, a bias) and `selected_keys` (DeepSeek Sparse Attention's choice of keys, as a
mask). Does not own: when a forward is a pack, its bounds or masks (`engines.packing`).
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

_SLOTS = threading.local()  # .last: (bounds, device, groups) of the last pack asked about


def slot_groups(cu: torch.Tensor, device) -> tuple[list, torch.Tensor]:
    """([(rows S, length L, positions [S * L], kept [real]) per group], where [P]) for a pack whose
    sequences start at `cu`: each group's sequences side by side, each right-padded (with its own first
    position) to the group's longest; `kept` picks the real positions of the [S * L] slots, `where`
    their places in the pack. Longest first, a new group where a sequence is under half the group's
    longest, so padded attention work stays under 4x the real sum(n_i^2). Built once per pack and
    device (every layer asks; a host-to-device copy per layer would also wait for the GPU each time)."""
    cached = getattr(_SLOTS, "last", None)
    if cached is not None and cached[0] is cu and cached[1] == device:
        return cached[2]
    lens = (cu[1:] - cu[:-1]).tolist()
    ranked = sorted(range(len(lens)), key=lambda j: -lens[j])
    members: list[list[int]] = []
    for j in ranked:
        if not members or 2 * lens[j] < lens[members[-1][0]]:
            members.append([])
        members[-1].append(j)
    groups, where = [], []
    for g in members:
        span = torch.arange(lens[g[0]])
        starts, n = cu[g][:, None], torch.tensor([lens[j] for j in g])[:, None]
        valid = (span[None, :] < n).flatten()
        flat = torch.where(valid.view(len(g), -1), starts + span[None, :], starts).flatten()
        keep = valid.nonzero().squeeze(1)
        groups.append((len(g), lens[g[0]], flat.to(device), keep.to(device)))
        where.append(flat[keep])
    out = groups, torch.cat(where).to(device)
    _SLOTS.last = (cu, device, out)
    return out


def explicit_attention(q, k, v, mask, scaling, dropout: float, softcap, sinks, bias=None):
    """Causal attention of [S, H, L, D] written out, for what SDPA cannot do: logit soft-capping (Gemma 2),
    attention sinks (a per-head logit beside every row's keys that takes probability mass and adds no
    value; gpt-oss) and a bias [S, H, L, L] added to the scores (Inkling's relative positions). The same
    arithmetic as those models' eager attention."""
    if k.shape[1] != q.shape[1]:
        k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))
    length = q.shape[2]
    scores = q @ k.transpose(-1, -2) * (scaling if scaling is not None else q.shape[-1] ** -0.5)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    if mask is None:
        mask = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    if sinks is None:
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    else:
        sink = sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, length, 1).to(scores.dtype)
        both = torch.cat([scores, sink], dim=-1)
        probs = torch.softmax(both - both.max(dim=-1, keepdim=True).values, dim=-1, dtype=both.dtype)[
            ..., :-1
        ]
    return F.dropout(probs, p=dropout, training=dropout > 0) @ v


def selected_keys(mask: torch.Tensor, indices: torch.Tensor, keys: int, dtype) -> torch.Tensor:
    """`mask` [B, 1, S, T] (boolean, or added to the scores) narrowed to the keys an indexer picked for
    each query, `indices` [B, S, k] (DeepSeek Sparse Attention: DeepSeek-V3.2, GLM-5, A.X K2, Hunyuan
    V4): what those models' eager and SDPA paths do with their indexer's choice. Under any other
    attention name they pass the indices on instead, for a kernel that reads them."""
    dropped = indices.new_ones((*indices.shape[:2], keys), dtype=torch.bool).scatter(
        -1, indices.long(), False
    )
    if mask.dtype == torch.bool:
        return mask & ~dropped.unsqueeze(1)
    return mask.masked_fill(dropped.unsqueeze(1), torch.finfo(dtype).min)
