"""The attention arithmetic of a pack's sequences (`engines.packing.segment_attention` runs it).

Owns: `slot_groups` (a pack's sequences side by side in groups of similar length, each right-padded to
its group's longest), `causal_sdpa` and `sink_attention` (SDPA; attention sinks as one extra key),
`explicit_attention` (causal attention written out, for what SDPA cannot do: soft-capping, a score
bias) and `selected_keys` (DeepSeek Sparse Attention's choice of keys, as a mask). Does not own: when
a forward is a pack, its bounds or masks (`engines.packing`).
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


def sink_attention(q, k, v, mask, scaling, dropout: float, sinks) -> torch.Tensor:
    """Causal attention of [S, H, L, D] (keys and values [S, H_kv, L, D]) with attention sinks through
    SDPA, so no [S, H, L, L] scores are kept: the sink key first (`models.sinks.with_sink_key`), and one
    query of zeros before the sequence, so SDPA's causal mask (or `mask` [L, L], a sliding window, with
    the sink's column seen by every query) lines up: query j sees the sink and keys 0..j. The same
    arithmetic as `explicit_attention` with sinks, up to rounding."""
    from reasonrl.models.sinks import with_sink_key

    S, H, L, _ = q.shape
    scale = scaling if scaling is not None else q.shape[-1] ** -0.5
    q2, k2, v2 = with_sink_key(q, k, v, sinks, scale)
    q2 = torch.cat([q2.new_zeros(S, H, 1, q2.shape[-1]), q2], dim=2)
    full = None
    if mask is not None:
        full = torch.zeros(L + 1, L + 1, dtype=torch.bool, device=q.device)
        full[:, 0] = True
        full[1:, 1:] = mask
    return causal_sdpa(q2, k2, v2, full, scale, dropout)[:, :, 1:]


def causal_sdpa(q, k, v, mask, scaling, dropout: float) -> torch.Tensor:
    """SDPA of [S, H, L, D] (keys and values [S, H_kv, L, D_v]), causal or under `mask` [L, L], values
    narrower than the queries (multi-head latent attention: DeepSeek-V3, Kimi K2, ...) padded with zeros
    to their size and the output cut back: fused kernels want the sizes equal, and without them CPU SDPA
    took its math path, which writes the [S, H, L, L] scores out (1.5x slower at 2 x 1024 tokens)."""
    width = v.shape[-1]
    if width < q.shape[-1]:
        v = torch.cat([v, v.new_zeros(*v.shape[:-1], q.shape[-1] - width)], dim=-1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=mask is None,
                                         scale=scaling, enable_gqa=q.shape[1] != k.shape[1])  # fmt: skip
    return out[..., :width]
