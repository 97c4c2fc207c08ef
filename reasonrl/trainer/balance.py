"""Balancing a step's rows across data-parallel ranks by tokens (verl's `balance_batch`).

Each rank generates and scores its own prompts, so one rank can hold the long completions and another
the short ones, and every rank then waits for the slowest at each collective of the update. With
several ranks and `train.balance_tokens`, after advantages are computed:

  `gather_batch`         every rank's rows in rank order (all-gathered, re-padded to the widest
                         prompt / completion, group ids made unique) -- the batch one process would hold;
  `balanced_minibatches` the mini-batches of that whole batch in the order one process would shuffle
                         them, each split into one part per rank with the same number of rows and token
                         counts as equal as a greedy assignment makes them (longest row first, to the part
                         with the fewest tokens that still has room); within a part the rows run longest
                         first, so micro-batches hold rows of similar length;
and the engines cut each micro-batch's unused padding (`TrainBatch.trimmed`, `engine.trim_padding`),
which the length order makes narrow.

The loss divides by the whole mini-batch's counts on every rank, so which rank holds a row does not
change the gradient sum (tests/unit/test_balance.py: 2 FSDP2 ranks with balanced parts equal one
process). Row order and padding change only the floating-point summation order.
Does not own: building the batch (`trainer.batching`), the reductions (`distributed`).
"""

from __future__ import annotations

import heapq
from dataclasses import fields

import torch

from reasonrl import distributed as dist
from reasonrl.types import TrainBatch

_FULL, _COMPLETION = TrainBatch.FULL_FIELDS, TrainBatch.COMPLETION_FIELDS


def repad(batch: TrainBatch, prompt_len: int, completion_len: int, pad_id: int) -> TrainBatch:
    """`batch` laid out with `prompt_len` prompt and `completion_len` completion positions (both at
    least the batch's own)."""
    p, t = batch.prompt_len, batch.mask.shape[1]
    if prompt_len < p or completion_len < t:
        raise ValueError(f"cannot repad a batch of {p} + {t} positions to {prompt_len} + {completion_len}")
    left, right = prompt_len - p, completion_len - t
    out = {}
    for f in fields(TrainBatch):
        v = getattr(batch, f.name)
        if f.name in _FULL:
            fill = pad_id if f.name == "input_ids" else 0
            v = torch.nn.functional.pad(v, (left, right), value=fill)
        elif f.name in _COMPLETION and v is not None:
            v = torch.nn.functional.pad(v, (0, right), value=False if v.dtype == torch.bool else 0)
        out[f.name] = v
    out["prompt_len"] = prompt_len
    return TrainBatch(**out)


def concat_batches(batches: list[TrainBatch], pad_id: int) -> TrainBatch:
    """The rows of `batches` in order, in one layout; group ids offset so groups stay distinct."""
    p = max(b.prompt_len for b in batches)
    t = max(b.mask.shape[1] for b in batches)
    if any(b.extras for b in batches):
        raise ValueError("batches with plugin extras cannot be balanced across ranks (train.balance_tokens)")
    laid = [repad(b, p, t, pad_id) for b in batches]
    out = {"prompt_len": p, "extras": {}}
    offset = 0
    group_ids = []
    for b in laid:
        if b.group_ids is not None:
            group_ids.append(b.group_ids + offset)
            offset += int(b.group_ids.max()) + 1 if b.size else 0
    for f in fields(TrainBatch):
        if f.name in ("prompt_len", "extras"):
            continue
        vs = [getattr(b, f.name) for b in laid]
        if f.name == "group_ids" and group_ids:
            vs = group_ids
        present = [v is not None for v in vs]
        if any(present) and not all(present):
            raise ValueError(f"field {f.name!r} is set on some ranks' batches and not on others")
        out[f.name] = torch.cat(vs) if all(present) else None
    return TrainBatch(**out)


def gather_batch(batch: TrainBatch, pad_id: int) -> TrainBatch:
    """Every rank's rows, in rank order (the identity on one process)."""
    if dist.world_size() == 1:
        return batch
    return concat_batches(dist.all_gather_objects(batch), pad_id)


def balanced_parts(tokens: list[int], parts: int) -> list[list[int]]:
    """Indices of `tokens` split into `parts` lists of equal size (len(tokens) divisible by parts) whose
    token sums are close: each row, longest first, goes to the part with the fewest tokens that still
    has room (ties: the lower part). Each part lists its rows longest first. Deterministic."""
    n = len(tokens)
    if parts < 1 or n % parts:
        raise ValueError(f"{n} rows cannot be split into {parts} equal parts")
    room = n // parts
    heap = [(0, k) for k in range(parts)]  # (tokens so far, part)
    out: list[list[int]] = [[] for _ in range(parts)]
    for i in sorted(range(n), key=lambda i: (-tokens[i], i)):
        total, k = heapq.heappop(heap)
        out[k].append(i)
        if len(out[k]) < room:
            heapq.heappush(heap, (total + tokens[i], k))
    return out


def balanced_minibatches(whole: TrainBatch, mini_batch: int, generator: torch.Generator) -> list[TrainBatch]:
    """This rank's part of each global mini-batch of `whole` (every rank's rows): the same shuffled
    mini-batches as one process would take, each split by `balanced_parts` over the ranks."""
    order = torch.randperm(whole.size, generator=generator)
    tokens = whole.attention_mask.sum(-1)
    out = []
    for s in range(0, whole.size, mini_batch):
        rows = order[s : s + mini_batch]
        part = balanced_parts(tokens[rows].tolist(), dist.world_size())[dist.rank()]
        out.append(whole.select(rows[torch.tensor(part, dtype=torch.long)]))
    return out
