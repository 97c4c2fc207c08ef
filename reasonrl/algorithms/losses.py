"""Policy losses (registry `POLICY_LOSSES`).

Owns: the per-token policy-gradient surrogate of each algorithm and its diagnostics. Does not own:
aggregation over tokens (`masked.aggregate`), KL / entropy terms (`kl`, `logprobs`), importance
correction for the sampler mismatch (`correction`), or the critic loss (`value`).

Signature: `fn(logprobs [B,T], old_logprobs [B,T], advantages [B,T], mask bool [B,T], **options)
-> (per_token_loss [B,T], metrics: dict[str, scalar tensor])`. Every entry accepts `clip_low` and
`clip_high` so the trainer can pass them uniformly. Metrics are masked means over this call's tokens
(weight them by the call's token count to combine micro-batches): clipfrac_low, clipfrac_high,
ratio_mean, ratio_max and approx_kl = mean(ratio - 1 - log ratio) (k3 estimate of KL(old || current)).
log ratio = logprobs - old_logprobs is clamped to [-20, 20] before exp.

ppo_clip (Schulman et al. 2017, arXiv:1707.06347; asymmetric "clip-higher" from DAPO, arXiv:2503.14476):
    r = exp(logprobs - old_logprobs);  L = -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)
    dual-clip (Ye et al. 2020, arXiv:1912.09729) with clip_c > 1: for A < 0, L = min(L, -clip_c A).
    clipfrac_low / clipfrac_high: tokens where the clip is active (zero gradient): r < 1 - clip_low with
    A < 0, r > 1 + clip_high with A > 0; clipfrac_dual: A < 0 and the dual clip bound is active.
gspo (Zheng et al. 2025, Group Sequence Policy Optimization, arXiv:2507.18071), GSPO-token form:
    s_i = exp(mean_{t in M_i} (logprobs - old_logprobs))             (sequence-level ratio)
    s_it = sg(s_i) * exp(logprobs_t - sg(logprobs_t))                (value s_i, grad s_i * d logprobs_t)
    L_it = -min(s_it A_it, clip(s_it, 1 - clip_low, 1 + clip_high) A_it)
    With A constant over a row and aggregation `seq_mean_token_mean` this is exactly the paper's
    sequence objective (its gradient equals that of -min(s_i A_i, clip(s_i) A_i) averaged over rows).
    The paper's clip ranges are tiny (3e-4 / 4e-4, our defaults). ratio_* report s_i; clipfrac counts
    tokens of clipped rows.
cispo (MiniMax-M1, arXiv:2506.13585):
    L_it = -sg(clip(r_it, 1 - clip_low, 1 + clip_high)) * A_it * logprobs_it
    Every token keeps a gradient (the IS weight is clipped, not the surrogate). The loss value is not
    comparable to ppo_clip's (it contains logprobs); only its gradient -w A d logprobs matters.
    Defaults: clip_low=1.0 (no lower bound, as in the paper), clip_high=0.28 (our choice; the paper
    tunes it). clipfrac_low / clipfrac_high: r below / above the bounds, whatever the sign of A.
gmpo (Zhao et al. 2025, Geometric-Mean Policy Optimization, arXiv:2507.20673; verl's `geo_mean`):
    l_it = log r_it clipped in log space where the clip helps the objective: min(l, clip(l, -clip_low,
    clip_high)) for A > 0, max(...) for A < 0;  rho_i = exp(mean_{t in M_i} l_it) (geometric mean of the
    token ratios);  L_it = -mean_{t in M_i}(A_it) * rho_i on every token of row i.
    With aggregation `seq_mean_token_mean` this is the paper's objective -mean_i A_i rho_i (the row's
    copies average back to one); `token_mean` weights rows by length. The paper's clip is wide and in log
    space: (e^-0.4, e^0.4), our defaults 0.4 / 0.4. A clipped token gets no gradient; the others get
    -A_i rho_i / |M_i| d logprobs. ratio_* report rho_i; clipfrac_high / _low: tokens with
    l > clip_high and A > 0 / l < -clip_low and A < 0.
sapo (Gao et al. 2025, Soft Adaptive Policy Optimization, arXiv:2511.20347):
    r = exp(logprobs - old_logprobs);  g(r) = sigmoid(tau (r - 1)) * 4 / tau;  L_it = -g(r_it) A_it
    with tau = tau_pos where A > 0 and tau_neg elsewhere (paper and TRL: 1.0 / 1.05; tau_neg > tau_pos
    damps negative-advantage tokens faster). No hard clip: the gradient -A * 4 s (1 - s) r * d logprobs
    (s = sigmoid(tau (r - 1))) equals the plain policy gradient at r = 1 and fades smoothly as r leaves
    1. clip_low / clip_high are accepted and ignored; clipfrac_* are 0; `gate_weight_mean` reports the mean
    4 s (1 - s) r, the share of the plain gradient each token keeps.
vespo (Variational Sequence-Level Soft Policy Optimization, arXiv:2602.10693; TRL's `vespo`):
    log w_i = clamp(sum_{t in M_i} (logprobs - old_logprobs), log 1e-8, 20)   (sequence ratio, a product)
    phi(w) = exp(lam + k log w - lam w) = e^lam w^k e^(-lam w)  (a Gamma kernel, phi(1) = 1), detached
    L_it = -phi(w_i) A_it logprobs_it
    with (k, lam) = (k_pos, lambda_pos) where A >= 0 and (k_neg, lambda_neg) elsewhere (TRL: 2, 3 / 3, 2).
    No hard clip: phi scales the plain policy gradient, vanishing smoothly as w -> 0 (like w^k) and as w
    grows (like e^(-lam w)); its peak, e^(lam - k) (k / lam)^k, is at w = k / lam (1.21 at 2/3 for A >= 0
    with TRL's values, 1.24 at 1.5 for A < 0). Like cispo the loss value contains logprobs; only its gradient
    -phi A d logprobs matters. TRL folds the sampler ratio pi_old / pi_sampler into w; here the sampler
    correction is `algo.off_policy` (TIS) as for every loss, a separate factor. clip_low / clip_high are
    accepted and ignored; `phi_mean` reports the mean weight. TRL aggregates with token_mean (dapo).
reinforce (Williams 1992): L_it = -A_it * logprobs_it. No ratio and no clipping: correct only for
    on-policy updates (one optimizer step per rollout batch). clip_low / clip_high are accepted and
    ignored; the ratio metrics are still reported as a diagnostic.
"""

from __future__ import annotations

import math

import torch

from reasonrl.algorithms.masked import masked_mean, masked_sum
from reasonrl.registry import Registry

POLICY_LOSSES: Registry = Registry("policy loss", positional=4)

_LOG_RATIO_CLAMP = 20.0


def _masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over masked entries of a non-negative `x`; 0 when nothing is masked in."""
    vals = torch.where(mask, x, torch.zeros_like(x)).reshape(-1)
    return torch.cat([vals, vals.new_zeros(1)]).amax()


def _metrics(
    log_ratio: torch.Tensor,
    ratio: torch.Tensor,
    mask: torch.Tensor,
    low_hit: torch.Tensor,
    high_hit: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Diagnostics shared by every loss; `ratio` is what the loss uses (token or sequence ratio)."""
    log_ratio, ratio = log_ratio.detach(), ratio.detach()
    return {
        "clipfrac_low": masked_mean(low_hit.to(ratio.dtype), mask),
        "clipfrac_high": masked_mean(high_hit.to(ratio.dtype), mask),
        "ratio_mean": masked_mean(ratio, mask),
        "ratio_max": _masked_max(ratio, mask),
        "approx_kl": masked_mean(torch.expm1(log_ratio) - log_ratio, mask),
    }


def _log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    return (logprobs - old_logprobs).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)


def _clipped_surrogate(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    metric_log_ratio: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) and its diagnostics.

    Shared by ppo_clip (token ratio) and gspo (sequence ratio). A token counts as clipped where the
    clip is active: r < 1 - clip_low with A < 0, or r > 1 + clip_high with A > 0.
    """
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    with torch.no_grad():
        metrics = _metrics(
            metric_log_ratio,
            ratio,
            mask,
            (ratio < 1.0 - clip_low) & (advantages < 0),
            (ratio > 1.0 + clip_high) & (advantages > 0),
        )
    return loss, metrics


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_c: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"ppo_clip: clip_c must be > 1 (dual-clip lower bound), got {clip_c}")
    log_ratio = _log_ratio(logprobs, old_logprobs)
    ratio = torch.exp(log_ratio)
    loss, metrics = _clipped_surrogate(ratio, advantages, mask, clip_low, clip_high, log_ratio)
    neg = advantages < 0
    dual_hit = torch.zeros_like(neg)
    if clip_c is not None:
        bound = -advantages * clip_c
        dual_hit = neg & (loss > bound)
        loss = torch.where(neg, torch.minimum(loss, bound), loss)
    with torch.no_grad():
        metrics["clipfrac_dual"] = masked_mean(dual_hit.to(ratio.dtype), mask)
    return loss, metrics


@POLICY_LOSSES.register("gspo")
def gspo(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    token_log_ratio = _log_ratio(logprobs, old_logprobs)
    seq_log_ratio = masked_mean(token_log_ratio, mask, dim=-1)  # [B]
    # value: log s_i on every token; gradient: d logprobs_t (scaled by s_i after exp)
    log_s = logprobs - logprobs.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(log_s)
    return _clipped_surrogate(ratio, advantages, mask, clip_low, clip_high, token_log_ratio)


@POLICY_LOSSES.register("cispo")
def cispo(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 1.0,
    clip_high: float = 0.28,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    log_ratio = _log_ratio(logprobs, old_logprobs)
    ratio = torch.exp(log_ratio)
    weight = ratio.clamp(max(0.0, 1.0 - clip_low), 1.0 + clip_high).detach()
    loss = -weight * advantages * logprobs
    with torch.no_grad():
        metrics = _metrics(log_ratio, ratio, mask, ratio < 1.0 - clip_low, ratio > 1.0 + clip_high)
    return loss, metrics


@POLICY_LOSSES.register("gmpo")
def gmpo(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.4,
    clip_high: float = 0.4,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    log_ratio = _log_ratio(logprobs, old_logprobs)
    sign = torch.sign(advantages)
    clipped = log_ratio.clamp(-clip_low, clip_high)
    chosen = sign * torch.minimum(sign * log_ratio, sign * clipped)  # the pessimistic side, as PPO's min
    rho = torch.exp(masked_mean(chosen, mask, dim=-1)).unsqueeze(-1)  # [B, 1]
    seq_adv = masked_mean(advantages, mask, dim=-1).unsqueeze(-1)
    loss = (-seq_adv * rho).expand_as(logprobs)
    with torch.no_grad():
        metrics = _metrics(log_ratio, rho.expand_as(logprobs), mask,
                           (log_ratio < -clip_low) & (advantages < 0), (log_ratio > clip_high) & (advantages > 0))  # fmt: skip
    return loss, metrics


@POLICY_LOSSES.register("sapo")
def sapo(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    del clip_low, clip_high  # accepted for the shared call; the soft gate replaces the clip
    if tau_pos <= 0 or tau_neg <= 0:
        raise ValueError(f"sapo: tau_pos and tau_neg must be > 0, got {tau_pos} and {tau_neg}")
    log_ratio = _log_ratio(logprobs, old_logprobs)
    ratio = torch.exp(log_ratio)
    tau = torch.where(advantages > 0, tau_pos, tau_neg).to(ratio.dtype)
    gate = torch.sigmoid(tau * (ratio - 1.0))
    loss = -gate * (4.0 / tau) * advantages
    with torch.no_grad():
        never = torch.zeros_like(mask)
        metrics = _metrics(log_ratio, ratio, mask, never, never)
        metrics["gate_weight_mean"] = masked_mean(4.0 * gate * (1.0 - gate) * ratio, mask)
    return loss, metrics


@POLICY_LOSSES.register("vespo")
def vespo(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    k_pos: float = 2.0,
    lambda_pos: float = 3.0,
    k_neg: float = 3.0,
    lambda_neg: float = 2.0,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    del clip_low, clip_high  # accepted for the shared call; the Gamma weight replaces the clip
    if min(k_pos, k_neg) < 0 or min(lambda_pos, lambda_neg) <= 0:
        raise ValueError(f"vespo: k must be >= 0 and lambda > 0, got k {k_pos}/{k_neg}, "
                         f"lambda {lambda_pos}/{lambda_neg}")  # fmt: skip
    log_ratio = _log_ratio(logprobs, old_logprobs)
    with torch.no_grad():
        log_w = masked_sum(log_ratio, mask, dim=-1)
        if is_weights is not None:  # the sampler's token weights pi_old / pi_sampler, folded into w (TRL)
            floor = math.log(1e-8)  # (a masked-out token's weight 0 counts as 1e-8: phi ~ 0 for the row)
            log_is = torch.log(is_weights.to(log_w.dtype)).clamp(floor, _LOG_RATIO_CLAMP)
            log_w = log_w + masked_sum(log_is, mask, dim=-1)
        log_w = log_w.clamp(math.log(1e-8), _LOG_RATIO_CLAMP).unsqueeze(-1)
        pos = advantages >= 0
        k = torch.where(pos, k_pos, k_neg).to(log_w.dtype)
        lam = torch.where(pos, lambda_pos, lambda_neg).to(log_w.dtype)
        phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w)).nan_to_num(0.0, 0.0, 0.0)
    loss = -phi * advantages * logprobs
    with torch.no_grad():
        never = torch.zeros_like(mask)
        metrics = _metrics(log_ratio, torch.exp(log_ratio), mask, never, never)
        metrics["phi_mean"] = masked_mean(phi.expand_as(logprobs), mask)
    return loss, metrics


vespo.folds_is_weights = True  # the trainer passes the sampler weights in (is_weights=), not as a factor


@POLICY_LOSSES.register("reinforce")
def reinforce(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    del clip_low, clip_high  # accepted for the shared call; REINFORCE has nothing to clip
    loss = -advantages * logprobs
    with torch.no_grad():
        log_ratio = _log_ratio(logprobs, old_logprobs)
        never = torch.zeros_like(mask)
        metrics = _metrics(log_ratio, torch.exp(log_ratio), mask, never, never)
    return loss, metrics


reinforce.ratio_free = True  # no pi / pi_old in it: with off_policy.bypass, importance weights correct it
