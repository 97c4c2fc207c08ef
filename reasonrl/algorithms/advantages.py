"""Advantage estimators (registry `ADVANTAGES`).

Owns: turning rewards into advantages. Does not own: reward computation (`rewards/`), reward shaping
(`filters`, `kl.fold_kl_into_rewards`), or broadcasting [N] advantages over tokens (the trainer).

Signature: `fn(rewards [N] float, group_ids [N] long, **options)`.
  Sequence-level estimators (grpo, rloo, reinforce_pp, reinforce_pp_baseline, gdpo, gpg, remax) return
  advantages [N]; the trainer broadcasts them over each row's completion tokens.
  The token-level estimator `gae` returns a pair (advantages [B, T], returns [B, T]) and takes its
  tensors (`values`, `mask`, optionally `token_rewards`) as keyword arguments; N == B.
Every estimator needs the whole rollout batch (group and batch statistics): call it once, before the
batch is split into mini-, micro-batches or data-parallel shards.

Declared at registration (`declare`), read by the trainer instead of branching on names:
  needs           the keyword tensors the trainer must supply: "values" (critic values, so a critic is
                  built), "mask", "token_rewards" (KL folded into per-token rewards), "baseline_rewards"
                  (rewards of greedy completions, so they are generated), "term_rewards" / "term_weights"
                  (each reward term's raw score [N, K] and its weight, from `reward.weights`)
  token_level     returns (advantages [B, T], returns [B, T]) instead of advantages [N]
  group_relative  compares each sample with its group: needs rollout.n >= 2
  batch_stats     uses statistics of the whole batch (whitening): with several data-parallel ranks the
                  trainer computes it over every rank's rows, not each rank's own. A bool, or a function
                  of the estimator's options (grpo: only with std_scope="batch"); read it with
                  `uses_batch_stats`

grpo (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300):
    A_i = (r_i - mean_g(r)) / (std_g(r) + eps), std unbiased (Bessel), as in the paper's code.
    `scale_by_std=False` gives Dr.GRPO (Liu et al. 2025, arXiv:2503.20783): A_i = r_i - mean_g(r).
    `std_scope="batch"`: A_i = (r_i - mean_g(r)) / (std_batch(r) + eps), the group mean with the std of
    every reward in the batch (TRL's scale_rewards="batch"; "Lite PPO", Liu et al. 2025, arXiv:2508.08221):
    a group whose rewards barely differ is not blown up to unit scale.
rloo (Ahmadian et al. 2024, arXiv:2402.14740; Kool et al. 2019):
    A_i = r_i - (sum_g(r) - r_i) / (K_g - 1)  =  K_g / (K_g - 1) * (r_i - mean_g(r)).
reinforce_pp (Hu 2025, REINFORCE++, arXiv:2501.03262):
    A_i = (r_i - mean_batch(r)) / (std_batch(r) + eps)  (groups ignored; global batch whitening).
reinforce_pp_baseline (same paper, group_size > 1 variant):
    a_i = r_i - mean_g(r);  A_i = (a_i - mean_batch(a)) / (std_batch(a) + eps).
gdpo (NVIDIA 2026, GDPO: Group reward-Decoupled Normalization Policy Optimization, arXiv:2601.05242; TRL's
    multi_objective_aggregation="normalize_then_sum"), for K reward terms r_k (`reward.weights`):
    A_k,i = (r_k,i - mean_g(r_k)) / (std_g(r_k) + eps) per term (GRPO's, so a constant term gives 0);
    a_i = sum_k w_k A_k,i;  A_i = (a_i - mean_batch(a)) / (std_batch(a) + eps) over rows of real groups.
    Summing first (grpo) lets a large term swamp a small one and maps different reward combinations to
    the same advantage; normalising each term first keeps every term's signal.
gpg (Chu et al. 2025, GPG: Group Policy Gradient, arXiv:2504.02546; verl's `gpg`):
    A_i = alpha (r_i - mean_g(r)) / f_norm,  alpha = N / max(1, #{j : r_j != 0}) over the whole batch,
    the scale verl computes: with few rewarded samples, each one's signal is scaled up instead of being
    diluted by the batch. No std division. As in verl, a singleton group's mean is 0 (A_i = alpha r_i / f_norm).
    Paired with the plain policy-gradient loss (`reinforce`, verl's loss_mode gpg).
remax (Li et al. 2023, ReMax, arXiv:2310.10505):
    A_i = r_i - b_i, with b_i the reward of the greedy completion of row i's prompt (`baseline_rewards`).
gae (Schulman et al. 2016, arXiv:1506.02438), token level with a critic:
    delta_t = r_t + gamma * V_{t+1} - V_t;  A_t = delta_t + gamma * lam * A_{t+1};  returns R_t = A_t + V_t,
    over the trainable tokens of each row (masked-out positions are skipped, not treated as steps), with
    V = 0 and A = 0 after the last trainable token. `whiten=True` then whitens A over all trainable
    tokens of the batch (returns are left unwhitened).

Singleton groups (a prompt with one completion) get advantage 0 in grpo / rloo / reinforce_pp_baseline.
Where we differ: verl whitens REINFORCE++ advantages over tokens (longer answers weigh more in the mean
and std); we whiten over sequences.
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.masked import last_token_values, masked_whiten
from reasonrl.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator", positional=2)
TRAINER_INPUTS = ("values", "mask", "token_rewards", "baseline_rewards", "term_rewards", "term_weights")


def declare(fn, *, needs: tuple[str, ...] = (), token_level: bool = False, group_relative: bool = False,
            batch_stats: bool = False):  # fmt: skip
    """Record what estimator `fn` needs beyond (rewards, group_ids), what it returns and what it reads."""
    unknown = set(needs) - set(TRAINER_INPUTS)
    if unknown:
        raise ValueError(f"{fn.__name__}: unknown trainer inputs {sorted(unknown)}; known: {TRAINER_INPUTS}")
    fn.needs, fn.token_level, fn.group_relative = frozenset(needs), token_level, group_relative
    fn.batch_stats = batch_stats
    return fn


def uses_batch_stats(fn, options: dict) -> bool:
    """Whether estimator `fn` called with `options` reads statistics of the whole batch."""
    stats = getattr(fn, "batch_stats", False)
    return bool(stats(options) if callable(stats) else stats)


def group_stats(
    values: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row group mean, unbiased group std (0 for singleton groups) and group size, all [N]."""
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    k = uniq.numel()
    zeros = torch.zeros(k, dtype=values.dtype, device=values.device)
    count = zeros.index_add(0, inv, torch.ones_like(values))
    total = zeros.index_add(0, inv, values)
    mean = total / count.clamp_min(1.0)
    sq = zeros.index_add(0, inv, (values - mean[inv]) ** 2)
    var = sq / (count - 1).clamp_min(1.0)
    return mean[inv], var.sqrt()[inv], count[inv]


def _whiten(x: torch.Tensor, eps: float) -> torch.Tensor:
    """(x - mean) / (std + eps) over all N entries (unbiased std); zeros when N < 2."""
    return masked_whiten(x, torch.ones_like(x, dtype=torch.bool), eps=eps)


@ADVANTAGES.register("grpo")
def grpo(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    scale_by_std: bool = True,
    eps: float = 1e-6,
    std_scope: str = "group",
) -> torch.Tensor:
    if std_scope not in ("group", "batch"):
        raise ValueError(f"grpo: std_scope must be 'group' or 'batch', got {std_scope!r}")
    mean, std, count = group_stats(rewards, group_ids)
    adv = rewards - mean
    if scale_by_std:
        if std_scope == "batch":
            std = rewards.std() if rewards.numel() > 1 else torch.zeros((), dtype=rewards.dtype)
        adv = adv / (std + eps)
    return torch.where(count > 1, adv, torch.zeros_like(adv))


@ADVANTAGES.register("rloo")
def rloo(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    mean, _, count = group_stats(rewards, group_ids)
    # r_i - (K*mean - r_i)/(K-1) = K/(K-1) * (r_i - mean)
    adv = count / (count - 1).clamp_min(1.0) * (rewards - mean)
    return torch.where(count > 1, adv, torch.zeros_like(adv))


declare(grpo, group_relative=True, batch_stats=lambda options: options.get("std_scope") == "batch")
declare(rloo, group_relative=True)


@ADVANTAGES.register("reinforce_pp")
def reinforce_pp(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    return _whiten(rewards, eps)


@ADVANTAGES.register("reinforce_pp_baseline")
def reinforce_pp_baseline(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    mean, _, count = group_stats(rewards, group_ids)
    # whitening statistics over rows of real groups only; singleton rows stay 0
    return masked_whiten(rewards - mean, count > 1, eps=eps)


declare(reinforce_pp, group_relative=False, batch_stats=True)
declare(reinforce_pp_baseline, group_relative=True, batch_stats=True)


def _grpo_given(r: torch.Tensor, group_ids: torch.Tensor, eps: float) -> torch.Tensor:
    """grpo of one term over the rows that have a value (NaN: a TRL function that gives None, which TRL leaves
    out of its group's mean and std, and whose rows get 0)."""
    given = ~torch.isnan(r)
    if bool(given.all()):
        return grpo(r, group_ids, eps=eps)
    x = torch.where(given, r, torch.zeros_like(r))
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    zeros = torch.zeros(uniq.numel(), dtype=r.dtype, device=r.device)
    count = zeros.index_add(0, inv, given.to(r.dtype))
    mean = zeros.index_add(0, inv, x) / count.clamp_min(1.0)
    var = zeros.index_add(0, inv, given.to(r.dtype) * (x - mean[inv]) ** 2) / (count - 1).clamp_min(1.0)
    adv = (x - mean[inv]) / (var.sqrt()[inv] + eps)
    return torch.where(given & (count[inv] > 1), adv, torch.zeros_like(adv))


@ADVANTAGES.register("gdpo")
def gdpo(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    term_rewards: torch.Tensor | None = None,
    term_weights: tuple[float, ...] | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """`term_rewards` [N, K]: each reward term's raw score per row; `term_weights`: K weights (floats,
    not a tensor: the same on every rank). `rewards` is unused (the weighted terms replace it)."""
    if term_rewards is None or term_weights is None:
        raise ValueError("gdpo needs term_rewards= [N, K] and term_weights= (K floats)")
    if term_rewards.dim() != 2 or term_rewards.shape[1] != len(term_weights):
        raise ValueError(
            f"gdpo: term_rewards {tuple(term_rewards.shape)} does not fit {len(term_weights)} weights"
        )
    summed = torch.zeros_like(rewards, dtype=term_rewards.dtype)
    for k, w in enumerate(term_weights):
        summed = summed + float(w) * _grpo_given(term_rewards[:, k], group_ids, eps)
    scored = ~torch.isnan(term_rewards).all(
        dim=1
    )  # (a row no term scored: TRL's unscorable one, advantage 0)
    _, _, count = group_stats(summed, group_ids)
    return masked_whiten(summed, (count > 1) & scored, eps=eps)


declare(gdpo, needs=("term_rewards", "term_weights"), group_relative=True, batch_stats=True)


@ADVANTAGES.register("gpg")
def gpg(rewards: torch.Tensor, group_ids: torch.Tensor, f_norm: float = 1.0) -> torch.Tensor:
    if not f_norm > 0:
        raise ValueError(f"gpg: f_norm must be > 0, got {f_norm}")
    mean, _, count = group_stats(rewards, group_ids)
    alpha = rewards.numel() / (rewards != 0).sum().clamp_min(1).to(rewards.dtype)
    return alpha * (rewards - torch.where(count > 1, mean, torch.zeros_like(mean))) / f_norm


declare(gpg, group_relative=True, batch_stats=True)


@ADVANTAGES.register("remax")
def remax(
    rewards: torch.Tensor, group_ids: torch.Tensor, baseline_rewards: torch.Tensor | None = None
) -> torch.Tensor:
    """`baseline_rewards` [N]: reward of the greedy completion of each row's prompt (repeat it over
    the rows of a group). Required; the trainer generates and scores the greedy completions."""
    if baseline_rewards is None:
        raise ValueError("remax needs baseline_rewards= (reward of the greedy completion per row), got None")
    if baseline_rewards.shape != rewards.shape:
        raise ValueError(
            f"remax: baseline_rewards shape {tuple(baseline_rewards.shape)} != {tuple(rewards.shape)}"
        )
    return rewards - baseline_rewards.to(rewards.dtype)


declare(remax, needs=("baseline_rewards",))


@ADVANTAGES.register("gae")
def gae(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    values: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    token_rewards: torch.Tensor | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    whiten: bool = True,
    eps: float = 1e-8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE. Returns (advantages [B, T], returns [B, T]), both 0 where `mask` is False.

    values [B, T]:        critic values V(s_t) (old critic, no grad needed)
    mask bool [B, T]:     trainable completion tokens
    token_rewards [B, T]: per-token rewards. If None, `rewards` [B] is put on each row's last
                          trainable token. If given, it is used as is and `rewards` is ignored (build it
                          with `kl.fold_kl_into_rewards`, which already places the outcome reward).
    `group_ids` is unused (registry signature).
    """
    if values is None or mask is None:
        raise ValueError("gae needs values= [B, T] and mask= [B, T] keyword tensors")
    if token_rewards is None:
        token_rewards = last_token_values(rewards.to(values.dtype), mask)
    values = values.detach()
    token_rewards = token_rewards.detach().to(values.dtype)
    B, T = values.shape
    adv = torch.zeros_like(values)
    next_value = values.new_zeros(B)
    next_adv = values.new_zeros(B)
    for t in range(T - 1, -1, -1):
        m = mask[:, t]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        a_t = delta + gamma * lam * next_adv
        adv[:, t] = torch.where(m, a_t, 0.0)
        next_value = torch.where(m, values[:, t], next_value)
        next_adv = torch.where(m, a_t, next_adv)
    returns = torch.where(mask, adv + values, 0.0)
    if whiten:
        adv = masked_whiten(adv, mask, eps=eps)
    return adv, returns


declare(gae, needs=("values", "mask", "token_rewards"), token_level=True, batch_stats=True)  # (whiten)
