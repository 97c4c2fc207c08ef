"""Sequence packing for the training forward (`model.pack_tokens`): the real tokens of a micro-batch's
rows (no left-padded prompt positions, no right-padded completion positions) laid end to end in packs
of at most `pack_tokens` tokens, position ids restarting at 0 for each sequence, so no compute is
spent on padding.

Owns: `plan_packs` (rows -> packs, first fit in row order; a row longer than the budget gets a pack of
its own), `check_packing` (before training: a model whose pack's sequences do not stay apart, as when
its other layers carry state from one sequence into the next, is refused with a one-line error naming
model.pack_tokens), `packed_logprobs` (the packed forward; log-probs and entropy scattered back to the [B, T]
completion layout every loss expects) and the attention a pack runs with (`segment_attention`).

Attention stays within each sequence: the model's attention implementation becomes `segment_attention`
(registered with transformers' `AttentionInterface`; `use_segment_attention`), which runs causal SDPA
on the pack's sequences side by side, bounded by `cu_seq_lens_q` (the sequences' offsets,
transformers' documented varlen keyword), and the model's own implementation on any other forward. A
model whose decoder layers drop those keywords on the way to attention but pass `position_ids` (StableLM)
has the bounds read off the position ids instead (a new sequence wherever they do not count on by
one, transformers' own rule for packed flash attention). No attention is
computed across sequences: about sum(n_i^2) work instead of P^2 (transformers' own packed path, SDPA
under a dense block-causal mask over the pack, was 1.7x slower on the demo; docs/distributed.md).
Sliding-window layers get a window mask per sequence; attention sinks (gpt-oss) run through SDPA with one
extra key (`pack_attention.sink_attention`); logit soft-capping (Gemma 2) in blocks of queries that keep no
scores (`models.softcap`); a score bias (Inkling), which SDPA cannot do, as explicit attention per group of
sequences. A model whose attention is
code of its own (BLOOM, GPT-J, ...) runs it under a block mask instead (`PACK_MASK`: transformers' mask for
its implementation, made causal within each sequence). Under FSDP2 every rank runs the
same number of pack forwards (the shortest pads with empty ones). Does not own: the padded forward
(`engines.single`).
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager, nullcontext

import torch

from reasonrl import distributed as dist
from reasonrl.algorithms.logprobs import logprobs_and_entropy
from reasonrl.engines.pack_attention import (
    causal_sdpa,
    explicit_attention,
    selected_keys,
    sink_attention,
    slot_groups,
)
from reasonrl.models.softcap import softcap_attention
from reasonrl.types import TrainBatch


def plan_packs(lengths: list[int], budget: int) -> list[list[int]]:
    """Row indices per pack: rows in order, a new pack when the next row would overflow `budget`."""
    packs: list[list[int]] = []
    used = budget + 1
    for i, n in enumerate(lengths):
        if used + n > budget:
            packs.append([])
            used = 0
        packs[-1].append(i)
        used += n
    return packs


SEGMENT_ATTENTION = "reasonrl_segments"  # the name it is registered under with transformers
BASE_ATTENTION = "_reasonrl_base_attention"  # config attribute: the implementation it replaced
# config attribute: the model attends in code of its own, and a pack gets a block mask instead
PACK_MASK = "_reasonrl_pack_mask"
_PACK = threading.local()  # .forward: a pack's forward is running (no mask to build); .calls: attention calls
_BOUNDS: dict[int, torch.Tensor | None] = {}  # id(position ids) -> the pack bounds read off them


@torch.compiler.disable  # a loop over Python ints: compiled decoder layers run it eagerly
def segment_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: query [1, H, P, D], key / value [1, H_kv, P, D] of a pack whose
    sequences start at `cu_seq_lens_q` (a CPU tensor, ends included) -> ([1, P, H, D], None); without
    `cu_seq_lens_q`, the model's own attention implementation with the mask transformers built for it.
    Given `indices` (DeepSeek Sparse Attention: each query's keys as its indexer picked them), the model's
    own attention over those keys (`pack_attention.selected_keys`), under the mask transformers built:
    in a pack, causal within each sequence (`PACK_MASK`), which the indexer needs as well; so too any
    call under that block mask (`_under_block_mask`)."""
    indices = kwargs.pop("indices", None)
    if indices is not None:
        if attention_mask is None:
            raise NotImplementedError("model.pack_tokens: this model's sparse attention picks its keys without a "
                                      "mask in a pack; set model.pack_tokens=0")  # fmt: skip
        attention_mask = selected_keys(attention_mask, indices, key.shape[2], query.dtype)
    if indices is not None or _under_block_mask(module, attention_mask):
        _PACK.calls = getattr(_PACK, "calls", 0) + getattr(_PACK, "forward", False)
        return _base_attention(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                       **kwargs)  # fmt: skip
    cu = _pack_bounds(query, key, attention_mask, kwargs)
    if cu is None:  # not a pack (generation, a padded batch, FSDP2's empty one-token pack)
        return _base_attention(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                       **kwargs)  # fmt: skip
    _PACK.calls = getattr(_PACK, "calls", 0) + 1
    window, softcap, sinks = kwargs.get("sliding_window"), kwargs.get("softcap"), kwargs.get("s_aux")
    bias = kwargs.get("position_bias")  # Inkling's [1, H, P, P] relative-position bias
    q, k, v = query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1)  # [P, H, D]
    groups, where = slot_groups(cu, query.device)
    outs = []
    for n, length, flat, keep in groups:  # sequences of similar length side by side, right-padded
        mask = None
        if window and length > window:  # position j sees i when j - window < i <= j
            i = torch.arange(length, device=query.device)
            mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
        # [P, H, D] -> [S, H, L, D]; index_select, whose backward is one index_add
        sq, sk, sv = (
            x.index_select(0, flat).view(n, length, *x.shape[1:]).transpose(1, 2) for x in (q, k, v)
        )
        if softcap is None and sinks is None and bias is None:  # padding comes after every real position
            out = causal_sdpa(sq, sk, sv, mask, scaling, dropout)
        elif softcap is None and bias is None:  # sinks, through SDPA too
            out = sink_attention(sq, sk, sv, mask, scaling, dropout, sinks)
        elif sinks is None and bias is None and not (dropout and module.training):  # soft-capped, in blocks
            out = softcap_attention(sq, sk, sv, mask, scaling or sq.shape[-1] ** -0.5, softcap)
        else:  # each sequence's block of the bias: [H, S, L, L] -> [S, H, L, L]
            at = flat.view(n, length)
            part = None if bias is None else bias[0][:, at[:, :, None], at[:, None, :]].transpose(0, 1)
            out = explicit_attention(sq, sk, sv, mask, scaling, dropout, softcap, sinks, part)
        outs.append(out.transpose(1, 2).reshape(n * length, out.shape[1], out.shape[3]).index_select(0, keep))
    out = torch.cat(outs)
    return out.new_empty(out.shape).index_copy(0, where, out).unsqueeze(0), None


def _under_block_mask(module, attention_mask) -> bool:
    """Whether an attention call carries the block mask its model was given for packs (`PACK_MASK`), which
    the model's own code may have narrowed (Qwen4-Exp's indexer picks keys within it), or a mask its
    attention builds from its indexer's picks, each sequence's picked alone (GLM-5-Next:
    `pack_layers.INDEXERS`): then it runs the model's own attention under that mask."""
    from reasonrl.engines.pack_layers import OWN_MASKS

    own = getattr(module.config, PACK_MASK, False) or getattr(type(module), OWN_MASKS, False)
    return attention_mask is not None and own


def _pack_bounds(query, key, attention_mask, kwargs) -> torch.Tensor | None:
    """The pack's sequence offsets (ends included, on the CPU), or None for a forward that is not a pack.
    `cu_seq_lens_q` where the model passes it on; else, for one row without a mask or a cache, from the
    `position_ids` the layer passed: a new sequence wherever they do not count on by one. One sequence
    from 0 outside a pack's forward (a one-row prefill) is not a pack: None, so it runs the model's own
    attention. Read once per position-id tensor and kept while it lives: every layer gets the same one,
    and so does a checkpointed layer's recompute in backward, which must take the path its forward took
    (a one-sequence pack recomputed outside its pack's forward too)."""
    cu = kwargs.get("cu_seq_lens_q")
    pos = kwargs.get("position_ids")
    if cu is not None or pos is None or attention_mask is not None:
        return cu
    if query.shape[0] != 1 or pos.shape != (1, query.shape[2]) or key.shape[2] != query.shape[2]:
        return None
    if id(pos) in _BOUNDS:
        return _BOUNDS[id(pos)]
    p = pos[0].cpu()
    starts = torch.cat([torch.tensor([True]), p[1:] != p[:-1] + 1]).nonzero().squeeze(1)
    single = len(starts) == 1 and p[0] == 0 and not getattr(_PACK, "forward", False)
    cu = None if single else torch.cat([starts, torch.tensor([len(p)])])
    _BOUNDS[id(pos)] = cu
    weakref.finalize(pos, _BOUNDS.pop, id(pos), None)  # gone with its tensor, before its id is reused
    return cu


def _base_attention(module):
    """The attention function `module` ran before `use_segment_attention` (its model's own eager
    function for "eager": Gemma 2's soft-capping and gpt-oss's sinks live there, and SDPA drops them)."""
    import sys

    from transformers import AttentionInterface

    base = getattr(module.config, BASE_ATTENTION, "sdpa")
    if base == "eager":
        return sys.modules[type(module).__module__].eager_attention_forward
    return AttentionInterface._global_mapping[base]


def _segment_mask(*args, **kwargs):
    """transformers mask builder for segment attention: none for a pack (its bounds are passed instead;
    a dense [P, P] block mask would be built for nothing, and kept for each checkpointed layer's
    recompute) unless the model attends in code of its own (`PACK_MASK`: then the base implementation's
    mask, causal within each of the pack's sequences), the base implementation's for any other forward."""
    from transformers.masking_utils import (
        ALL_MASK_ATTENTION_FUNCTIONS,
        and_masks,
        packed_sequence_mask_function,
    )

    config = kwargs.get("config")
    if getattr(_PACK, "forward", False):
        segments = getattr(_PACK, "segments", None)
        if not getattr(config, PACK_MASK, False) or segments is None:
            return None
        kwargs["mask_function"] = and_masks(kwargs["mask_function"], packed_sequence_mask_function(segments))
        kwargs["allow_is_causal_skip"] = False
        _PACK.masks += 1
    base = getattr(config, BASE_ATTENTION, "sdpa")
    return ALL_MASK_ATTENTION_FUNCTIONS._global_mapping[base](*args, **kwargs)


def use_segment_attention(model) -> None:
    """Point every config of `model` at `segment_attention` (registered with transformers on first use),
    for good: a checkpointed layer recomputed in backward must run the same attention as its forward.
    Other forwards (generation, a padded batch) reach the implementation it replaced, with its own mask,
    unchanged."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    from reasonrl.engines.pack_layers import install

    install(model)  # convolutions, delta rules, Mamba mixers, ... and ALiBi kept within each sequence
    AttentionInterface.register(SEGMENT_ATTENTION, segment_attention)
    AttentionMaskInterface.register(SEGMENT_ATTENTION, _segment_mask)
    for m in model.modules():
        config = getattr(m, "config", None)
        if hasattr(config, "_attn_implementation") and config._attn_implementation != SEGMENT_ATTENTION:
            setattr(config, BASE_ATTENTION, config._attn_implementation or "sdpa")
            config._attn_implementation = SEGMENT_ATTENTION


def pack_bounds() -> torch.Tensor | None:
    """Within a pack's forward, its sequences' offsets (ends included, on the CPU); None outside one."""
    return getattr(_PACK, "bounds", None) if getattr(_PACK, "forward", False) else None


def kept_apart() -> None:
    """A layer other than attention ran a pack's sequences apart (`engines.pack_layers.SEQUENCE_LAYERS`:
    Mamba mixers, ...): what a pack's forward needs where the model has no attention at all (Mamba)."""
    _PACK.kept = getattr(_PACK, "kept", 0) + 1


def pack_segments() -> torch.Tensor | None:
    """Within a pack's forward, its sequence index per position [1, P]; None outside one."""
    return getattr(_PACK, "segments", None) if getattr(_PACK, "forward", False) else None


@contextmanager
def _pack_forward(lengths: list[int], device):
    """Within: the forward of a pack of sequences of `lengths`; raises after it if no attention layer went
    through segment attention, no block mask was built and no Mamba mixer ran per sequence (a model
    whose attention bypasses transformers' attention interface would attend across the pack; a model
    without attention has only its mixers to keep it apart)."""
    _PACK.forward, _PACK.calls, _PACK.masks, _PACK.kept = True, 0, 0, 0
    _PACK.segments = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))[None].to(
        device
    )
    _PACK.bounds = _offsets(lengths)
    try:
        yield
    finally:
        _PACK.forward, _PACK.segments, _PACK.bounds = False, None, None
    if not _PACK.calls and not _PACK.masks and not _PACK.kept:
        raise NotImplementedError("model.pack_tokens: this model's attention does not go through transformers' "
                                  "attention interface, so a pack cannot be kept apart; set model.pack_tokens=0")  # fmt: skip


def _offsets(lengths: list[int]) -> torch.Tensor:
    """The offsets of a pack's sequences of `lengths`, ends included (a CPU tensor: read per layer)."""
    return torch.tensor([0, *lengths]).cumsum(0)


def _pack_inputs(model, seq: torch.Tensor, lengths: list[int]) -> dict:
    """`model`'s keyword arguments for a pack `seq` [1, P] of sequences of `lengths`: position ids
    restarting per sequence, their bounds (a CPU tensor: read per layer), and for short convolutions
    the sequence index per position (`engines.pack_layers`)."""
    from reasonrl.engines.pack_layers import pack_kwargs

    pos = torch.cat([torch.arange(n, device=seq.device) for n in lengths]).unsqueeze(0)
    cu = _offsets(lengths)
    return dict(input_ids=seq, position_ids=pos, attention_mask=None, cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                max_length_q=max(lengths), max_length_k=max(lengths), **pack_kwargs(model, lengths, seq.device))  # fmt: skip


def _restore_attention(model) -> None:
    """Undo `use_segment_attention`: every config back on the implementation it replaced."""
    for m in model.modules():
        config = getattr(m, "config", None)
        if getattr(config, "_attn_implementation", None) == SEGMENT_ATTENTION and hasattr(
            config, BASE_ATTENTION
        ):
            config._attn_implementation = getattr(config, BASE_ATTENTION)
    _set_pack_mask(model, False)


@torch.no_grad()
def _plain_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """Logits of a left-padded two-row batch (eval mode) at its real positions [real, V]: what switching to
    segment attention must not change in a forward that is not a pack (the pad positions' logits are
    never read; GLM-5-Next's pad queries, which see no key, come out otherwise under another name)."""
    from reasonrl.models.isolation import evaluating

    attn = torch.ones_like(ids)
    attn[1, :3] = 0
    with evaluating(model):
        return model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp_min(0),
                     use_cache=False).logits.float()[attn.bool()]  # fmt: skip


def check_packing(model) -> None:
    """ConfigError before training unless a pack's sequences stay apart in this model, with the model's
    attention implementation left as it was on a refusal:
    - a padded forward must not change when the model switches to segment attention (a model whose
      code branches on the implementation's name; DeepSeek-V3.2's and GLM-5's
      sparse attention pass their picked keys on as `indices` under another name, which segment
      attention reads);
    - one forward of a two-sequence pack (eval mode) must run and go through segment attention, or else
      (attention of the model's own) its own attention under a block mask per pack, or (no attention:
      Mamba) Mamba mixers per sequence (the check every packed forward makes); each sequence's logits
      must equal those of the sequence run alone (a model that drops the pack's position ids counts
      them along the pack, which no dependence shows);
      the first tokens' outputs must not depend on any later token
      (attention code of the model's own that a pack leaves without a causal mask), and the second
      sequence's must not depend on the first's tokens (`models.isolation.dependence`). The last
      fails for the hybrids whose recurrence or linear-attention layers run along the whole pack
      (none of the families tested now), whose log-probs it would corrupt; the tested hybrids'
      convolutions, delta rules, Mamba mixers, lightning attention and convolved attention projections
      run per sequence (`engines.pack_layers`).
    Llama 4, DeepSeek-V4 and Inkling with logit scaling are refused by their configs: Llama 4's chunked
    attention and query scaling (and Inkling's `log_scaling_n_floor`) follow the position in the whole
    input, which no probe shorter than its 8k chunks would show; so do V4's compressed blocks, past its
    128-token window."""
    from reasonrl.config import ConfigError
    from reasonrl.models.isolation import LEAK, compressed_layers, tolerance
    from reasonrl.models.loading import text_config

    kind = getattr(model.config, "model_type", type(model).__name__)
    absolute = [
        k
        for k in ("attention_chunk_size", "attn_temperature_tuning", "log_scaling_n_floor")
        if getattr(text_config(model.config), k, None)
    ] + compressed_layers(model.config)
    if absolute:  # Llama 4: chunks of the whole input, queries scaled by their place in it (past 8k tokens);
        # DeepSeek-V4: keys and values compressed in blocks of the whole input (past its 128-token window)
        raise ConfigError(f"model.pack_tokens: model {kind!r} attends by position in the whole input ({', '.join(absolute)}: "
                          "chunks, query scaling or compressed blocks), which a pack would apply across its sequences; set "
                          "model.pack_tokens=0")  # fmt: skip
    device = next(model.parameters()).device
    vocab = text_config(model.config).vocab_size  # (no input embeddings: named by the pack's check)
    tokens = torch.tensor([[(1 + k) % vocab for k in range(11)]], device=device)
    plain = torch.cat([tokens, tokens.roll(3, -1)])
    before = _plain_logits(model, plain)
    use_segment_attention(model)
    try:
        after = _plain_logits(model, plain)
        if not torch.allclose(after, before, rtol=1e-4, atol=1e-4):
            raise ConfigError(f"model.pack_tokens: model {kind!r} computes another forward under segment attention "
                              f"(logits {(after - before).abs().max().item():.2g} apart on a padded batch: its code "
                              "branches on the attention implementation's name); set model.pack_tokens=0")  # fmt: skip
        inputs = _pack_inputs(model, tokens, [6, 5])
        try:
            try:
                leak, future = _pack_dependence(model, inputs, [6, 5])
            except Exception:  # noqa: BLE001 - attention of its own (BLOOM, GPT-J, ...; MPT stops on the
                # mask segment attention leaves out): its own attention with a block mask per pack instead
                _set_pack_mask(model, True)
                leak, future = _pack_dependence(model, inputs, [6, 5])
            gap = _solo_gap(model, tokens, [6, 5])
        except NotImplementedError as e:
            raise ConfigError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - whatever the model's code does with a pack, named
            raise ConfigError(f"model.pack_tokens: model {kind!r} cannot run a packed forward ({type(e).__name__}: "
                              f"{e}); set model.pack_tokens=0") from e  # fmt: skip
        if future > LEAK:
            raise ConfigError(f"model.pack_tokens: model {kind!r} attends to later tokens in a pack (dependence "
                              f"{future:.2g}: attention outside transformers' attention interface, without the causal "
                              "mask a pack leaves out); set model.pack_tokens=0")  # fmt: skip
        if leak > LEAK:
            raise ConfigError(f"model.pack_tokens: model {kind!r} carries state from one sequence of a pack into the next "
                              f"(dependence {leak:.2g}: layers beside attention, such as a convolution, a recurrence or "
                              "linear attention, run along the whole pack), so packed log-probs would be wrong; set "
                              "model.pack_tokens=0")  # fmt: skip
        if gap > tolerance(model):
            raise ConfigError(f"model.pack_tokens: model {kind!r} computes a pack's sequences otherwise than each alone "
                              f"(logits {gap:.2g} of their spread apart on average: e.g. positions counted along the whole pack); "
                              "set model.pack_tokens=0")  # fmt: skip
    except BaseException:
        _restore_attention(model)
        raise


def _pack_dependence(model, inputs: dict, lengths: list[int]) -> tuple[float, float]:
    """(the second sequence's outputs on the first's tokens, the first tokens' outputs on all after them)
    in a two-sequence pack, by gradient (`models.isolation.dependence`)."""
    from reasonrl.models.isolation import dependence

    device, (a, b) = inputs["input_ids"].device, lengths
    with _pack_forward(lengths, device):
        leak = dependence(
            model, inputs, src=[(0, j) for j in range(a)], dst=[(0, j) for j in range(a, a + b)]
        )
    with _pack_forward(lengths, device):
        future = dependence(
            model, inputs, src=[(0, j) for j in range(3, a + b)], dst=[(0, j) for j in range(3)]
        )
    return leak, future


@torch.no_grad()
def _solo_gap(model, tokens: torch.Tensor, lengths: list[int]) -> float:
    """`models.isolation.relative_gap` between a pack's logits and those of each of its sequences run
    alone (eval mode)."""
    from reasonrl.models.isolation import evaluating, relative_gap

    with evaluating(model):
        with _pack_forward(lengths, tokens.device):
            packed = model(**_pack_inputs(model, tokens, lengths), use_cache=False).logits[0]
        solo = torch.cat(
            [model(input_ids=part, use_cache=False).logits[0] for part in tokens.split(lengths, dim=1)]
        )
    return relative_gap(packed, solo)


def _set_pack_mask(model, on: bool) -> None:
    """Give (or stop giving) every config of `model` a block mask per pack (`PACK_MASK`)."""
    for m in model.modules():
        config = getattr(m, "config", None)
        if hasattr(config, "_attn_implementation"):
            setattr(config, PACK_MASK, on)


def packed_logprobs(model, batch: TrainBatch, with_entropy: bool = False, autocast=nullcontext, pack_tokens: int = 1024,
                    entropy_grad: bool = True, chunk: int = 0, temperature: float = 1.0):  # fmt: skip
    """(logprobs [B, T], entropy [B, T] or None) of the completion tokens, from packed forwards. chunk > 0:
    from the last hidden states, `chunk` completion positions at a time (`output_head.head_logprobs`: no
    [P, V] logits)."""
    from reasonrl.engines.output_head import head_logprobs
    from reasonrl.engines.single import last_hidden

    ids, attn, p = batch.input_ids, batch.attention_mask, batch.prompt_len
    B, T = ids.shape[0], ids.shape[1] - p
    starts = [int((attn[i, :p] == 0).sum()) for i in range(B)]  # left padding of each prompt
    ends = [p + int(attn[i, p:].sum()) for i in range(B)]  # one past the last real completion token
    lp_out = torch.zeros(B, T, device=ids.device)
    ent_out = torch.zeros(B, T, device=ids.device) if with_entropy else None
    packs = plan_packs([ends[i] - starts[i] for i in range(B)], pack_tokens)
    use_segment_attention(model)
    forwards = dist.max_over_ranks(len(packs))  # agreed before any forward: collectives stay in order
    for pack in packs:
        seq = torch.cat([ids[i, starts[i] : ends[i]] for i in pack]).unsqueeze(0)
        lengths = [ends[i] - starts[i] for i in pack]
        inputs = _pack_inputs(model, seq, lengths)
        with _pack_forward(lengths, ids.device):
            if chunk:
                out = last_hidden(model, autocast, **inputs)[0]
            else:
                with autocast():
                    out = model(**inputs, use_cache=False).logits[0]
        at, rows, cols, off = [], [], [], 0  # pack position t predicts token t + 1
        for i in pack:
            n_prompt, n_comp = p - starts[i], ends[i] - p
            at.extend(range(off + n_prompt - 1, off + n_prompt - 1 + n_comp))
            rows.extend([i] * n_comp)
            cols.extend(range(n_comp))
            off += ends[i] - starts[i]
        if not at:  # no completion token in this pack: joined to the graph so its backward runs (FSDP2)
            lp_out = lp_out + 0.0 * out.float().sum()
            continue
        at_t = torch.tensor(at, device=ids.device)
        picked, targets = out.index_select(0, at_t), seq[0].index_select(0, at_t + 1)
        if chunk:
            lp, ent = head_logprobs(
                model, picked, targets, with_entropy, autocast, chunk, entropy_grad, temperature
            )
        else:  # one log-softmax over all the pack's completion positions
            lp, ent = logprobs_and_entropy(picked, targets, with_entropy, entropy_grad, temperature)
        where = (torch.tensor(rows, device=ids.device), torch.tensor(cols, device=ids.device))
        lp_out = lp_out.index_put(where, lp)
        if with_entropy:
            ent_out = ent_out.index_put(where, ent)
    # FSDP2: each forward gathers every layer's shards (and its backward reduce-scatters the gradients),
    # so every rank runs as many forwards as the rank with the most packs: the others add empty ones,
    # joined to the graph with weight 0 so their backward runs too
    for _ in range(forwards - len(packs)):
        one = ids[:1, :1]
        with autocast():
            dummy = model(input_ids=one, position_ids=torch.zeros_like(one), use_cache=False).logits
        lp_out = lp_out + 0.0 * dummy.float().sum()
    return lp_out, ent_out
