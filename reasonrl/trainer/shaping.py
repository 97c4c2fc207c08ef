"""Reward shaping and loss masking of a step's batch, before advantages are computed.

Owns: `shape_rewards` (verifier score -> training reward: `algo.shaping.reward_map`, then the DAPO soft
overlong penalty, then ProRL's stop-properly penalty) and `shape_batch` (applies it to `batch.rewards`, and clears the loss mask of
truncated completions when `algo.shaping.mask_truncated`). Does not own: the penalty formula
(`algorithms.filters.overlong_penalty`), KL folded into rewards (`trainer.step.compute_advantages`,
which needs log-probs), or the verifier scores themselves (`rewards/`).

With per-term rewards (`batch.term_rewards`, gdpo) the overlong penalty is also added as a term of its own
(weight 1), so it is normalised like the verifier's terms.

Order, for a verifier score s and completion length L (tokens, EOS included):
    r = low + (high - low) * s          if algo.shaping.reward_map = [low, high]  (RLinf's +5 / -5: [-5, 5])
    r = r + overlong_penalty(L, rollout.max_new_tokens, algo.shaping.overlong_buffer, algo.shaping.overlong_penalty)
    r = c * r  (c in [0, 1])  or  r = c  (c < 0)   if truncated, with c = algo.shaping.truncated_reward
                                                  (ProRL's stop-properly penalty)
The overlong penalty is in the units of the mapped reward. A truncated completion (finish reason
"length") keeps its reward but, with `mask_truncated`, contributes no loss tokens (DAPO overlong
filtering); it still counts in its group's baseline, as in DAPO.
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.filters import mask_truncated, overlong_penalty
from reasonrl.config import AlgoConfig
from reasonrl.types import TrainBatch


def shape_rewards(
    scores: torch.Tensor, lengths: torch.Tensor, algo: AlgoConfig, max_len: int,
    truncated: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """Training rewards [N] from verifier scores [N], completion lengths [N] (tokens) and which of them
    were cut at max_new_tokens (bool [N]; needed with `algo.shaping.truncated_reward`)."""
    r = scores.to(torch.float32)
    if algo.shaping.reward_map:
        low, high = algo.shaping.reward_map
        r = low + (high - low) * r
    if algo.shaping.overlong_buffer > 0:
        r = r + overlong_penalty(
            lengths, max_len, algo.shaping.overlong_buffer, algo.shaping.overlong_penalty
        )
    coef = algo.shaping.truncated_reward
    if coef is not None:
        if truncated is None:
            raise ValueError("shape_rewards: algo.shaping.truncated_reward needs the truncated flags")
        r = torch.where(truncated.to(torch.bool), r * coef if coef >= 0 else torch.full_like(r, coef), r)
    return r


def shape_batch(batch: TrainBatch, algo: AlgoConfig, max_len: int) -> dict[str, float]:
    """Shape `batch.rewards` and (optionally) mask truncated rows, in place; returns metrics."""
    lengths = batch.lengths
    batch.rewards = shape_rewards(batch.rewards, lengths, algo, max_len, batch.truncated)
    metrics: dict[str, float] = {}
    if (
        algo.shaping.reward_map
        or algo.shaping.overlong_buffer > 0
        or algo.shaping.truncated_reward is not None
    ):
        metrics["reward/shaped_mean"] = batch.rewards.mean().item()
    if algo.shaping.truncated_reward is not None:
        metrics["reward/truncated_frac"] = batch.truncated.float().mean().item()
    if algo.shaping.overlong_buffer > 0:
        penalty = overlong_penalty(
            lengths, max_len, algo.shaping.overlong_buffer, algo.shaping.overlong_penalty
        )
        metrics["reward/overlong_penalty"] = penalty.mean().item()
        metrics["reward/overlong_frac"] = (penalty < 0).float().mean().item()
        if batch.term_rewards is not None:  # per-term advantages (gdpo): the penalty is a term of its own
            batch.term_rewards = torch.cat([batch.term_rewards, penalty[:, None].to(batch.term_rewards)], 1)
            batch.term_weights = (*batch.term_weights, 1.0)
    if algo.shaping.mask_truncated:
        truncated = batch.truncated
        batch.mask = mask_truncated(batch.mask, truncated)
        metrics["rollout/masked_truncated_frac"] = truncated.float().mean().item()
    return metrics
