"""Logit soft-capping without the scores kept, for every forward of a model that has it (Gemma 2,
VaultGemma: `cap * tanh(scores / cap)` before the softmax). transformers runs these models with their
eager attention only (SDPA cannot soft-cap), which writes out the [B, H, Q, K] scores of every layer,
and autograd keeps them, their tanh and the probabilities for the backward: three [B, H, Q, K] tensors
per layer, the activation memory that grows with the square of the sequence.

Here the attention runs in blocks of queries, as flash attention does: the forward keeps only its
output and each row's softmax normaliser, the backward computes each block's scores again. Peak memory is
one block's [B, H, block, K] instead of the whole. The same arithmetic as the models' eager attention
(scores in the inputs' dtype, softmax in float32), up to rounding (tested, values and gradients).

Owns: `softcap_attention` (the arithmetic, also run by packs: `engines.packing`), `softcap_attention_forward`
(a transformers attention function) and `use_softcap_attention(model)` (a model with soft-capping on
eager attention switched to it, on load). Does not own: attention sinks (`models.sinks`); a model with
both, or attention dropout in training, keeps its eager attention.
"""

from __future__ import annotations

import torch

SOFTCAP = (
    "reasonrl_softcap"  # its name with transformers (no "sdpa" in it: transformers would check SDPA support)
)
_ACC = {torch.float64: torch.float64}  # the softmax's dtype: float32, or float64 for float64 inputs
BLOCK_ELEMENTS = 1 << 24  # scores per block (64 MiB in float32): queries per block = this / (B * H * K)


def _spans(q: torch.Tensor, keys: int) -> list[tuple[int, int]]:
    """(start, end) of each block of queries: at least 16 queries, about BLOCK_ELEMENTS scores."""
    B, H, Q = q.shape[:3]
    step = max(16, BLOCK_ELEMENTS // max(1, B * H * keys))
    return [(start, min(start + step, Q)) for start in range(0, Q, step)]


def _seen(mask, start: int, end: int, Q: int, K: int, device) -> tuple[torch.Tensor | None, int, int]:
    """(which of keys lo..hi queries start..end see, lo, hi): under `mask` [B, 1|H, Q, K] or [Q, K], the
    keys from the first to the last that any of them sees (a causal mask's later keys, a sliding
    window's earlier ones: work skipped), all of them where a query sees none (eager averages every
    value there); causal without a mask (aligned at the end: the last query sees every key), the keys
    up to the block's last query's. None when every key is seen."""
    if mask is None:
        if Q == 1:
            return None, 0, K
        hi = min(K, end + K - Q)
        i = torch.arange(start, end, device=device)[:, None] + (K - Q)
        return torch.arange(hi, device=device)[None, :] <= i, 0, hi
    seen = mask[..., start:end, :]
    if torch.compiler.is_compiling() or not bool(seen.any(-1).all()):  # (compiled: no data-dependent sizes)
        return seen, 0, K
    cols = seen.reshape(-1, K).any(0).nonzero()
    lo, hi = int(cols[0]), int(cols[-1]) + 1
    return seen[..., lo:hi], lo, hi


def _heads(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Keys or values [B, H_kv, ...] for H = H_kv * groups query heads (query head h reads kv head h // groups)."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def _capped(q, k, mask, scale: float, cap: float, start: int, end: int):
    """(tanh(scores / cap), the capped and masked scores in the softmax's dtype, the mask, the keys
    lo..hi they are of, those keys for every query head) of queries start..end."""
    seen, lo, hi = _seen(mask, start, end, q.shape[2], k.shape[2], q.device)
    keys = _heads(k[:, :, lo:hi], q.shape[1] // k.shape[1])
    t = (q[:, :, start:end] @ keys.transpose(-1, -2)).mul_(scale / cap).tanh_()
    capped = (t * cap).to(_ACC.get(q.dtype, torch.float32))
    if seen is not None:
        capped.masked_fill_(~seen, torch.finfo(capped.dtype).min)
    return t, capped, seen, slice(lo, hi), keys


class _SoftcapAttention(torch.autograd.Function):
    """Keys and values are kept with their own heads (grouped-query: fewer than the queries'), and read
    for every query head one block at a time."""

    @staticmethod
    def forward(ctx, q, k, v, mask, scale: float, cap: float):
        groups = q.shape[1] // k.shape[1]
        out = q.new_empty(*q.shape[:3], v.shape[-1])
        # each row's max and sum of exp(score - max): a row that sees no key (all at the mask's most
        # negative value) then averages every value, as eager's softmax does; a log-sum-exp would round
        top = torch.empty(*q.shape[:3], 1, dtype=_ACC.get(q.dtype, torch.float32), device=q.device)
        total = torch.empty_like(top)
        for start, end in _spans(q, k.shape[2]):
            _, e, _, keys, _ = _capped(q, k, mask, scale, cap, start, end)
            top[:, :, start:end] = e.amax(dim=-1, keepdim=True)
            e.sub_(top[:, :, start:end]).exp_()
            total[:, :, start:end] = e.sum(dim=-1, keepdim=True)
            out[:, :, start:end] = e.div_(total[:, :, start:end]).to(q.dtype) @ _heads(v[:, :, keys], groups)
        ctx.save_for_backward(q, k, v, out, top, total, mask)
        ctx.scale, ctx.cap = scale, cap
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, top, total, mask = ctx.saved_tensors
        scale, cap = ctx.scale, ctx.cap
        B, H, _, _ = q.shape
        groups = H // k.shape[1]
        dq = torch.empty_like(q)
        acc = top.dtype
        dk = torch.zeros(B, H, *k.shape[2:], dtype=acc, device=k.device)  # per query head, summed at the end
        dv = torch.zeros(B, H, *v.shape[2:], dtype=acc, device=v.device)
        delta = (dout.to(acc) * out.to(acc)).sum(-1, keepdim=True)  # [B, H, Q, 1]: sum_j p_ij * dp_ij
        for start, end in _spans(q, k.shape[2]):
            t, p, seen, keys, k_heads = _capped(q, k, mask, scale, cap, start, end)
            p.sub_(top[:, :, start:end]).exp_().div_(total[:, :, start:end])
            d = dout[:, :, start:end]
            dv[:, :, keys] += p.to(q.dtype).transpose(-1, -2) @ d
            v_heads = _heads(v[:, :, keys], groups)
            ds = (d @ v_heads.transpose(-1, -2)).to(acc).sub_(delta[:, :, start:end]).mul_(p)
            if seen is not None:
                ds.masked_fill_(~seen, 0.0)
            # through cap * tanh(x / cap): times 1 - tanh^2
            draw = ds.mul_(t.to(acc).square_().neg_().add_(1)).mul_(scale).to(q.dtype)
            dq[:, :, start:end] = draw @ k_heads
            dk[:, :, keys] += draw.transpose(-1, -2) @ q[:, :, start:end]
        if groups > 1:
            dk, dv = (x.view(B, H // groups, groups, *x.shape[2:]).sum(2) for x in (dk, dv))
        return dq, dk.to(k.dtype), dv.to(v.dtype), None, None, None


def softcap_attention(q, k, v, mask, scale: float, cap: float) -> torch.Tensor:
    """Attention of queries [B, H, Q, D] over keys / values [B, H_kv, K, D / D_v] with the scores
    soft-capped at `cap`, under `mask` (boolean [B, 1|H, Q, K] or [Q, K], True where a query sees a key) or
    causal without one (the last query sees every key) -> [B, H, Q, D_v]; a row that sees no key
    averages every value, as the models' eager attention does under its most negative mask."""
    return _SoftcapAttention.apply(q, k, v, mask, float(scale), float(cap))


def softcap_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None,
                              **kwargs):  # fmt: skip
    """transformers attention function: soft-capped attention in blocks -> ([B, Q, H, D_v], None); without
    soft-capping, transformers' SDPA; with attention dropout in training, the model's eager attention."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if softcap is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)  # fmt: skip
    mask = None if attention_mask is None else attention_mask[:, :, :, : key.shape[2]]
    if dropout and module.training:
        from reasonrl.engines.pack_attention import explicit_attention

        out = explicit_attention(query, key, value, mask, scaling, dropout, softcap, None)
    else:
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        out = softcap_attention(query, key, value, mask, scale, softcap)
    return out.transpose(1, 2).contiguous(), None


def use_softcap_attention(model) -> bool:
    """Switch `model` from eager attention to `softcap_attention_forward` where its attention soft-caps
    its scores (`attn_logit_softcapping`) and has no sinks; returns whether it did."""
    from reasonrl.models.loading import switch_eager_attention, text_config
    from reasonrl.models.sinks import has_sinks

    if has_sinks(model) or not getattr(text_config(model.config), "attn_logit_softcapping", None):
        return False
    return switch_eager_attention(model, SOFTCAP, softcap_attention_forward)
