"""The pieces of one RL step that combine the pure algorithm functions (rule 4: orthogonal choices
are combined in one visible place).

Owns: turning rewards into per-token advantages, and the per-micro-batch loss
  loss = agg(policy_loss) + kl_coef * agg(kl(logprobs, ref)) - entropy_coef * agg(entropy)
where every aggregation uses the mini-batch's global counts, so micro-batches simply add up.
"""

from __future__ import annotations

import torch

from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
from reasonrl.algorithms.kl import kl_penalty
from reasonrl.algorithms.masked import aggregate, masked_mean
from reasonrl.config import AlgoConfig
from reasonrl.types import TrainBatch


def token_advantages(batch: TrainBatch, algo: AlgoConfig) -> torch.Tensor:
    """Sequence advantages from the configured estimator, broadcast to [B, T] and zeroed off-mask."""
    adv = ADVANTAGES.get(algo.adv_estimator)(batch.rewards, batch.group_ids, **algo.adv_kwargs)
    if adv.dim() == 1:
        adv = adv[:, None].expand_as(batch.mask)
    return adv * batch.mask


def loss_options(algo: AlgoConfig) -> dict:
    """clip_low / clip_high for losses that take them, plus algo.loss_kwargs."""
    opts = {k: v for k, v in (("clip_low", algo.clip_low), ("clip_high", algo.clip_high))}
    valid = POLICY_LOSSES.options(algo.policy_loss)
    return {**{k: v for k, v in opts.items() if k in valid}, **algo.loss_kwargs}


def make_loss_fn(algo: AlgoConfig, total_tokens: torch.Tensor, total_seqs: int, norm_len: int):
    policy_loss = POLICY_LOSSES.get(algo.policy_loss)
    opts = loss_options(algo)

    def agg(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return aggregate(
            x, mask, algo.loss_agg, total_tokens=total_tokens, total_seqs=total_seqs, norm_len=norm_len
        )

    def loss_fn(micro: TrainBatch, logprobs: torch.Tensor, entropy: torch.Tensor | None):
        mask = micro.mask
        old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
        pg_tok, pg_metrics = policy_loss(logprobs, old, micro.advantages, mask, **opts)
        pg = agg(pg_tok, mask)
        loss = pg
        metrics = {f"actor/{k}": v for k, v in pg_metrics.items()}
        metrics["loss/policy"] = pg.detach()
        if algo.kl_coef > 0:
            kl = agg(kl_penalty(logprobs, micro.ref_logprobs, algo.kl_estimator), mask)
            loss = loss + algo.kl_coef * kl
            metrics["loss/kl"] = kl.detach()
        if entropy is not None:
            ent = agg(entropy, mask)
            if algo.entropy_coef:
                loss = loss - algo.entropy_coef * ent
            metrics["actor/entropy"] = masked_mean(entropy.detach(), mask)
        metrics["loss/total"] = loss.detach()
        return loss, metrics

    return loss_fn
