"""Rewards from the policy's own confidence: no labels, no votes (`reward.confidence`; docs/rewards.md).

Owns: `confidence_rewards` (each completion's reward replaced by the policy's confidence in it, measured
by the trainer's forward before the step's update) and its measures, each the mean over the completion's
own tokens (a tool's output tokens left out) at the sampling temperature:
    self_certainty  KL(uniform || p_t) = -log V - mean_j log p_t(j)   Intuitor (Zhao et al. 2025,
                    arXiv:2505.19590): how far each next-token distribution is from knowing nothing
    neg_entropy     -H(p_t)                                            RENT (Prabhudesai et al. 2025,
                    arXiv:2505.22660), EM-RL's token-level reward (Agarwal et al. 2025, arXiv:2505.15134)
    logprob         log p_t(sampled token)                             EM-RL's sequence-level reward; TTRL's
                    "trajectory_level_entropy" estimator
The verifiers still score every completion (the rows keep their labels): `reward/mean` and `reward/accuracy`
stay the real ones, and `reward/confidence/*` says how the confidence relates to them: its mean, the
correlation with correctness over the step's samples, and `pick_accuracy`, the correctness of each prompt's
most confident sample (confidence as a best-of-n selector). Does not own: the forward (`engines`), the
advantages (group-normalised like any reward) or the checks (`check_confidence`).

The hole, kept in the tests: the policy is rewarded for being sure, not right, so its cheapest move is
certainty about anything (repeating one token is certain). Validation and the real accuracy show it.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch

from reasonrl.types import RolloutGroup, TrainBatch

MEASURES = ("none", "self_certainty", "neg_entropy", "logprob")


def self_certainty(
    model, batch: TrainBatch, autocast=nullcontext, temperature: float = 1.0, chunk: int = 256
):
    """(self-certainty [B, T] of each completion position,) in the engines' forward signature: KL(U || p_t),
    from the logits `chunk` positions at a time (no [B, T, V] fp32 copy)."""
    from reasonrl.engines.single import completion_logits

    logits = completion_logits(model, batch, autocast)
    parts = []
    for s in range(0, logits.shape[1], chunk):
        z = logits[:, s : s + chunk].float() / temperature
        parts.append(-math.log(z.shape[-1]) - (z.mean(-1) - torch.logsumexp(z, -1)))
    return (torch.cat(parts, 1) if parts else logits.new_zeros(logits.shape[:2]).float(),)


def confidence_rewards(engine, batch: TrainBatch, groups: list[RolloutGroup], measure: str, micro_batch: int,
                       temperature: float = 1.0) -> dict[str, float]:  # fmt: skip
    """Sets `batch.rewards` (and each group's rewards, which rollouts.jsonl records) to the completions'
    confidence; returns `reward/confidence/*`."""
    if measure == "self_certainty":
        from functools import partial

        tokens = engine.outputs(batch, micro_batch, forward=partial(self_certainty, temperature=temperature))
    else:
        logprobs, entropy = engine.outputs(batch, micro_batch, with_entropy=True)
        tokens = logprobs if measure == "logprob" else -entropy
    mask = batch.mask.to(tokens.device, torch.float32)
    conf = (tokens * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)
    batch.rewards = conf.to(batch.rewards.device if batch.rewards is not None else conf.device)
    it = iter(conf.tolist())
    for g in groups:
        g.rewards = [next(it) for _ in g.completions]
    right = torch.tensor([c for g in groups for c in g.correctness], dtype=torch.float32)
    # (a family with a count: several ranks weight each rank's values by it, and a rank whose correlation is
    # undefined leaves it out; `distributed.reduce_metrics`)
    out = {
        "reward/confidence/count": float(len(conf)),
        "reward/confidence/mean": conf.mean().item(),
        "reward/confidence/std": conf.std().item() if len(conf) > 1 else 0.0,
    }
    if len(conf) > 1 and right.std() > 0 and conf.std() > 0:  # (undefined when either is constant)
        out["reward/confidence/correlation"] = torch.corrcoef(torch.stack([conf, right]))[0, 1].item()
    picks = [g.correctness[max(range(len(g.rewards)), key=g.rewards.__getitem__)] for g in groups]
    out["reward/confidence/pick_accuracy"] = sum(picks) / len(picks)
    return out


def check_confidence(cfg) -> None:
    """ConfigError naming the first `reward.confidence` setting that cannot work (before any load)."""
    from reasonrl.config import ConfigError

    c = cfg.reward.confidence
    if c.measure not in MEASURES:
        raise ConfigError(f"reward.confidence.measure={c.measure!r} is not one of {', '.join(MEASURES)}")
    if c.measure == "none":
        return
    from reasonrl.algorithms.advantages import ADVANTAGES

    needs = ADVANTAGES.get(cfg.algo.adv_estimator).needs
    refused = {  # what -> why not (when it is set)
        "algo.objective=sft": cfg.algo.objective == "sft" and "SFT trains the data's responses, not rewards",
        "reward.pseudo_label": cfg.reward.pseudo_label.enabled and "one reward: the votes' or the confidence",
        "algo.dynamic_sampling": cfg.algo.dynamic_sampling.enabled
        and "it keeps groups by their verifier rewards, before the confidence is measured",
        "algo.guidance": cfg.algo.guidance.enabled and "a demonstration is not the policy's own sample",
        "rollout.interaction": cfg.rollout.interaction.enabled
        and "its rewards are the verifier's, per attempt",
        f"algo.adv_estimator={cfg.algo.adv_estimator}": (
            "baseline_rewards" in needs or "term_rewards" in needs
        )
        and "its baseline / reward terms come from the verifiers",
    }
    for what, why in refused.items():
        if why:
            raise ConfigError(f"reward.confidence.measure={c.measure} with {what}: {why}")
