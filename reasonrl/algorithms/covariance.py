"""Covariance-based entropy control: Clip-Cov and KL-Cov (registry `POLICY_LOSSES`).

Owns: the token covariance of Cui et al. 2025 ("The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models", arXiv:2505.22617; verl's `clip_cov` / `kl_cov` loss modes), the two token
selections made from it, and the two losses that act on the selected tokens. Does not own: the
batch-wide pass that selects over every rank's tokens (`trainer.step.attach_cov_selection`), the
aggregation (`masked.aggregate`).

The paper's finding: policy entropy falls as tokens whose log-probability and advantage covary strongly
get pushed further; damping a tiny share of those tokens keeps entropy (and exploration) up.

    cov_t = (A_t - mean A) (log pi_t - mean log pi)       over the trained tokens (means over them too)

clip_cov: PPO's clipped surrogate (ppo_clip), with the gradient of a few selected tokens removed: out of
    the tokens with clip_cov_lb < cov_t < clip_cov_ub, max(1, floor(clip_cov_ratio * N)) chosen uniformly
    at random (N = trained tokens) get loss 0. Defaults (verl's): ratio 2e-4, bounds (1, 5).
kl_cov: the unclipped surrogate -r A (r = exp(log pi - log pi_old)), plus kl_coef * |log r| on the
    max(1, floor(kl_cov_ratio * N)) tokens of largest cov_t. Defaults (verl's actor config): ratio 2e-4,
    kl_coef 0.1 (verl's `ppo_kl_coef`). At the step's first update r = 1 and |log r| has no gradient;
    the penalty acts from the second update on (several mini-batches or epochs).

Where the selection is made: verl selects inside each micro-batch, with that micro-batch's means and the
current log-probs, so its result depends on the micro-batch size. The trainer here selects once per step
over every rank's trained tokens, from the log-probs before the step's first update (which equal the
current ones at that update), with a generator seeded from (run seed, step), and passes the selection
as `selected` [B, T]: the split into micro-batches and ranks then changes nothing, and a resumed run
selects the same tokens. verl also leaves tokens already clipped by the PPO bound out of clip_cov's
candidates; at the pre-update log-probs no token is clipped, and a clipped token has no gradient either
way. Called without `selected` (a single un-split batch), a loss selects from its own tokens with a
fixed-seed generator.

Each loss carries `select(cov, generator, **options) -> bool`, the selection over a flat vector of
covariances, which the trainer calls with `select_options(loss, algo.loss_kwargs)`;
`linear_in_advantage` is False for kl_cov (its penalty does not vanish with the advantage, so rows with
zero advantage still train).
"""

from __future__ import annotations

import inspect

import torch

from reasonrl.algorithms.losses import POLICY_LOSSES, _log_ratio, _metrics, ppo_clip
from reasonrl.algorithms.masked import masked_mean


def token_covariance(advantages: torch.Tensor, logprobs: torch.Tensor) -> torch.Tensor:
    """cov_t = (A_t - mean A)(log pi_t - mean log pi) for flat vectors of the trained tokens."""
    logprobs = logprobs.detach()
    return (advantages - advantages.mean()) * (logprobs - logprobs.mean())


def _quota(ratio: float, n: int) -> int:
    if not ratio > 0:
        raise ValueError(f"the covariance ratio must be > 0, got {ratio}")
    return max(1, int(ratio * n)) if n else 0


def select_options(loss, options: dict) -> dict:
    """The options `loss.select` takes: the loss's own defaults, overridden by `options` (a recipe's
    algo.loss_kwargs); the loss's signature is the one place the defaults are written."""
    own = {k: p.default for k, p in inspect.signature(loss).parameters.items() if p.default is not p.empty}
    wanted = inspect.signature(loss.select).parameters
    return {k: v for k, v in {**own, **options}.items() if k in wanted}


def clip_cov_select(
    cov: torch.Tensor,
    generator: torch.Generator,
    *,
    clip_cov_ratio: float,
    clip_cov_lb: float,
    clip_cov_ub: float,
) -> torch.Tensor:
    """bool like `cov`: max(1, floor(ratio * N)) tokens drawn at random among lb < cov < ub."""
    if not clip_cov_lb < clip_cov_ub:
        raise ValueError(f"clip_cov_lb must be < clip_cov_ub, got {clip_cov_lb} and {clip_cov_ub}")
    quota = _quota(clip_cov_ratio, cov.numel())
    candidates = ((cov > clip_cov_lb) & (cov < clip_cov_ub)).nonzero().squeeze(-1)
    order = torch.randperm(candidates.numel(), generator=generator)
    out = torch.zeros_like(cov, dtype=torch.bool)
    out[candidates[order[:quota].to(candidates.device)]] = True
    return out


def kl_cov_select(cov: torch.Tensor, generator: torch.Generator, *, kl_cov_ratio: float) -> torch.Tensor:
    """bool like `cov`: the max(1, floor(ratio * N)) tokens of largest covariance."""
    del generator  # a deterministic top-k
    quota = _quota(kl_cov_ratio, cov.numel())
    out = torch.zeros_like(cov, dtype=torch.bool)
    out[torch.topk(cov, min(quota, cov.numel())).indices] = True
    return out


def _own_selection(fn, logprobs, advantages, mask, selected, options) -> torch.Tensor:
    """`selected` [B, T] as given, or selected from this call's tokens (no batch-wide pass ran)."""
    if selected is not None:
        return selected.to(mask.device) & mask
    cov = token_covariance(advantages[mask], logprobs[mask])
    out = torch.zeros_like(mask)
    out[mask] = fn.select(cov, torch.Generator().manual_seed(0), **options)
    return out


@POLICY_LOSSES.register("clip_cov")
def clip_cov(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_cov_ratio: float = 2e-4,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    selected: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    options = {"clip_cov_ratio": clip_cov_ratio, "clip_cov_lb": clip_cov_lb, "clip_cov_ub": clip_cov_ub}
    chosen = _own_selection(clip_cov, logprobs, advantages, mask, selected, options)
    loss, metrics = ppo_clip(logprobs, old_logprobs, advantages, mask, clip_low, clip_high)
    loss = torch.where(chosen, torch.zeros_like(loss), loss)
    with torch.no_grad():
        metrics["cov_selected_frac"] = masked_mean(chosen.to(loss.dtype), mask)
    return loss, metrics


@POLICY_LOSSES.register("kl_cov")
def kl_cov(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    kl_cov_ratio: float = 2e-4,
    kl_coef: float = 0.1,
    selected: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    del clip_low, clip_high  # accepted for the shared call; KL-Cov's surrogate is unclipped
    if kl_coef < 0:
        raise ValueError(f"kl_cov: kl_coef must be >= 0, got {kl_coef}")
    chosen = _own_selection(kl_cov, logprobs, advantages, mask, selected, {"kl_cov_ratio": kl_cov_ratio})
    log_ratio = _log_ratio(logprobs, old_logprobs)
    ratio = torch.exp(log_ratio)
    loss = -advantages * ratio + torch.where(chosen, kl_coef * log_ratio.abs(), torch.zeros_like(ratio))
    with torch.no_grad():
        never = torch.zeros_like(mask)
        metrics = _metrics(log_ratio, ratio, mask, never, never)
        metrics["cov_selected_frac"] = masked_mean(chosen.to(ratio.dtype), mask)
    return loss, metrics


clip_cov.select, clip_cov.linear_in_advantage = clip_cov_select, True
kl_cov.select, kl_cov.linear_in_advantage = kl_cov_select, False
