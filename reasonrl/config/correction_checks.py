"""Load-time checks of the sampler correction (`algo.off_policy.tis_*`, `algo.off_policy.reject`) and of the
reference model's KL options (`algo.kl.ref_sync_*`, `importance_weighted`); `config.checks.validate` calls
`validate_correction`. Does not own: the corrections themselves (`algorithms.correction`).
"""

from __future__ import annotations

from reasonrl.config.sections import AlgoConfig, ConfigError


def validate_correction(a: AlgoConfig) -> None:
    """The importance correction (`algo.off_policy.tis_*`) and the importance-weighted KL."""
    from reasonrl.algorithms.correction import TIS_MODES

    op = a.off_policy
    if op.tis_cap < 0:
        raise ConfigError(f"algo.off_policy.tis_cap must be >= 0 (0 = off), got {op.tis_cap}")
    from reasonrl.config.checks import _choice

    _choice("algo.off_policy.tis_mode", op.tis_mode, TIS_MODES)
    if op.tis_cap == 0 and (op.tis_mode != "token_truncate" or op.tis_floor or op.tis_normalize):
        raise ConfigError(
            "algo.off_policy.tis_mode / tis_floor / tis_normalize have no effect unless algo.off_policy.tis_cap > 0"
        )
    if op.tis_floor and not op.tis_mode.endswith("_mask"):
        raise ConfigError(
            f"algo.off_policy.tis_floor applies to the *_mask modes only, not tis_mode={op.tis_mode}"
        )
    if not 0 <= op.tis_floor < max(op.tis_cap, 1e-12):
        raise ConfigError(f"algo.off_policy.tis_floor must be in [0, tis_cap), got {op.tis_floor}")
    _validate_rejection(op)
    if op.tis_cap > 0 and op.tis_mode.startswith("sequence") and a.policy_loss == "vespo":
        raise ConfigError(
            f"algo.off_policy.tis_mode={op.tis_mode} with vespo: vespo folds the sampler's token weights into "
            "its own sequence ratio (as TRL, which takes token_truncate or token_mask only)"
        )
    if a.kl.ref_sync_steps < 0 or not 0 < a.kl.ref_sync_alpha <= 1:
        raise ConfigError(
            f"algo.kl.ref_sync_steps must be >= 0 and algo.kl.ref_sync_alpha in (0, 1], got "
            f"{a.kl.ref_sync_steps} and {a.kl.ref_sync_alpha}"
        )
    if a.kl.ref_sync_reset_optimizer and not a.kl.ref_sync_steps:
        raise ConfigError(
            "algo.kl.ref_sync_reset_optimizer restarts the optimizer at each reference sync: it needs "
            "algo.kl.ref_sync_steps > 0"
        )
    if a.kl.ref_sync_steps and a.kl.coef <= 0:
        raise ConfigError(
            "algo.kl.ref_sync_steps moves the reference model, which only exists with algo.kl.coef > 0"
        )
    if a.kl.importance_weighted and (a.kl.coef <= 0 or a.kl.in_reward):
        raise ConfigError(
            "algo.kl.importance_weighted=true weights the KL loss term: it needs algo.kl.coef > 0 "
            "and algo.kl.in_reward=false"
        )


def _validate_rejection(op) -> None:
    """`algo.off_policy.reject` (verl's rollout rejection sampling): each criterion checked."""
    from reasonrl.algorithms.correction import check_criterion

    for i, criterion in enumerate(op.reject):
        try:
            check_criterion(dict(criterion))
        except (ValueError, TypeError) as e:
            raise ConfigError(f"algo.off_policy.reject[{i}]: {e}") from None
