"""Sequence packing for the training forward (`model.pack_tokens`): the real tokens of a micro-batch's
rows (no left-padded prompt positions, no right-padded completion positions) laid end to end in packs
of at most `pack_tokens` tokens, position ids restarting at 0 for each sequence, so no compute is
spent on padding.

Owns: `plan_packs` (rows -> packs, first fit in row order; a row longer than the budget gets a pack of
its own) and `packed_logprobs` (the packed forward; log-probs and entropy scattered back to the [B, T]
completion layout every loss expects). Attention stays within each sequence: transformers builds a
block-causal mask from position ids that restart when the 2D attention mask is None (SDPA / eager;
flash-attention varlen on GPU). Under FSDP2 every rank runs the same number of pack forwards (the
shortest pads with empty ones). Does not own: the padded forward (`engines.single`).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from reasonrl import distributed as dist
from reasonrl.algorithms.logprobs import logprobs_and_entropy
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


def packed_logprobs(model, batch: TrainBatch, with_entropy: bool = False, autocast=nullcontext, pack_tokens: int = 1024,
                    entropy_grad: bool = True):  # fmt: skip
    """(logprobs [B, T], entropy [B, T] or None) of the completion tokens, from packed forwards."""
    ids, attn, p = batch.input_ids, batch.attention_mask, batch.prompt_len
    B, T = ids.shape[0], ids.shape[1] - p
    starts = [int((attn[i, :p] == 0).sum()) for i in range(B)]  # left padding of each prompt
    ends = [p + int(attn[i, p:].sum()) for i in range(B)]  # one past the last real completion token
    lp_out = torch.zeros(B, T, device=ids.device)
    ent_out = torch.zeros(B, T, device=ids.device) if with_entropy else None
    packs = plan_packs([ends[i] - starts[i] for i in range(B)], pack_tokens)
    forwards = dist.max_over_ranks(len(packs))  # agreed before any forward: collectives stay in order
    for pack in packs:
        seq = torch.cat([ids[i, starts[i] : ends[i]] for i in pack]).unsqueeze(0)
        pos = torch.cat([torch.arange(ends[i] - starts[i], device=ids.device) for i in pack]).unsqueeze(0)
        with autocast():
            logits = model(input_ids=seq, position_ids=pos, attention_mask=None, use_cache=False).logits[0]
        off = 0
        for i in pack:
            n_prompt, n_comp = p - starts[i], ends[i] - p
            if n_comp > 0:  # logits at position t predict token t + 1
                z = logits[off + n_prompt - 1 : off + n_prompt - 1 + n_comp]
                targets = seq[0, off + n_prompt : off + n_prompt + n_comp]
                lp, ent = logprobs_and_entropy(z, targets, with_entropy, entropy_grad)
                lp_out[i, :n_comp] = lp
                if with_entropy:
                    ent_out[i, :n_comp] = ent
            off += ends[i] - starts[i]
    # FSDP2: each forward gathers every layer's shards (and its backward reduce-scatters the gradients),
    # so every rank runs as many forwards as the rank with the most packs: the others add empty ones,
    # joined to the graph with weight 0 so their backward runs too
    for _ in range(forwards - len(packs)):
        one = ids[:1, :1]
        with autocast():
            dummy = model(input_ids=one, position_ids=torch.zeros_like(one), use_cache=False).logits
        lp_out = lp_out + 0.0 * dummy.float().sum()
    return lp_out, ent_out
