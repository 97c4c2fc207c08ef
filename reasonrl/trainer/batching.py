"""Rollout groups -> `TrainBatch` tensors, and splitting a batch into mini-batches.

Owns: padding layout (prompt left-padded to P, completion right-padded to T), the completion mask (off on
tool outputs),
rewards / group ids / sampler log-probs as tensors. Does not own: advantages or losses.
"""

from __future__ import annotations

import math

import torch

from reasonrl.types import RolloutGroup, TrainBatch


def build_batch(groups: list[RolloutGroup], pad_id: int) -> TrainBatch:
    rows = [(g, c, gi, ci) for gi, g in enumerate(groups) for ci, c in enumerate(g.completions)]
    P = max(len(g.prompt_ids) for g in groups)
    T = max(1, max(len(c.token_ids) for _, c, _, _ in rows))
    B = len(rows)
    ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + T), dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.bool)
    sampler = torch.zeros((B, T), dtype=torch.float32)
    rewards = torch.zeros(B, dtype=torch.float32)
    group_ids = torch.zeros(B, dtype=torch.long)
    truncated = torch.zeros(B, dtype=torch.bool)
    lengths = torch.zeros(B, dtype=torch.long)
    for i, (g, c, gi, ci) in enumerate(rows):
        p, n = len(g.prompt_ids), len(c.token_ids)
        ids[i, P - p : P] = torch.tensor(g.prompt_ids, dtype=torch.long)
        attn[i, P - p : P] = 1
        if n:
            ids[i, P : P + n] = torch.tensor(c.token_ids, dtype=torch.long)
            attn[i, P : P + n] = 1
            mask[i, :n] = True
            if c.tool_mask is not None:  # no loss on what a tool wrote
                mask[i, :n] &= ~torch.tensor(c.tool_mask, dtype=torch.bool)
            sampler[i, :n] = torch.tensor(c.sampler_logprobs, dtype=torch.float32)
        rewards[i] = float(g.rewards[ci]) if g.rewards else 0.0
        group_ids[i] = gi
        truncated[i] = c.finish_reason == "length"
        lengths[i] = n
    guided = [c.guided for _, c, _, _ in rows]  # demonstrations (algo.guidance) among the samples
    return TrainBatch(
        guided=torch.tensor(guided, dtype=torch.bool) if any(guided) else None,
        input_ids=ids,
        attention_mask=attn,
        mask=mask,
        prompt_len=P,
        rewards=rewards,
        group_ids=group_ids,
        sampler_logprobs=sampler,
        truncated=truncated,
        lengths=lengths,
    )


def term_scores(
    groups: list[RolloutGroup], weights: dict[str, float], parts: dict[str, dict[str, float]] | None = None
) -> tuple[torch.Tensor, tuple[float, ...]]:
    """Each reward term's raw score per row, [B, K] in `reward.weights` order (rows as `build_batch`), and
    the K weights. The runner records the terms in info["terms"]; with `correctness` as the only term it
    records none, and the score is the reward over its weight. `parts`: {term: {function: weight}}, a term that
    is the weighted sum of functions whose values its results give in info["functions"] (the `trl_function`
    term, TRL's reward functions): one column per function instead, its value (NaN where the function gives
    None, as TRL has it) and the term's weight x the function's, so each is normalised on its own (gdpo: TRL's
    normalize_then_sum normalises each reward function)."""
    parts = {t: p for t, p in (parts or {}).items() if p and t in weights}
    names = [n for n in weights if n not in parts]
    out_weights = [float(weights[n]) for n in names]
    for term, fns in parts.items():
        out_weights += [float(weights[term]) * float(w) for w in fns.values()]
    rows = []
    for g in groups:
        results = g.results or [None] * len(g.rewards)
        for reward, res in zip(g.rewards, results):
            terms = res.info.get("terms") if res is not None else None
            if terms is None:  # the one term: reward = weight * score
                terms = {n: float(reward) / w for n, w in weights.items()}
            row = [float(terms[n]) for n in names]
            given = (res.info.get("functions") if res is not None else None) or {}
            for fns in parts.values():
                row += [math.nan if given.get(f) is None else float(given[f]) for f in fns]
            rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(len(rows), len(out_weights)), tuple(out_weights)


def minibatches(batch: TrainBatch, size: int, generator: torch.Generator | None = None) -> list[TrainBatch]:
    """Split into mini-batches of `size` rows; shuffled when a generator is given."""
    order = (
        torch.randperm(batch.size, generator=generator) if generator is not None else torch.arange(batch.size)
    )
    return [batch.select(order[s : s + size]) for s in range(0, batch.size, size)]


def without_inert_rows(batch: TrainBatch) -> TrainBatch:
    """Drop rows whose advantages are zero on every token (e.g. GRPO groups with equal rewards).

    Every policy loss is linear in the advantage, so such rows add exactly zero loss and gradient;
    skipping their forward/backward changes nothing as long as the loss keeps the whole batch's
    normalisers (the caller computes them first) and has no other per-token term (KL, entropy).
    A batch with no active row is returned whole, so the optimizer still steps as it would.
    """
    active = (batch.advantages != 0).any(-1) & batch.mask.any(-1)
    if bool(active.all()) or not bool(active.any()):
        return batch
    return batch.select(active.nonzero().squeeze(-1))
