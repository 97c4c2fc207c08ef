"""LUFFY's keys in a verl launch script (its `verl.mix_src.main_mix_ppo`, a verl fork; Yan et al. 2025,
arXiv:2504.14945) as `algo.guidance` (docs/algorithms.md, "Off-policy guidance").

Owns: `luffy_keys(o, take, out)`, called by `config.from_verl` for every verl script: the off-policy loss and
its shaping, the number of demonstrations per group, prefix guidance (not built: a note), LUFFY's GRPO
variants (no std, no token mean, no clip) and the notes on what it does not carry over. Does not own: the
rest of the script (`config.from_verl`) or the data (`reasonrl data prepare luffy` moves its `target` column
to `extra_info.response`, where `data.response_key` reads it).
"""

from __future__ import annotations

from reasonrl.config.foreign import Converted

A = "actor_rollout_ref."
# LUFFY's off_policy_reshape -> (algo.guidance.shaping, gamma)
RESHAPES = {"p_div_p_0.1": ("regularized", 0.1), "p_div_p_0.3": ("regularized", 0.3),
            "p_div_p_0.5": ("regularized", 0.5), "no_reshape": ("prob", None), "logp": ("logprob", None)}  # fmt: skip
# settings of prefix guidance and of LUFFY's own bookkeeping, read so that no note calls them unknown
PREFIX_KEYS = ("rollout.prefix_strategy", "rollout.prefix_share_across_samples", "rollout.prefix_reward_weight_alpha",
               "actor.use_sft_prefix_reward", "rollout.max_prefix_len", "actor.off_policy_loss_impl")  # fmt: skip


def luffy_keys(o, take, out: Converted) -> None:
    """Map the LUFFY keys of verl overrides `o` (read with `take`) into `out`; nothing when there are none."""
    if not any(k.startswith((A + "actor.use_off_policy_loss", A + "rollout.n_prefix")) for k in o):
        _variants(take, out)
        return
    on, k = bool(take(A + "actor.use_off_policy_loss", False)), int(take(A + "rollout.n_prefix", -1))
    if k == -1:  # LUFFY's default: every sample of the group starts from a demonstration
        k = int(o.get(A + "rollout.n", 1))
    low, high = (
        float(take(A + "rollout.min_prefix_ratio", 1.0)),
        float(take(A + "rollout.max_prefix_ratio", 1.0)),
    )
    for key in PREFIX_KEYS:
        take(A + key)
    if on and k > 0:
        out.set("algo.guidance.enabled", True)
        out.notes.append(f"{A}actor.use_off_policy_loss / rollout.n_prefix={k} -> algo.guidance.enabled: each group "
                         "is rollout.n - 1 samples and the row's demonstration (data.response_key; prepare LUFFY's "
                         "data with `reasonrl data prepare luffy`, which moves `target` there)")  # fmt: skip
        if k > 1:
            out.notes.append(f"{A}rollout.n_prefix={k}: reasonrl puts one demonstration in each group")
        if low < 1.0 or high < 1.0:
            out.notes.append(f"{A}rollout.min/max_prefix_ratio={low}/{high}: prefix guidance (the policy completing "
                             "part of a demonstration) is not built; whole demonstrations are used")  # fmt: skip
    elif on or k > 0:
        out.notes.append(f"{A}actor.use_off_policy_loss={on}, rollout.n_prefix={k}: no demonstrations in the groups "
                         "(LUFFY needs both), so none are")  # fmt: skip
    reshape = str(take(A + "actor.off_policy_reshape", "no_reshape"))
    if reshape in RESHAPES:
        shaping, gamma = RESHAPES[reshape]
        out.set("algo.guidance.shaping", shaping)
        if gamma is not None:
            out.set("algo.guidance.gamma", gamma)
    else:
        out.notes.append(f"{A}actor.off_policy_reshape={reshape!r}: no reasonrl equivalent (regularized p / (p + "
                         "gamma), prob, logprob); left at regularized, gamma 0.1")  # fmt: skip
    if take(A + "actor.off_policy_normalize", False):
        out.notes.append(f"{A}actor.off_policy_normalize=True: no reasonrl equivalent, left out")
    if (on_reshape := str(take(A + "actor.on_policy_reshape", "no_reshape"))) != "no_reshape":
        out.notes.append(f"{A}actor.on_policy_reshape={on_reshape!r}: no reasonrl equivalent, left out")
    _variants(take, out)


def _variants(take, out: Converted) -> None:
    """LUFFY's GRPO switches (its verl fork's keys)."""
    if take("algorithm.grpo_use_std", True) is False:
        out.set("algo.adv_kwargs.scale_by_std", False)
    if take(A + "actor.loss_remove_token_mean", False):
        out.set("algo.loss_agg", "seq_mean_token_sum_norm")
        out.notes.append(f"{A}actor.loss_remove_token_mean=True (a token sum over the response length) -> "
                         "algo.loss_agg=seq_mean_token_sum_norm (Dr.GRPO's, over rollout.max_new_tokens)")  # fmt: skip
    if take(A + "actor.loss_remove_clip", False):
        out.notes.append(f"{A}actor.loss_remove_clip=True (the samples' ratio unclipped): reasonrl keeps the policy "
                         "loss's clip; left out")  # fmt: skip
    if (version := take("data.reward_impl_version")) is not None:
        out.notes.append(f"data.reward_impl_version={version}: LUFFY's reward function; reasonrl routes each row "
                         "to its verifier by data_source (math: math-verify, as LUFFY)")  # fmt: skip
