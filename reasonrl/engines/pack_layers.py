"""What some models' own layers need to keep a pack's sequences apart, installed on the model by
`engines.packing.use_segment_attention`.

Short causal convolutions (LFM2's, LFM2-MoE's, ... `*ShortConv` layers): transformers gives them a
`seq_idx` (the pack's sequence index per position) where the model's forward receives one, and hands
it to `causal_conv1d_fn`; the hub kernel honours it, the PyTorch fallback (what runs on a CPU, or on a
GPU without the `kernels` package) ignores it and convolves across the pack: the first positions of
each sequence read the end of the one before (`check_packing` saw that leak and refused packing).
`install` puts a function in the fallback's place, in the modules of the model's short-convolution
layers, that computes the same depthwise causal convolution with the taps that would reach into
another sequence dropped, which is what each sequence alone gets (zeros on its left); without
`seq_idx` (generation, padded forwards) it calls the function it replaced. `pack_kwargs` gives a pack's
forward the `seq_idx` for a model that has such layers.

ALiBi built from the attention mask (BLOOM's `build_alibi_tensor`): without a mask a pack's positions
count along the whole pack. Softmax ignores the constant that adds per row within a sequence, but in
16 bits the larger biases round coarser (0.07 off the padded forward in bf16 on a tiny BLOOM). Within
a pack's forward the bias is the one for the positions restarting per sequence, as each sequence alone
gets it.

Owns: `install`, `pack_kwargs`. Does not own: the pack itself (`engines.packing`).
"""

from __future__ import annotations

import sys

import torch

_MARK = "_reasonrl_bounded"  # on the function put in place: installed once per module
_HAS = "_reasonrl_short_conv"  # on the model: whether it has short-convolution layers


def _conv_modules(model) -> list:
    """The Python modules of `model`'s short-convolution layers that call a `causal_conv1d_fn`."""
    found = {}
    for m in model.modules():
        if type(m).__name__.endswith("ShortConv"):
            mod = sys.modules.get(type(m).__module__)
            if mod is not None and callable(getattr(mod, "causal_conv1d_fn", None)):
                found[mod.__name__] = mod
    return list(found.values())


def install(model) -> None:
    """Make the short convolutions of `model` (if any) honour `seq_idx`, and its mask-built ALiBi (if
    any) restart per sequence within a pack's forward."""
    for mod in _conv_modules(model):
        if not getattr(mod.causal_conv1d_fn, _MARK, False):
            mod.causal_conv1d_fn = _bounded(mod.causal_conv1d_fn)
    for m in model.modules():
        build = getattr(m, "build_alibi_tensor", None)
        if callable(build) and not getattr(build, _MARK, False):
            m.build_alibi_tensor = _local_alibi(build)


def _local_alibi(original):
    def build_alibi_tensor(attention_mask, num_heads, dtype):
        """BLOOM's ALiBi [B * heads, 1, P]: slope x position; within a pack, positions restart per sequence."""
        from reasonrl.engines.packing import pack_segments

        seg = pack_segments()
        if seg is None or attention_mask.shape != seg.shape:
            return original(attention_mask, num_heads, dtype)
        full = original(torch.ones_like(attention_mask), num_heads, torch.float32)  # positions 0 .. P - 1
        first = torch.ones_like(seg[0], dtype=torch.bool)
        first[1:] = seg[0, 1:] != seg[0, :-1]
        start = torch.cummax(torch.where(first, torch.arange(len(first), device=seg.device), 0), 0).values
        local = torch.arange(len(first), device=seg.device) - start
        return full.index_select(-1, local.to(full.device)).to(dtype)

    setattr(build_alibi_tensor, _MARK, True)
    return build_alibi_tensor


def pack_kwargs(model, lengths: list[int], device) -> dict:
    """{"seq_idx": [1, P] int32} for a pack of sequences of `lengths` where `model` has short
    convolutions; {} otherwise (other models' forwards never see the keyword)."""
    has = getattr(model, _HAS, None)
    if has is None:  # asked per pack: looked up once
        has = bool(_conv_modules(model))
        setattr(model, _HAS, has)
    if not has:
        return {}
    idx = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), torch.tensor(lengths))
    return {"seq_idx": idx[None].to(device)}


def _bounded(original):
    def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None, seq_idx=None, **kwargs):
        """hidden_states [B, C, L], weight [C, K]: out[j] = bias + sum_s weight[K - 1 - s] * x[j - s] over
        the shifts s whose position j - s is in j's sequence (F.conv1d's left zero padding, per sequence)."""
        if seq_idx is None:
            return original(hidden_states, weight, bias, activation=activation, **kwargs)
        from transformers.activations import ACT2FN

        x = hidden_states.to(weight.dtype)
        length, taps = x.shape[-1], weight.shape[-1]
        seq = seq_idx.to(x.device)
        out = x * weight[:, taps - 1, None]
        for s in range(1, min(taps, length)):
            same = torch.zeros_like(seq, dtype=torch.bool)
            same[:, s:] = seq[:, s:] == seq[:, :-s]
            shifted = torch.nn.functional.pad(x, (s, 0))[..., :length]
            out = out + shifted * same[:, None, :].to(x.dtype) * weight[:, taps - 1 - s, None]
        if bias is not None:
            out = out + bias[:, None]
        if activation is not None:
            out = ACT2FN[activation](out)
        return out.to(hidden_states.dtype)

    setattr(causal_conv1d_fn, _MARK, True)
    return causal_conv1d_fn
