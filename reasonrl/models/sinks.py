"""Attention sinks through SDPA, for every forward of a model that has them (gpt-oss, Granite SWA,
MiMo-V2-Flash, ...: a per-head logit beside every row's keys that takes probability mass and adds no
value). transformers runs these models with their eager attention only (SDPA has no sinks), which
writes out the [B, H, Q, K] scores of every layer in generation and training alike.

The trick: one key before the others that every query sees, with value 0, whose score is the head's
sink. An extra head dimension carries it: queries [q, sink / scale, 0 ...], keys [k, 0 ...] and
[0 ..., 1, 0 ...] for the sink key (padded to a multiple of 8, as fused kernels want; values padded to
the queries' size: `engines.pack_attention.causal_sdpa`). Under a mask the sink's column is seen by
every query; causal without a mask (SDPA's own causal mask, aligned top-left), one query of zeros goes
before the others, so query j sees the sink and keys 0..j. The same arithmetic as the models' eager
softmax over [scores, sink], up to rounding (tested, values and gradients, sinks' included).

Owns: `with_sink_key` (the inputs with the sink key put first), `sink_sdpa_attention` (a transformers
attention function), `use_sink_sdpa(model)` (a model with sinks on eager attention switched to it, on
load). Does not own: packs (`engines.packing` runs the sinks of a pack's sequences through
`engines.pack_attention.sink_attention`, which builds on `with_sink_key`).
"""

from __future__ import annotations

import torch

SINK_SDPA = (
    "reasonrl_sinks"  # its name with transformers (no "sdpa" in it: transformers would check SDPA support)
)


def with_sink_key(q, k, v, sinks, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(queries [B, H, Q, D'], keys [B, H_kv, 1 + K, D'], values [B, H_kv, 1 + K, D_v]) for queries
    [B, H, Q, D], keys / values [B, H_kv, K, D / D_v] and sinks [H]: the sink key first, D' = D padded
    past one extra dimension to a multiple of 8."""
    B, H, Q, D = q.shape
    extra = 8 - D % 8 if D % 8 else 8
    sink = (sinks.to(q.dtype) / scale).reshape(1, H, 1, 1).expand(B, H, Q, 1)
    q2 = torch.cat([q, sink, q.new_zeros(B, H, Q, extra - 1)], dim=-1)
    sink_key = k.new_zeros(B, k.shape[1], 1, D + extra)
    sink_key[..., D] = 1
    k2 = torch.cat([sink_key, torch.cat([k, k.new_zeros(*k.shape[:-1], extra)], dim=-1)], dim=2)
    v2 = torch.cat([v.new_zeros(B, v.shape[1], 1, v.shape[-1]), v], dim=2)
    return q2, k2, v2


def sink_sdpa_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, s_aux=None, **kwargs
):
    """transformers attention function: SDPA with the sinks `s_aux` [H] (as the models pass them) ->
    ([B, Q, H, D_v], None); without sinks, transformers' SDPA."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from reasonrl.engines.pack_attention import causal_sdpa, sink_attention

    if s_aux is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)  # fmt: skip
    Q, D = query.shape[2:]
    scale = scaling if scaling is not None else D**-0.5
    if attention_mask is None and Q > 1:  # causal, as many queries as keys: as a pack's sequence runs it
        out = sink_attention(query, key, value, None, scale, dropout, s_aux)
    else:  # under the mask, the sink's column seen by every query (one query without a mask sees every key)
        q2, k2, v2 = with_sink_key(query, key, value, s_aux, scale)
        if attention_mask is None:
            mask = torch.ones(1, 1, Q, k2.shape[2], dtype=torch.bool, device=query.device)
        else:
            mask = attention_mask[:, :, :, : key.shape[2]]
            first = mask.new_ones if mask.dtype == torch.bool else mask.new_zeros
            mask = torch.cat([first(*mask.shape[:-1], 1), mask], dim=-1)
        out = causal_sdpa(q2, k2, v2, mask, scale, dropout)
    return out.transpose(1, 2).contiguous(), None


def has_sinks(model) -> bool:
    """Whether any attention of `model` has sinks (a `sinks` parameter)."""
    return any(isinstance(getattr(m, "sinks", None), torch.nn.Parameter) for m in model.modules())


def use_sink_sdpa(model) -> bool:
    """Switch `model` from eager attention to `sink_sdpa_attention` where its attention has sinks (a
    `sinks` parameter) and nothing else that SDPA drops (soft-capping); returns whether it did."""
    from reasonrl.models.loading import switch_eager_attention, text_config

    if not has_sinks(model) or getattr(text_config(model.config), "attn_logit_softcapping", None):
        return False
    return switch_eager_attention(model, SINK_SDPA, sink_sdpa_attention)
