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

Delta-rule layers (Gated DeltaNet: Qwen3-Next's, Qwen3.5's, Qwen3.5-MoE's, OLMo hybrid's; Kimi Delta
Attention: Kimi Linear's): a short causal convolution as above, then a delta rule, a recurrence along
the sequence. transformers hands the rule the pack's bounds (`cu_seqlens` from `cu_seq_lens_q`, or the
pack's keywords as they are); flash-linear-attention's kernels honour them, the PyTorch fallbacks
(`torch_chunk_gated_delta_rule`, `chunk_kimi_delta_attention`: what runs on a CPU or without `fla`)
drop them and carried the state from each sequence into the next (`check_packing` refused packing,
1.9-2.2 nats off). `install` puts a function in its place that runs the rule on each sequence of a pack
alone, from a zero state, as each sequence alone gets it, and passes the bounds (on the inputs' device)
to an implementation that takes them.

Mamba mixers (the Mamba-2 mixers of Falcon-H1, Bamba, Granite 4, Nemotron-H, Zamba2 and Mamba-2
itself; the Mamba-1 mixers of Jamba, Mamba and Falcon-Mamba): their scans (PyTorch's or the kernels')
run along the whole pack. Within a pack the mixer's class forward (wrapped once) runs each sequence
alone, bounded by the `cu_seq_lens_q` the decoder layer passes on. Where the layer does not pass it
(Jamba's takes it and drops it; Mamba's and Falcon-Mamba's blocks never get it), the layer holding
the mixer (its class forward wrapped once too) hands the mixer its own `cu_seq_lens_q`, or, without
one, the bounds of the pack whose forward is running, which it also keeps on its input tensor: a
checkpointed layer recomputed in the backward gets that same tensor, after the pack's forward is over,
and splits the same way (a thread-local flag alone would not reach the recompute). MiniMax's lightning
attention (linear attention in blocks, its state carried from block to block) runs per sequence the
same way, its rotary cos / sin cut per sequence, and so do ZAYA1's convolved attention projections (a
causal convolution over queries and keys, values delayed by one token), handed the bounds by the
attention holding them, Inkling's short convolutions, which its layers call without the pack's
keywords, and Qwen4-Exp's n-gram layers (hashed embeddings of the preceding token ids, then a dilated
convolution), which start each sequence from the EOS history it gets alone (`SEQUENCE_LAYERS`).
GLM-5-Next's indexer (keys pooled along its input, causality from positions) runs per sequence the same
way, its picks shifted by the sequence's start to the pack's keys; the attention holding it builds
its mask from them and is marked (`OWN_MASKS`) so that segment attention runs under that mask
(`INDEXERS`).

ALiBi built from the attention mask (BLOOM's `build_alibi_tensor`): without a mask a pack's positions
count along the whole pack. Softmax ignores the constant that adds per row within a sequence, but in
16 bits the larger biases round coarser (0.07 off the padded forward in bf16 on a tiny BLOOM). Within
a pack's forward the bias is the one for the positions restarting per sequence, as each sequence alone
gets it.

Owns: `install` (all of the above), `pack_kwargs`. Does not own: the pack itself (`engines.packing`).
"""

from __future__ import annotations

import sys
import threading

import torch

_MARK = "_reasonrl_bounded"  # on the function put in place: installed once per module
_HAS = "_reasonrl_short_conv"  # on the model: whether it has short-convolution layers


# layers with a short convolution, then a delta-rule recurrence: class name ending -> the rule their
# forward calls (a module-level function, behind transformers' kernel wrapper)
RECURRENT = {
    "GatedDeltaNet": "torch_chunk_gated_delta_rule",
    "DeltaAttention": "chunk_kimi_delta_attention",
    "TextLinearAttention": "chunk_kimi_delta_attention",
}  # (GLM-5-Next's Kimi Delta Attention)
CONVOLVING = ("ShortConv", *RECURRENT)  # layer class name endings that call a `causal_conv1d_fn`
# layers run per sequence within a pack: class name ending -> the parameters (after self) their forward
# starts with, and how many of its outputs (a tuple's first ones) are per position; the others (a
# recurrent state) are None in a pack
_MAMBA = ("hidden_states", "cache_params", "attention_mask")
SEQUENCE_LAYERS = {
    # Mamba mixers: Falcon-H1's, Bamba's, Granite 4's, Nemotron-H's, Zamba2's, Mamba-2's; Jamba's, Mamba's,
    # Falcon-Mamba's
    "Mixer": (_MAMBA, 1),
    "MambaLayer": (_MAMBA, 1),
    # MiniMax-Text-01's / M1's linear attention in blocks: (output, state)
    "LightningAttention": (("hidden_states", "position_embeddings", "attention_mask", "past_key_values"), 1),
    # ZAYA1's q / k convolution and values delayed by one token: (query, key, value)
    "CCAProjection": (("hidden_states", "past_key_values", "conv_mask"), 3),
    # Inkling's short convolutions, which its layers call without the pack's keywords
    "ShortConvolution": (("hidden_states", "past_key_values", "conv_mask"), 1),
    # Qwen4-Exp's hashed n-gram embeddings of the preceding token ids, then a dilated convolution
    "PLELayer": (("hidden_states", "input_ids", "past_key_values", "conv_mask"), 1),
}
# indexers run per sequence too, their one output the key each query picks (-1: none), shifted by the
# sequence's start: GLM-5-Next's (keys pooled along its input, causality worked out from positions);
# the attention holding one builds its mask from the picks (`OWN_MASKS`)
INDEXERS = {"TextIndexer": ("hidden_states", "q_resid", "attention_mask", "past_key_values")}
OWN_MASKS = "_reasonrl_own_masks"  # on an attention class: in a pack it attends under the mask it builds
CACHES = ("cache_params", "past_key_values")  # with one given, the layer runs as it is
_LAYER = threading.local()  # .bounds: the pack bounds the layer holding a mixer runs with, if any
_MIXER = "_reasonrl_mixer"  # on a mixer's forward put in place
_KEPT = "_reasonrl_pack_bounds"  # on a mixer layer's input tensor: the bounds its forward ran with
PACK_KEYWORDS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")


def _layer_modules(model, endings: tuple[str, ...], function: str) -> list:
    """The Python modules of `model`'s layers whose class name ends with one of `endings` and whose module
    defines `function` (the name the layer's forward calls)."""
    found = {}
    for m in model.modules():
        if type(m).__name__.endswith(endings):
            mod = sys.modules.get(type(m).__module__)
            if mod is not None and callable(getattr(mod, function, None)):
                found[mod.__name__] = mod
    return list(found.values())


def _conv_modules(model) -> list:
    return _layer_modules(model, CONVOLVING, "causal_conv1d_fn")


def install(model) -> None:
    """Within a pack's forward, keep `model`'s short convolutions, delta rules and SEQUENCE_LAYERS (if any)
    within each sequence, and restart its mask-built ALiBi (if any) per sequence."""
    for mod in _conv_modules(model):
        if not getattr(mod.causal_conv1d_fn, _MARK, False):
            mod.causal_conv1d_fn = _bounded(mod.causal_conv1d_fn)
    for ending, rule in RECURRENT.items():
        for mod in _layer_modules(model, (ending,), rule):
            if not getattr(getattr(mod, rule), _MARK, False):
                setattr(mod, rule, _per_sequence(getattr(mod, rule)))
    for m in model.modules():
        cls = type(m)
        if not getattr(cls.forward, _MARK, False) and (kind := _sequence_layer(cls)):
            cls.forward = _mixer_per_sequence(cls.forward, *kind)
    for m in model.modules():  # the layers holding them
        holds = [getattr(type(c).forward, _MIXER, False) for c in m.children()]
        if any(holds) and not getattr(type(m).forward, _MARK, False):
            type(m).forward = _handing_bounds(type(m).forward)
        if "indices" in holds:
            setattr(type(m), OWN_MASKS, True)
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
    convolutions (Gated DeltaNet layers' included); {} otherwise (other models' forwards never see the keyword)."""
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


def _side_by_side(cu: torch.Tensor, part, joined: int = 1):
    """`part(a, b)` for each sequence [a, b) of a pack whose sequences start at `cu` (ends included),
    concatenated along the sequence (dim 1); of tuples, the first `joined` outputs, the others (a
    recurrent state) None."""
    bounds = cu.tolist()
    outs = [part(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    if not isinstance(outs[0], tuple):
        return torch.cat(outs, dim=1)
    return tuple(torch.cat([o[i] for o in outs], dim=1) if i < joined else None for i in range(len(outs[0])))


def _takes_bounds(rule) -> bool:
    """Whether the implementation behind transformers' kernel wrapper takes `cu_seqlens` (fla's does; the
    wrapper drops keywords its implementation lacks). False when it cannot be told: splitting is right
    for every implementation, only slower."""
    import inspect

    try:
        params = inspect.getclosurevars(rule).nonlocals.get("applicable_params")
    except (TypeError, ValueError):
        return False
    return params is not None and "cu_seqlens" in params


def _per_sequence(original):
    takes_bounds = _takes_bounds(original)

    @torch.compiler.disable  # a loop over Python ints, as segment attention
    def chunk_delta_rule(query, key, value, g, beta, *args, cu_seqlens=None, **kwargs):
        """The delta rule over [1, P, heads, dim] inputs of a pack whose sequences start at `cu_seqlens`
        (Gated DeltaNet layers pass it) or `cu_seq_lens_q` (Kimi's pass the pack's keywords on), ends
        included: each sequence from a zero state, outputs side by side; the function it replaced
        without bounds (generation, padded forwards) or with one sequence."""
        if cu_seqlens is None:
            cu_seqlens = kwargs.get("cu_seq_lens_q")
        if cu_seqlens is None or len(cu_seqlens) <= 2:
            return original(query, key, value, g, beta, *args, **kwargs)
        if takes_bounds:
            return original(
                query, key, value, g, beta, *args, cu_seqlens=cu_seqlens.to(query.device), **kwargs
            )
        if query.shape[0] != 1 or kwargs.get("initial_state") is not None or kwargs.get("output_final_state"):
            raise NotImplementedError("model.pack_tokens: a delta rule over a pack with a batch of "
                                      f"{query.shape[0]} rows or a carried state; set model.pack_tokens=0")  # fmt: skip

        def part(a, b):
            return original(*(x[:, a:b] for x in (query, key, value, g, beta)), *args, **kwargs)

        return _side_by_side(cu_seqlens, part)

    setattr(chunk_delta_rule, _MARK, True)
    chunk_delta_rule.original = original
    return chunk_delta_rule


def _sequence_layer(cls) -> tuple[int, bool] | None:
    """(how many outputs of `cls`'s forward are per position, whether it is an indexer) if it is one of
    SEQUENCE_LAYERS or INDEXERS (its name and its forward's parameters); None otherwise."""
    import inspect

    forward = getattr(cls.forward, "original", cls.forward)
    names = tuple(list(inspect.signature(forward).parameters)[1:])
    kinds = [(e, start, joined, False) for e, (start, joined) in SEQUENCE_LAYERS.items()]
    for ending, start, joined, indexer in kinds + [(e, start, 1, True) for e, start in INDEXERS.items()]:
        if cls.__name__.endswith(ending) and names[: len(start)] == start:
            return joined, indexer
    return None


def _cut(x, length: int, a: int, b: int):
    """Positions [a, b) of a [1, length, ...] tensor (or a tuple of them: rotary cos / sin); anything else
    as it is."""
    if isinstance(x, tuple):
        return tuple(_cut(t, length, a, b) for t in x)
    if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[:2] == (1, length):
        return x[:, a:b]
    return x


def _mixer_per_sequence(forward, joined: int, indexer: bool = False):
    import inspect

    signature = inspect.signature(forward)
    var_keyword = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

    @torch.compiler.disable  # a loop over Python ints, as segment attention
    def mixer_forward(self, *args, **kwargs):
        """The layer over each sequence of a pack alone (bounds `cu_seq_lens_q`, ends included, which the
        decoder layer passes on, also when a checkpointed layer is recomputed, or which the layer
        holding it hands it), its per-position inputs cut per sequence, outputs side by side (of a
        tuple, the first `joined`; the others, a recurrent state, None); the forward it replaced
        without bounds (generation, padded forwards), with one sequence or a cache."""
        given = signature.bind(self, *args, **kwargs).arguments
        extra = given.pop(var_keyword, {}) if var_keyword else {}
        hidden = given["hidden_states"]
        cu = extra.get("cu_seq_lens_q")
        if cu is None:
            cu = getattr(_LAYER, "bounds", None)
        if cu is not None:
            from reasonrl.engines.packing import kept_apart

            kept_apart()
        if (
            cu is None
            or len(cu) <= 2
            or any(given.get(c) is not None for c in CACHES)
            or hidden.shape[0] != 1
        ):
            return forward(self, *args, **kwargs)
        rest = {k: v for k, v in extra.items() if k not in PACK_KEYWORDS}
        length = hidden.shape[1]

        def part(a, b):
            out = forward(self, **{k: _cut(v, length, a, b) for k, v in given.items() if k != "self"}, **rest)
            return torch.where(out >= 0, out + a, out) if indexer else out  # keys of the pack

        return _side_by_side(cu, part, joined)

    setattr(mixer_forward, _MARK, True)
    setattr(mixer_forward, _MIXER, "indices" if indexer else True)
    mixer_forward.original = forward
    return mixer_forward


def _handing_bounds(forward):
    def layer_forward(self, *args, **kwargs):
        """The forward it replaced, with the layer's mixer handed the pack's bounds: this layer's
        `cu_seq_lens_q`, else those of the pack whose forward runs, kept on the input tensor for a
        checkpointed layer's recompute, else those kept there."""
        before = _hand(args[0] if args else kwargs.get("hidden_states"), kwargs.get("cu_seq_lens_q"))
        try:
            return forward(self, *args, **kwargs)
        finally:
            _hand_back(before)

    setattr(layer_forward, _MARK, True)
    layer_forward.original = forward
    return layer_forward


@torch.compiler.disable  # Python state: where the layer is compiled, a graph break before and after it
def _hand(hidden, cu: torch.Tensor | None) -> torch.Tensor | None:
    """Give the mixers of the layer about to run `cu`, or without it the bounds kept on `hidden` (a
    recompute) or those of the pack whose forward runs (then kept on `hidden`); returns the bounds
    given before."""
    from reasonrl.engines.packing import pack_bounds

    if cu is None and isinstance(hidden, torch.Tensor):
        cu = next((getattr(t, _KEPT) for t in (hidden, hidden._base) if hasattr(t, _KEPT)), None)
        if cu is None and (cu := pack_bounds()) is not None:
            cu = _keep(hidden, cu)
    before, _LAYER.bounds = getattr(_LAYER, "bounds", None), cu
    return before


@torch.compiler.disable
def _hand_back(before: torch.Tensor | None) -> None:
    _LAYER.bounds = before


def _keep(hidden: torch.Tensor, cu: torch.Tensor) -> torch.Tensor | None:
    """`cu`, kept on `hidden` [1, P, ...] (a pack's hidden states) for its layer's recompute, and on the
    tensor it is a view of: FSDP2's hook before a sharded layer's forward hands it a new view of its
    input each time, the checkpoint's recompute too; None for another tensor."""
    if hidden.dim() != 3 or hidden.shape[:2] != (1, int(cu[-1])):
        return None
    for t in (hidden, hidden._base):
        if t is not None:
            setattr(t, _KEPT, cu)
    return cu
