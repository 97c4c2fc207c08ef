"""Importance correction for samples that drifted from the policy being trained: the rollout-engine /
trainer mismatch (the sampler is not exactly the policy whose log-probabilities the trainer recomputes:
different kernels, precision, batching, an engine a policy version or more behind).

Owns: the importance weights that correct the policy loss for the sampler (`tis_weights`, four modes),
the rejection mask (`rejection_mask`, verl's rollout rejection sampling) and the off-policy sequence
mask (`off_policy_sequence_mask`). Does not own: producing
`sampler_logprobs` (the rollout engine) or applying the weights / mask (the trainer multiplies the
per-token policy loss by them before `masked.aggregate`).

tis_weights (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training",
fengyao.notion.site/off-policy-rl; Ionides 2008 for truncated IS), modes as TRL's
`vllm_importance_sampling_mode`:
    log w_t = old_logprobs_t - sampler_logprobs_t                      token level
    log w_i = sum_{t in M_i} log w_t, on every token of row i          sequence level
    *_truncate:  w' = min(w, cap)
    *_mask:      w' = w where floor <= w <= cap, else 0                 (masked importance sampling)
    L'_t = w'_t * L_t  (per-token policy loss), no gradient through w'.
    `token_mask` with floor 0.5 and cap 5 is IcePop (Ant Group's Ling team, 2025, used to train Ring-1T;
    prime-rl ships it: tokens whose trainer / sampler probability ratio leaves [0.5, 5] get no gradient). `floor` applies to the mask modes only (0 = no lower bound).
Shapes: [B, T] in, weights [B, T] out (0 where `mask` is False). Log weights are clamped to [-20, 20].
Metrics (masked means over this call's tokens): is_weight_mean (of w'), is_capped_frac (tokens whose
weight the cap or floor changed), mismatch_kl (k3 estimate of KL(sampler || trainer) from the sampled
tokens: w - 1 - log w with the uncapped token w, whatever the mode).

weight_mean_parts / normalized (verl's `rollout_is_batch_normalize`, self-normalised importance sampling):
the weights divided by their mean, over the trained tokens for the token modes and over the rows with a
trained token for the sequence modes (each row's weight once); (sum, count) parts so that the caller can
add them over ranks first. A mean of 1e-8 or less leaves the weights as they are (factor 1).

rejection_mask (verl's rollout rejection sampling, `algorithm.rollout_correction.rollout_rs`; a hard trust
region on the sampler / trainer mismatch): with log r_t = old_logprobs_t - sampler_logprobs_t, per-token
divergences k1 = -log r, k2 = (log r)^2 / 2, k3 = r - 1 - log r, each taken per token (`token_k*`) or per
row over its tokens (`seq_sum_k*`, `seq_mean_k*`, `seq_max_k2/3`). Each criterion {mode, high, low}: a k1
mode keeps log(low) <= x <= log(high) (ratio bounds; low defaults to 1/high); a k2 / k3 mode keeps
x <= high (`check_criterion`). A sequence mode keeps or rejects a whole row; with several criteria a
token is kept only if every one keeps it. seq_mean_k1 is the
geometric-mean filter (verl's "geo RS"). Metric: rs_masked_frac (share of this call's tokens rejected).

off_policy_sequence_mask (DeepSeek-AI 2025, DeepSeek-V3.2, arXiv:2512.02556, eq. 9; TRL's
`off_policy_mask_threshold`):
    keep_it = A_it >= 0  or  (1/|M_i|) sum_{t in M_i} (behaviour_logprobs_t - logprobs_t) <= threshold
    Negative-advantage sequences that the current policy has drifted far from (mean per-token KL of the
    policy that sampled them, `behaviour_logprobs`: the sampler's, to the current one) are dropped from
    the policy loss: pushing down tokens the policy no longer produces is mostly noise. `logprobs` is
    read without gradient; the mean uses each row's own mask, so it does not depend on how rows are cut
    into micro-batches. Metric: opsm_masked_frac (share of this call's tokens dropped).
"""

from __future__ import annotations

import math

import torch

from reasonrl.algorithms.masked import masked_mean, masked_sum

TIS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
_LOG_CLAMP = 20.0


def tis_weights(
    old_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    mask: torch.Tensor,
    cap: float = 2.0,
    mode: str = "token_truncate",
    floor: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Importance weights [B, T] (detached, 0 off-mask) in `mode` and their metrics."""
    if mode not in TIS_MODES:
        raise ValueError(f"tis_weights: unknown mode {mode!r}; known: {', '.join(TIS_MODES)}")
    if cap <= 0:
        raise ValueError(f"tis_weights: cap must be > 0, got {cap}")
    if not 0 <= floor < cap:
        raise ValueError(f"tis_weights: floor must be in [0, cap), got {floor} with cap {cap}")
    with torch.no_grad():
        token_log_w = (old_logprobs - sampler_logprobs).clamp(-_LOG_CLAMP, _LOG_CLAMP)
        log_w = token_log_w
        if mode.startswith("sequence"):
            seq = masked_sum(token_log_w, mask, dim=-1).clamp(-_LOG_CLAMP, _LOG_CLAMP)
            log_w = seq.unsqueeze(-1).expand_as(token_log_w)
        w = torch.exp(log_w)
        if mode.endswith("truncate"):
            changed = w > cap
            w_used = w.clamp(max=cap)
        else:
            changed = (w > cap) | (w < floor)
            w_used = torch.where(changed, torch.zeros_like(w), w)
        weights = torch.where(mask, w_used, 0.0)
        metrics = {
            "is_weight_mean": masked_mean(weights, mask),
            "is_capped_frac": masked_mean(changed.to(w.dtype), mask),
            "mismatch_kl": masked_mean(torch.expm1(token_log_w) - token_log_w, mask),
        }
    return weights, metrics


def weight_mean_parts(weights: torch.Tensor, mask: torch.Tensor, mode: str) -> tuple[float, float]:
    """(sum, count) of the importance weights a batch normalisation divides by their mean (see above)."""
    with torch.no_grad():
        if mode.startswith("sequence"):
            rows = mask.any(dim=-1)
            per_row = masked_mean(weights, mask, dim=-1)  # every trained token of a row holds its weight
            return float(per_row[rows].sum()), float(rows.sum())
        return float(weights[mask].sum()), float(mask.sum())


def normalized(weights: torch.Tensor, total: float, count: float) -> tuple[torch.Tensor, float]:
    """(the weights / their mean total / count, that mean); unchanged, factor 1, when it is <= 1e-8."""
    mean = total / count if count else 0.0
    if mean <= 1e-8:
        return weights, 1.0
    return weights / mean, mean


def off_policy_sequence_mask(
    logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    threshold: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Bool [B, T]: the tokens the policy loss keeps (DeepSeek-V3.2's off-policy sequence masking)."""
    with torch.no_grad():
        drift = masked_mean(behaviour_logprobs - logprobs.detach(), mask, dim=-1)  # [B]
        keep = (advantages >= 0) | (drift <= threshold).unsqueeze(-1)
        metrics = {"opsm_masked_frac": masked_mean((~keep).to(logprobs.dtype), mask)}
    return keep, metrics


# verl's rollout_rs options: where (token, or a sequence's sum / mean / max) and which divergence
REJECT_MODES = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3", "seq_mean_k1",
                "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")  # fmt: skip


def rejection_mask(
    old_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    mask: torch.Tensor,
    criteria: list[dict] | tuple[dict, ...],
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Bool [B, T]: the tokens every criterion keeps (verl's rollout rejection sampling; see the module
    doc), and the share of this call's tokens rejected. A criterion: {"mode": one of REJECT_MODES, "high":
    > 0, "low": the k1 modes' lower ratio bound, absent or None for 1 / high}."""
    checked = [check_criterion(c) for c in criteria]
    if not checked:
        raise ValueError("rejection_mask: no criterion")
    with torch.no_grad():
        log_r = (old_logprobs - sampler_logprobs).clamp(-_LOG_CLAMP, _LOG_CLAMP)
        divergence = {"k1": -log_r, "k2": 0.5 * log_r * log_r, "k3": torch.expm1(log_r) - log_r}
        keep = torch.ones_like(mask)
        for mode, high, low in checked:
            where, k = mode.rsplit("_", 1)
            x = divergence[k]
            if where == "seq_sum":
                x = masked_sum(x, mask, dim=-1).unsqueeze(-1)
            elif where == "seq_mean":
                x = masked_mean(x, mask, dim=-1).unsqueeze(-1)
            elif where == "seq_max":
                x = torch.where(mask, x, float("-inf")).amax(dim=-1, keepdim=True).clamp_min(0.0)
            if k == "k1":  # log ratio bounds
                ok = (x >= math.log(low)) & (x <= math.log(high))
            else:  # a divergence: an upper bound
                ok = x <= high
            keep = keep & ok.expand_as(mask)
        metrics = {"rs_masked_frac": masked_mean((~keep).to(old_logprobs.dtype), mask)}
    return keep, metrics


def check_criterion(criterion: dict) -> tuple[str, float, float | None]:
    """(mode, high, low) of one rejection criterion; ValueError naming what is wrong with it."""
    extra = set(criterion) - {"mode", "high", "low"}
    mode, high, low = criterion.get("mode"), criterion.get("high"), criterion.get("low")
    if extra:
        raise ValueError(f"unknown key(s) {sorted(extra)} (a criterion takes mode, high, low)")
    if mode not in REJECT_MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(REJECT_MODES)}")
    if isinstance(high, bool) or not isinstance(high, (int, float)) or high <= 0:
        raise ValueError(f"{mode}: high must be a number > 0, got {high!r}")
    if low is not None and not mode.endswith("k1"):
        raise ValueError(f"{mode}: low bounds the ratio of the k1 modes only (k2 / k3 take high alone)")
    if low is not None and (isinstance(low, bool) or not isinstance(low, (int, float)) or not 0 < low < high):
        raise ValueError(f"{mode}: low must be in (0, high), got {low!r}")
    high = float(high)
    if mode.endswith("k1"):
        return mode, high, float(low) if low is not None else 1.0 / high
    return mode, high, None
