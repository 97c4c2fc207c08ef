"""The pieces of one RL step that combine the pure algorithm functions (rule 4: orthogonal choices
are combined in one visible place; `trainer/loop.py` calls them in order).

Owns:
  `compute_advantages`: rewards -> per-token advantages [B, T] with the configured estimator, after
      folding KL into the rewards when `algo.kl.in_reward` (token rewards for gae; for sequence
      estimators r_i - kl_coef * sum_t kl_it, kl = kl_estimator(old_logprobs, ref_logprobs); kl_coef
      from `trainer.kl_control`, which the step's per-sequence KL then updates (`sequence_kl`));
      remax gets the greedy `baseline_rewards`, gae the critic's `values` and leaves `returns` in
      `batch.returns` for the critic update. An estimator with batch statistics (whitening: reinforce_pp,
      reinforce_pp_baseline, gae) runs over every rank's rows (`over_all_ranks`), so that each rank's
      advantages are what one process holding the whole batch computes.
  `attach_tis_weights`: importance weights for the sampler (`algo.off_policy.tis_mode`: token or
      sequence ratio exp(old - sampler), truncated at tis_cap or masked outside [tis_floor, tis_cap]),
      `batch.is_weights` (with one update per step there are no separate old log-probs: the loss takes
      the weights from the pre-update log-probs of its own forward, which are the old ones, saving a
      forward pass). With `off_policy.bypass` (verl's bypass mode) the old log-probs are the sampler's
      and the weights are taken in each update from the current (detached) log-probs instead.
  `attach_entropy_mask`: the tokens the policy-gradient term trains when `algo.top_entropy_quantile` < 1
      (`batch.pg_mask`: the top share of the step's tokens by entropy, one threshold over every rank's).
  `attach_cov_selection`: the tokens clip_cov / kl_cov act on (`batch.cov_select`), chosen once per step
      over every rank's trained tokens from the pre-update log-probs and the advantages, with a generator
      seeded from (run seed, step): micro-batching, ranks and resume leave the choice unchanged.
  `make_loss_fn`: the per-micro-batch loss
      loss = agg(w * m * o * j * policy_loss) + kl_coef * agg(v * kl(logprobs, ref))   [KL only if not in reward]
             - entropy_coef * agg(entropy)
      (w = importance weights or 1, folded into its own sequence ratio instead by a loss that says so,
      vespo; m = pg_mask or 1, o = the off-policy sequence mask of `off_policy.mask_threshold` or 1,
      j = the rejection mask of `off_policy.reject` (from the old, with bypass the current, and the
      sampler's log-probs) or 1,
      v = pi / pi_old with `kl.importance_weighted` or 1; a demonstration's tokens under `algo.guidance`
      take -A * f(pi) instead of w * m * o * j * policy_loss, `algorithms.guidance`, logged `loss/guided`,
      and are left out of the sampler corrections), every aggregation using the mini-batch's global
      counts, so micro-batches simply add up; entropy is always logged, and so is the sampler-vs-trainer
      log-prob gap (`logprob_gap`, against old_logprobs, or the pre-update log-probs when the step has one
      update; with bypass against the current ones).
  `early_stop`: RLinf mini-batch early stop (skip the mini-batch when its mean importance ratio or
      approx KL against old_logprobs exceeds the threshold), measured with one no-grad forward.
Does not own: the formulas (`algorithms/`), reward shaping (`trainer.shaping`), the critic
(`trainer.critic`), or the optimizer step (`engines`).
"""

from __future__ import annotations

import torch

from reasonrl import distributed as dist
from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
from reasonrl.algorithms.advantages import uses_batch_stats
from reasonrl.algorithms.correction import (
    normalized,
    off_policy_sequence_mask,
    rejection_mask,
    tis_weights,
    weight_mean_parts,
)
from reasonrl.algorithms.covariance import select_options, token_covariance
from reasonrl.algorithms.filters import entropy_threshold, minibatch_early_stop
from reasonrl.algorithms.guidance import guided_token_loss
from reasonrl.algorithms.kl import fold_kl_into_rewards, importance_weighted, kl_penalty
from reasonrl.algorithms.masked import aggregate, masked_mean, masked_sum
from reasonrl.config import AlgoConfig, OffPolicyConfig
from reasonrl.distributed import global_masked_mean
from reasonrl.trainer.guidance import with_guided_sampler
from reasonrl.trainer.kl_control import KLControl
from reasonrl.types import TrainBatch


def estimator_needs(algo: AlgoConfig) -> frozenset[str]:
    """Inputs the configured advantage estimator declared (see algorithms.advantages.declare)."""
    if algo.objective == "sft":  # the data's responses: no rewards, values or baselines
        return frozenset()
    return ADVANTAGES.get(algo.adv_estimator).needs


def compute_advantages(
    batch: TrainBatch, algo: AlgoConfig, baseline_rewards: torch.Tensor | None = None,
    kl_control: KLControl | None = None,
) -> dict[str, float]:  # fmt: skip
    """Set `batch.advantages` [B, T] (0 off-mask); returns metrics. Supplies what the estimator
    declared it needs: critic `values` (`batch.values`), the `mask`, `token_rewards` (KL folded in,
    with kl_in_reward), `baseline_rewards` (greedy completions' rewards). With KL in the reward the
    coefficient is `kl_control`'s (`algo.kl.coef` without one), which then sees the step's KL."""
    rewards, mask = batch.rewards, batch.mask
    if algo.objective == "sft":  # every response token is a target: advantage 1 (the loss is the NLL)
        batch.advantages = mask.float()
        return {}
    estimator = ADVANTAGES.get(algo.adv_estimator)
    token_rewards = None
    metrics: dict[str, float] = {}
    if algo.kl.in_reward:
        coef = kl_control.coef if kl_control is not None else algo.kl.coef
        kl = kl_penalty(batch.old_logprobs, batch.ref_logprobs, algo.kl.estimator)
        penalty = coef * masked_sum(kl, mask, dim=-1)  # [B]
        metrics["reward/kl_penalty"] = penalty.mean().item()
        metrics["actor/kl_ref"] = masked_mean(kl, mask).item()
        if "token_rewards" in estimator.needs:
            token_rewards = fold_kl_into_rewards(rewards, kl, mask, coef)
        else:
            rewards = rewards - penalty
        if kl_control is not None and kl_control.adaptive:
            seq_kl, sequences = sequence_kl(kl, mask)
            metrics.update({"reward/kl_coef": coef, "reward/kl_seq_mean": seq_kl})
            kl_control.update(seq_kl, sequences)
    supplied = {"values": batch.values, "mask": mask, "token_rewards": token_rewards,
                "baseline_rewards": baseline_rewards, "term_rewards": batch.term_rewards,
                "term_weights": batch.term_weights}  # fmt: skip
    kwargs = {**algo.adv_kwargs, **{k: supplied[k] for k in estimator.needs}}
    if baseline_rewards is not None:
        metrics["reward/baseline_mean"] = baseline_rewards.float().mean().item()
    if estimator.token_level:
        adv, returns = over_all_ranks(estimator, rewards, batch.group_ids, kwargs)
        batch.returns = returns
        metrics["critic/returns_mean"] = masked_mean(returns, mask).item()
    else:
        adv = over_all_ranks(estimator, rewards, batch.group_ids, kwargs)[:, None].expand_as(mask)
    batch.advantages = adv * mask
    metrics["actor/advantage_abs_mean"] = masked_mean(batch.advantages.abs(), mask).item()
    return metrics


def sequence_kl(kl: torch.Tensor, mask: torch.Tensor) -> tuple[float, int]:
    """(mean over every rank's sequences of each one's mean per-token `kl`, the number of sequences)."""
    per_seq = masked_sum(kl.detach(), mask, dim=-1) / mask.sum(-1).clamp_min(1)
    both = dist.all_reduce_sum(torch.stack([per_seq.sum(), per_seq.new_tensor(float(per_seq.numel()))]))
    return (both[0] / both[1].clamp_min(1)).item(), int(both[1].item())


def over_all_ranks(estimator, rewards: torch.Tensor, group_ids: torch.Tensor, kwargs: dict):
    """`estimator(rewards, group_ids, **kwargs)` for this rank's rows. With several ranks and an estimator
    whose statistics span the batch (`batch_stats`), computed over every rank's rows (gathered; group ids
    made unique per rank; [B, T] inputs right-padded to the widest rank's, padding out of the mask) and
    cut back to this rank's rows and width; otherwise (group-local or row-local estimators) on its own."""
    if not uses_batch_stats(estimator, kwargs) or dist.world_size() < 2:
        return estimator(rewards, group_ids, **kwargs)
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    own = {"rewards": rewards, "group_ids": group_ids, **tensors}
    parts = dist.all_gather_objects({k: v.detach().cpu() for k, v in own.items()})
    width = max((p[k].shape[1] for p in parts for k in tensors if p[k].dim() == 2), default=0)

    def joined(key: str) -> torch.Tensor:
        pieces = [p[key] for p in parts]
        if pieces[0].dim() == 2:  # zeros to the right: False for a mask, 0 for values and rewards
            pieces = [torch.cat([x, x.new_zeros(x.shape[0], width - x.shape[1])], 1) for x in pieces]
        return torch.cat(pieces).to(rewards.device)

    offsets, total = [], 0
    for p in parts:
        offsets.append(total)
        total += int(p["group_ids"].max()) + 1 if p["group_ids"].numel() else 0
    ids = torch.cat([p["group_ids"] + o for p, o in zip(parts, offsets)]).to(group_ids.device)
    out = estimator(joined("rewards"), ids, **{**kwargs, **{k: joined(k) for k in tensors}})
    start = sum(p["rewards"].shape[0] for p in parts[: dist.rank()])
    rows = slice(start, start + rewards.shape[0])
    if isinstance(out, tuple):  # token level: (advantages, returns), each cut to this rank's width
        cols = next(v.shape[1] for v in tensors.values() if v.dim() == 2)
        return tuple(x[rows, :cols] for x in out)
    return out[rows]


def tis_options(op: OffPolicyConfig) -> dict:
    """`tis_weights` keyword arguments from the recipe's `algo.off_policy`."""
    return {"cap": op.tis_cap, "mode": op.tis_mode, "floor": op.tis_floor}


def attach_tis_weights(batch: TrainBatch, op: OffPolicyConfig) -> dict[str, float]:
    """Store the importance weights [B, T] in `batch.is_weights` (with `tis_normalize`, divided by their
    mean over every rank's batch); returns their metrics."""
    # (algo.guidance: the demonstrations' rows left out, `make_loss_fn`)
    mask = batch.mask if batch.guided is None else batch.mask & ~batch.guided[:, None]
    sampler = with_guided_sampler(batch.sampler_logprobs, batch.old_logprobs, batch.guided)
    weights, metrics = tis_weights(batch.old_logprobs, sampler, mask, **tis_options(op))
    out = {f"actor/{k}": v.item() for k, v in metrics.items()}
    if op.tis_normalize:
        total, count = weight_mean_parts(weights, mask, op.tis_mode)
        parts = dist.sum_over_ranks({"total": total, "count": count})
        weights, out["actor/is_norm_factor"] = normalized(weights, parts["total"], parts["count"])
    batch.is_weights = weights
    return out


def loss_options(algo: AlgoConfig) -> dict:
    """clip_low / clip_high where the recipe sets them (else the loss's own defaults apply), plus
    algo.loss_kwargs."""
    opts = {k: v for k, v in (("clip_low", algo.clip_low), ("clip_high", algo.clip_high)) if v is not None}
    valid = POLICY_LOSSES.options(algo.policy_loss)
    return {**{k: v for k, v in opts.items() if k in valid}, **algo.loss_kwargs}


def logprob_gap(sampler: torch.Tensor | None, old: torch.Tensor, mask: torch.Tensor) -> dict:
    """|sampler log-prob - trainer log-prob before the update| over the trained tokens: ~1e-6 in fp32
    when the rollout engine samples the policy being trained; a skipped or broken weight sync (or a
    stale engine) shows up as a jump. `_max` keys are reduced with max, the rest averaged."""
    if sampler is None or not bool(mask.any()):
        return {}
    gap = (sampler.to(old.device) - old.detach()).abs()
    return {
        "rollout/logprob_gap_mean": masked_mean(gap, mask).detach(),
        "rollout/logprob_gap_max": gap[mask].max().detach(),
    }


def attach_entropy_mask(batch: TrainBatch, entropy: torch.Tensor, quantile: float) -> dict[str, float]:
    """Set `batch.pg_mask` [B, T]: the trained tokens whose entropy (under the policy before this step's
    updates, [B, T]) is among the top `quantile` share of every rank's trained tokens; returns metrics."""
    mask = batch.mask.to(entropy.device)
    own = entropy[mask].float().cpu()
    every = torch.cat(dist.all_gather_objects(own)) if dist.world_size() > 1 else own
    threshold = float(entropy_threshold(every, quantile))
    batch.pg_mask = (mask & (entropy >= threshold)).to(batch.mask.device)
    kept = int((every >= threshold).sum())  # every rank's, as every rank computes it from the same tokens
    return {"actor/entropy_threshold": threshold if every.numel() else 0.0,
            "actor/pg_token_frac": kept / max(int(every.numel()), 1)}  # fmt: skip


def selects_tokens(algo: AlgoConfig) -> bool:
    """The policy loss acts on tokens chosen over the whole batch (clip_cov, kl_cov: a `select`)."""
    return hasattr(POLICY_LOSSES.get(algo.policy_loss), "select")


def linear_in_advantage(algo: AlgoConfig) -> bool:
    """The policy loss is 0 with its gradient on a row of zero advantage (all but kl_cov)."""
    return getattr(POLICY_LOSSES.get(algo.policy_loss), "linear_in_advantage", True)


def attach_cov_selection(batch: TrainBatch, algo: AlgoConfig, seed: int) -> dict[str, float]:
    """Set `batch.cov_select` [B, T] from every rank's trained tokens (covariance of the advantages
    and the log-probs before this step's updates, `batch.old_logprobs`); returns metrics."""
    loss = POLICY_LOSSES.get(algo.policy_loss)
    mask = batch.mask
    own = (batch.advantages[mask].float().cpu(), batch.old_logprobs.to(mask.device)[mask].float().cpu())
    every = dist.all_gather_objects(own) if dist.world_size() > 1 else [own]
    cov = token_covariance(torch.cat([a for a, _ in every]), torch.cat([lp for _, lp in every]))
    chosen = loss.select(cov, torch.Generator().manual_seed(seed), **select_options(loss, loss_options(algo)))
    start = sum(a.numel() for a, _ in every[: dist.rank()])
    batch.cov_select = torch.zeros_like(mask)
    batch.cov_select[mask] = chosen[start : start + own[0].numel()].to(mask.device)
    return {"actor/cov_selected_tokens": float(chosen.sum()),
            "actor/cov_max": float(cov.max()) if cov.numel() else 0.0}  # fmt: skip


def make_loss_fn(algo: AlgoConfig, total_tokens: torch.Tensor, total_seqs, norm_len: int,
                 entropy_coef: float | None = None, kl_coef: float | None = None):  # fmt: skip
    """entropy_coef: this update's entropy coefficient (adaptive entropy control), else algo.entropy_coef;
    kl_coef: its KL coefficient (the adaptive KL controller's), else algo.kl.coef."""
    entropy_coef = algo.entropy_coef if entropy_coef is None else entropy_coef
    kl_coef = algo.kl.coef if kl_coef is None else kl_coef
    op = algo.off_policy
    policy_loss = POLICY_LOSSES.get(algo.policy_loss)
    opts = loss_options(algo)
    kl_loss = algo.kl.coef > 0 and not algo.kl.in_reward
    folds = getattr(policy_loss, "folds_is_weights", False)

    def agg(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return aggregate(
            x, mask, algo.loss_agg, total_tokens=total_tokens, total_seqs=total_seqs, norm_len=norm_len
        )

    def nll_fn(micro: TrainBatch, logprobs: torch.Tensor, entropy: torch.Tensor | None):
        """algo.objective=sft: the responses' negative log-likelihood (`trainer.sft`)."""
        nll = agg(-logprobs, micro.mask)
        metrics = {"loss/nll": nll.detach(), "loss/total": nll.detach()}
        if entropy is not None:
            metrics["actor/entropy"] = masked_mean(entropy.detach(), micro.mask)
        return nll, metrics

    def loss_fn(micro: TrainBatch, logprobs: torch.Tensor, entropy: torch.Tensor | None):
        mask = micro.mask
        old = micro.old_logprobs if micro.old_logprobs is not None else logprobs.detach()
        # the policy side of the sampler correction: the old log-probs, or with bypass (old = the
        # sampler's) the current ones, as verl's bypass loss takes them
        policy = logprobs.detach() if op.bypass else old
        # algo.guidance: a demonstration's sampler is unknown; taken to be the policy, and its rows left out
        # of every correction against the sampler (`sampled`); its tokens get their own term below
        rows = None if micro.guided is None else micro.guided.to(mask.device)[:, None]
        sampled = mask if rows is None else mask & ~rows
        sampler = micro.sampler_logprobs
        if sampler is not None:
            sampler = with_guided_sampler(sampler.to(old.device), policy, micro.guided)
        chosen = {} if micro.cov_select is None else {"selected": micro.cov_select}
        metrics, weights = {}, None
        if algo.off_policy.tis_cap > 0:
            weights = micro.is_weights
            if weights is None:  # one update per step (the pre-update log-probs are the old ones), or bypass
                weights, tis = tis_weights(policy, sampler, sampled, **tis_options(algo.off_policy))
                if op.tis_normalize:  # (bypass: over this micro-batch, as verl's bypass loss)
                    weights, factor = normalized(weights, *weight_mean_parts(weights, sampled, op.tis_mode))
                    tis["is_norm_factor"] = torch.tensor(factor)
                metrics.update({f"actor/{k}": v for k, v in tis.items()})
            weights = weights.to(logprobs.device)
            if folds:  # vespo: the weights go into its sequence ratio instead of multiplying the loss
                chosen["is_weights"], weights = weights, None
        pg_tok, pg_metrics = policy_loss(logprobs, old, micro.advantages, mask, **opts, **chosen)
        metrics.update({f"actor/{k}": v for k, v in pg_metrics.items()})
        if weights is not None:
            pg_tok = pg_tok * weights
        if op.reject:  # verl's rejection sampling: tokens / rows outside the bounds get no policy loss
            keep, rs = rejection_mask(policy, sampler, sampled, op.reject)
            pg_tok = pg_tok * keep.to(pg_tok.dtype)
            metrics.update({f"actor/{k}": v for k, v in rs.items()})
        if algo.off_policy.mask_threshold is not None:  # the sampler's log-probs where the engine gave them
            behaviour = old if sampler is None else sampler
            keep, opsm = off_policy_sequence_mask(
                logprobs, behaviour, micro.advantages, sampled, algo.off_policy.mask_threshold
            )
            pg_tok = pg_tok * keep.to(pg_tok.dtype)
            metrics.update({f"actor/{k}": v for k, v in opsm.items()})
        if rows is not None:  # algo.guidance: the demonstrations' tokens take -A * f(p) (no ratio, no clip)
            off = guided_token_loss(logprobs, micro.advantages, algo.guidance.shaping, algo.guidance.gamma)
            pg_tok = torch.where(rows, off, pg_tok)
            metrics["loss/guided"] = agg(off * rows, mask).detach()
        if micro.pg_mask is not None:  # high-entropy tokens only; the normalisers still count every token
            pg_tok = pg_tok * micro.pg_mask.to(pg_tok.device, pg_tok.dtype)
        pg = agg(pg_tok, mask)
        loss = pg
        metrics.update(logprob_gap(micro.sampler_logprobs, policy, sampled))
        metrics["loss/policy"] = pg.detach()
        if kl_loss:
            kl_tok = kl_penalty(logprobs, micro.ref_logprobs, algo.kl.estimator)
            if algo.kl.importance_weighted:
                kl_tok = importance_weighted(kl_tok, logprobs, old)
            kl = agg(kl_tok, mask)
            loss = loss + kl_coef * kl
            metrics["loss/kl"] = kl.detach()
        if entropy is not None:
            ent = agg(entropy, mask)
            if entropy_coef:
                loss = loss - entropy_coef * ent
            metrics["actor/entropy"] = masked_mean(entropy.detach(), mask)
        metrics["loss/total"] = loss.detach()
        return loss, metrics

    return nll_fn if algo.objective == "sft" else loss_fn


def early_stop(engine, mini: TrainBatch, algo: AlgoConfig, micro_batch: int) -> bool:
    """True when RLinf's test says to skip this mini-batch (never without thresholds or old log-probs)."""
    if (
        algo.off_policy.early_stop_ratio is None and algo.off_policy.early_stop_kl is None
    ) or mini.old_logprobs is None:
        return False
    current = engine.logprobs(mini, micro_batch)
    log_ratio = (current - mini.old_logprobs).clamp(-20.0, 20.0)
    # over the whole mini-batch on all ranks, so every rank takes the same decision
    ratio_mean = global_masked_mean(torch.exp(log_ratio), mini.mask)
    approx_kl = global_masked_mean(torch.expm1(log_ratio) - log_ratio, mini.mask)
    return bool(
        minibatch_early_stop(
            ratio_mean, approx_kl, algo.off_policy.early_stop_ratio, algo.off_policy.early_stop_kl
        )
    )
