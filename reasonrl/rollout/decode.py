"""The HF engine's decode loop: transformers' model forward and KV cache, with finished rows dropped
from the batch as generation goes on.

transformers' `generate` keeps every row in the batch until the last one stops: with RL completions
of very different lengths (the demo: 23 tokens on average, 35 steps per batch) a third of the decode
work is spent on rows that already emitted EOS. This loop runs the same forward (the model's own
`forward` with its mask creation, position ids and cache) and, once a quarter of the batch has
finished, selects the unfinished rows out of the inputs and the cache (`Cache.batch_select_indices`),
so the copies stay a few whole-cache copies per generation.

Samples are the ones `generate` draws, bit for bit on one CPU thread (tested against it; with several
threads the GEMM splits a shrunken batch between them another way, so log-probs move by ~1e-6 and the
tested draws stay the same):
- every row's computation is independent of the other rows in the batch, so a row's logits do not
  change when others leave (down to `MIN_ROWS` rows: below that CPU GEMM kernels change their
  accumulation order, so the batch keeps finished rows as ballast rather than shrink further);
- sampling is torch.multinomial's own one-sample path (the exponential race: argmax of p / q with
  q ~ Exp(1), drawn for the full [rows, V] shape at every step), so the random stream, and each row's
  draw, are those of `generate`'s `torch.multinomial` over all rows.
A token's log-prob is read from the processed scores it was drawn from (after temperature / top-k /
top-p), as the engine records it with `generate`.

Used for whole models whose cache layers all support row selection; a model sharded over ranks
(each forward a collective) or a cache this loop cannot shrink goes through `generate`.
Does not own: prompt batching, completions and text (`rollout.hf`), the cache layers (`rollout.kv_cache`).
"""

from __future__ import annotations

import inspect

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

from reasonrl.models.loading import unwrapped
from reasonrl.rollout.kv_cache import GrowingLayer

SHRINK_AT = 0.25  # drop finished rows once this fraction of the current batch has finished
# The batch never shrinks below this many rows: CPU GEMM kernels (MKL / oneDNN) accumulate in another
# order for fewer rows (measured: up to 15 rows for K >= 384), which would move logits by an ulp.
MIN_ROWS = 16
# How often the loop reads the finished count back from the device: every step on a CPU (no cost);
# on an accelerator every 8th step, so the host queues the next forwards without waiting for each one
# (transformers' generate defers its stopping check there for the same reason).
CHECK_EVERY = {"cpu": 1}
CHECK_EVERY_DEVICE = 8


def can_shrink(cache) -> bool:
    """Whether every layer of `cache` holds plain per-row keys and values that `batch_select_indices`
    selects (full-attention, growing or sliding-window layers). Subclasses that carry more per-row
    state do not (transformers' `LinearAttentionAndSlidingWindowAttentionLayer`, Inkling's, is a
    sliding-window layer whose convolution states `batch_select_indices` leaves as they are: shrinking
    the batch stopped its next step on a shape error)."""
    return (
        isinstance(cache, DynamicCache)
        and bool(cache.layers)
        and all(
            type(x) in (DynamicLayer, DynamicSlidingWindowLayer) or isinstance(x, GrowingLayer)
            for x in cache.layers
        )
    )


def _forward_kwargs(model) -> dict:
    """Keyword arguments the model's forward takes beyond the inputs and the cache, as `generate`
    decides them: only the last position's logits where the forward can keep just those
    (`logits_to_keep`; a peft wrapper passes it on to its base model)."""
    base = unwrapped(model)
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(base.forward).parameters else {}


def _sample(scores: torch.Tensor, rows: torch.Tensor, full_rows: int, greedy: bool) -> torch.Tensor:
    """Tokens for the current batch. `rows`: each current row's index in the full batch. Sampling
    draws q ~ Exp(1) for all `full_rows` rows, as torch.multinomial(probs, 1) on the full batch
    does, and each current row uses its own row of q."""
    if greedy:
        return scores.argmax(dim=-1)
    probs = torch.softmax(scores, dim=-1)
    q = torch.empty((full_rows, scores.shape[-1]), dtype=probs.dtype, device=probs.device).exponential_(1)
    if rows.numel() != full_rows:
        q = q[rows]
    return (probs / q).argmax(dim=-1)


@torch.no_grad()
def decode(
    model, ids: torch.Tensor, attn: torch.Tensor, cache, processors, max_new_tokens: int, greedy: bool,
    pad_id: int, stop_ids=(),
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Generate up to `max_new_tokens` after the left-padded `ids` / `attn` [rows, width].
    Returns (tokens, log-probs), each [rows, steps] on the CPU: a row's tokens end at its first stop
    token (`stop_ids`: EOS and the model's other end-of-turn tokens), padded with `pad_id` (log-prob 0)
    after it."""
    full = ids.shape[0]
    device = ids.device
    tokens = torch.full((full, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros((full, max_new_tokens), dtype=torch.float32, device=device)
    rows = torch.arange(full, device=device)  # current batch row -> full batch row
    live = torch.ones(full, dtype=torch.bool, device=device)  # per current row: not finished
    pos = attn.long().cumsum(-1) - 1  # as transformers' generate derives them from the mask
    pos.masked_fill_(attn == 0, 0)
    step_ids, last_pos = ids, pos
    steps = 0
    every = CHECK_EVERY.get(device.type, CHECK_EVERY_DEVICE)
    extra = _forward_kwargs(model)
    stops = torch.tensor(list(stop_ids), dtype=torch.long, device=device) if stop_ids else None
    for t in range(max_new_tokens):
        out = model(input_ids=step_ids, attention_mask=attn, position_ids=last_pos, past_key_values=cache,
                    use_cache=True, **extra)  # fmt: skip
        scores = processors(step_ids[:, -1:], out.logits[:, -1].to(dtype=torch.float32, copy=True))
        del out
        tok = _sample(scores, rows, full, greedy)
        lp = torch.log_softmax(scores, dim=-1).gather(-1, tok[:, None]).squeeze(-1)
        tok = torch.where(live, tok, pad_id)
        tokens[rows, t] = tok
        logps[rows, t] = torch.where(live, lp, 0.0)
        steps = t + 1
        if stops is not None:
            live = live & ~torch.isin(tok, stops)
        checked = stops is not None and (t + 1) % every == 0
        n_live = int(live.sum()) if checked else live.numel()  # the one host-device sync of a step
        if n_live == 0:
            break
        attn = torch.cat([attn, attn.new_ones((attn.shape[0], 1))], dim=-1)
        last_pos = pos[:, -1:] + 1 if t == 0 else last_pos + 1
        step_ids = tok[:, None]
        if live.numel() > MIN_ROWS and n_live <= (1 - SHRINK_AT) * live.numel():
            keep = live.nonzero().squeeze(-1)
            if n_live < MIN_ROWS:  # finished rows ride along as ballast (their outputs are ignored)
                keep = torch.cat([keep, (~live).nonzero().squeeze(-1)[: MIN_ROWS - n_live]]).sort().values
            cache.batch_select_indices(keep)
            rows, live, attn, last_pos, step_ids = (
                rows[keep],
                live[keep],
                attn[keep],
                last_pos[keep],
                step_ids[keep],
            )
    return tokens[:, :steps].cpu(), logps[:, :steps].cpu()
