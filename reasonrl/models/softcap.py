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
    if not bool(seen.any(-1).all()):
        return seen, 0, K
    cols = seen.reshape(-1, K).any(0).nonzero()
    lo, hi = int(cols[0]), int(cols[-1]) + 1
    return seen[..., lo:hi], lo, hi


def _capped(q, k, mask, scale: float, cap: float, start: int, end: int):
    """(tanh(scores / cap), the capped and masked scores in the softmax's dtype, the mask, the keys
    lo..hi they are of) of queries start..end."""
    seen, lo, hi = _seen(mask, start, end, q.shape[2], k.shape[2], q.device)
    t = (q[:, :, start:end] @ k[:, :, lo:hi].transpose(-1, -2)).mul_(scale / cap).tanh_()
    capped = (t * cap).to(_ACC.get(q.dtype, torch.float32))
    if seen is not None:
        capped.masked_fill_(~seen, torch.finfo(capped.dtype).min)
    return t, capped, seen, slice(lo, hi)


class _SoftcapAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, scale: float, cap: float):
        out = q.new_empty(*q.shape[:3], v.shape[-1])
        # each row's max and sum of exp(score - max): a row that sees no key (all at the mask's most
        # negative value) then averages every value, as eager's softmax does; a log-sum-exp would round
        top = torch.empty(*q.shape[:3], 1, dtype=_ACC.get(q.dtype, torch.float32), device=q.device)
        total = torch.empty_like(top)
        for start, end in _spans(q, k.shape[2]):
            _, e, _, keys = _capped(q, k, mask, scale, cap, start, end)
            top[:, :, start:end] = e.amax(dim=-1, keepdim=True)
            e.sub_(top[:, :, start:end]).exp_()
            total[:, :, start:end] = e.sum(dim=-1, keepdim=True)
            out[:, :, start:end] = e.div_(total[:, :, start:end]).to(q.dtype) @ v[:, :, keys]
        ctx.save_for_backward(q, k, v, out, top, total, mask)
        ctx.scale, ctx.cap = scale, cap
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, top, total, mask = ctx.saved_tensors
        scale, cap = ctx.scale, ctx.cap
        dq = torch.empty_like(q)
        acc = top.dtype
        dk = torch.zeros(k.shape, dtype=acc, device=k.device)
        dv = torch.zeros(v.shape, dtype=acc, device=v.device)
        delta = (dout.to(acc) * out.to(acc)).sum(-1, keepdim=True)  # [B, H, Q, 1]: sum_j p_ij * dp_ij
        for start, end in _spans(q, k.shape[2]):
            t, p, seen, keys = _capped(q, k, mask, scale, cap, start, end)
            p.sub_(top[:, :, start:end]).exp_().div_(total[:, :, start:end])
            d = dout[:, :, start:end]
            dv[:, :, keys] += p.to(q.dtype).transpose(-1, -2) @ d
            ds = (d @ v[:, :, keys].transpose(-1, -2)).to(acc).sub_(delta[:, :, start:end]).mul_(p)
            if seen is not None:
                ds.masked_fill_(~seen, 0.0)
            # through cap * tanh(x / cap): times 1 - tanh^2
            draw = ds.mul_(t.to(acc).square_().neg_().add_(1)).mul_(scale).to(q.dtype)
            dq[:, :, start:end] = draw @ k[:, :, keys]
            dk[:, :, keys] += draw.transpose(-1, -2) @ q[:, :, start:end]
        return dq, dk.to(k.dtype), dv.to(v.dtype), None, None, None


def softcap_attention(q, k, v, mask, scale: float, cap: float) -> torch.Tensor:
    """Attention of queries [B, H, Q, D] over keys / values [B, H_kv, K, D / D_v] with the scores
    soft-capped at `cap`, under `mask` (boolean [B, 1|H, Q, K] or [Q, K], True where a query sees a key) or
    causal without one (the last query sees every key) -> [B, H, Q, D_v]; a row that sees no key
    averages every value, as the models' eager attention does under its most negative mask."""
    if k.shape[1] != q.shape[1]:
        k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))
    return _SoftcapAttention.apply(q, k, v, mask, float(scale), float(cap))


def softcap_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None,
                              **kwargs):  # fmt: skip
    """transformers attention function: soft-capped attention in blocks -> ([B, Q, H, D_v], None); without
    soft-capping, transformers' SDPA; with attention dropout in training, the model's eager attention."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if softcap is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)  # fmt: skip
    if dropout and module.training:
        from reasonrl.engines.pack_attention import explicit_attention

        mask = None if attention_mask is None else attention_mask[:, :, :, : key.shape[2]]
        out = explicit_attention(query, key, value, mask, scaling, dropout, softcap, None)
        return out.transpose(1, 2).contiguous(), None
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    mask = None if attention_mask is None else attention_mask[:, :, :, : key.shape[2]]
    out = softcap_attention(query, key, value, mask, scale, softcap)
    return out.transpose(1, 2).contiguous(), None


def use_softcap_attention(model) -> bool:
    """Switch `model` from eager attention to `softcap_attention_forward` where its attention soft-caps
    its scores (`attn_logit_softcapping`) and has no sinks; returns whether it did."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    from reasonrl.models.loading import text_config

    has_sinks = any(isinstance(getattr(m, "sinks", None), torch.nn.Parameter) for m in model.modules())
    if has_sinks or not getattr(text_config(model.config), "attn_logit_softcapping", None):
        return False
    configs = [c for m in model.modules() if hasattr(c := getattr(m, "config", None), "_attn_implementation")]
    if any(c._attn_implementation != "eager" for c in configs):
        return False
    AttentionInterface.register(SOFTCAP, softcap_attention_forward)
    AttentionMaskInterface.register(SOFTCAP, sdpa_mask)
    for c in configs:
        c._attn_implementation = SOFTCAP
    return True
