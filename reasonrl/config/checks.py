"""Cross-field validation of a `RunConfig`: what a type system cannot express. Every error names the key
(and the valid choices); nothing here builds or runs anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from omegaconf import OmegaConf

from reasonrl.config.sections import AlgoConfig, ConfigError, RolloutConfig, RunConfig
from reasonrl.errors import InputError


def _non_finite(d: dict | list, prefix: str = "") -> str | None:
    """The first setting (dotted key, `[i]` for a list's items) holding NaN or an infinity."""
    items = d.items() if isinstance(d, dict) else ((f"[{i}]", v) for i, v in enumerate(d))
    for k, v in items:
        key = f"{prefix}{k}" if isinstance(d, list) or not prefix else f"{prefix}.{k}"
        if isinstance(v, (dict, list)):
            bad = _non_finite(v, key)
            if bad:
                return bad
        elif isinstance(v, float) and not math.isfinite(v):
            return f"{key}={v}"
    return None


def _choice(key: str, value: str, choices: list[str] | tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r} is not a valid choice; valid: {', '.join(choices)}")


def import_plugins(modules: list[str]) -> None:
    """Import the recipe's `plugins` (their registrations take effect); a missing one is a ConfigError."""
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as e:
            raise ConfigError(f"plugins: cannot import {m!r} ({e})") from None


def validate(cfg: RunConfig) -> None:
    """Cross-field checks that a type system cannot express. Raises ConfigError naming the key."""
    from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
    from reasonrl.algorithms.kl import KL_ESTIMATORS
    from reasonrl.algorithms.masked import AGG_MODES
    from reasonrl.engines.single import LR_SCHEDULES
    from reasonrl.models.loading import DTYPE_NAMES
    from reasonrl.registry import RegistryError

    t, r, a = cfg.train, cfg.rollout, cfg.algo
    bad = _non_finite(OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True))  # type: ignore[arg-type]
    if bad:
        raise ConfigError(f"{bad} is not a finite number")
    import_plugins(cfg.plugins)
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    _choice("rollout.engine", r.engine, ROLLOUT_ENGINES.names())
    _choice("model.dtype", cfg.model.dtype, DTYPE_NAMES)
    _choice("model.device", cfg.model.device, ("auto", "cpu", "cuda"))
    _choice("algo.loss_agg", a.loss_agg, AGG_MODES)
    _choice("train.lr_schedule", t.lr_schedule, LR_SCHEDULES)
    _choice("train.engine", t.engine, ("auto", "single", "fsdp2"))
    _check_log(cfg)
    for k, v in vars(cfg.watchdog).items():
        if v < 0:
            raise ConfigError(f"watchdog.{k} must be >= 0 (0 turns that phase's watchdog off), got {v}")
    if cfg.model.lora.rank < 0 or cfg.model.lora.alpha <= 0 or not 0 <= cfg.model.lora.dropout < 1:
        raise ConfigError("model.lora: rank must be >= 0, alpha > 0 and dropout in [0, 1)")
    if cfg.model.lora.rank > 0 and cfg.algo.kl.ref_sync_steps:
        raise ConfigError(
            "algo.kl.ref_sync_steps is not supported with model.lora (the reference is the base "
            "model the adapters sit on; TRL refuses this too): set model.lora.rank=0 or ref_sync_steps=0"
        )
    if cfg.model.pack_tokens < 0:
        raise ConfigError(f"model.pack_tokens must be >= 0, got {cfg.model.pack_tokens}")
    if cfg.train.micro_tokens < 0:
        raise ConfigError(f"train.micro_tokens must be >= 0, got {cfg.train.micro_tokens}")
    if cfg.model.compile and cfg.model.device != "cuda":
        from reasonrl.engines.compiled import cpp_compiler
        from reasonrl.models.loading import resolve_device

        if resolve_device(cfg.model.device) == "cpu" and cpp_compiler() is None:
            raise ConfigError("model.compile=true on a CPU needs a C++ compiler for torch.compile "
                              "(apt-get install g++, or set CXX), or set model.compile=false")  # fmt: skip
    if cfg.model.logprob_chunk < 0:
        raise ConfigError(f"model.logprob_chunk must be >= 0, got {cfg.model.logprob_chunk}")
    if not 0.0 <= t.min_lr_ratio <= 1.0:
        raise ConfigError(f"train.min_lr_ratio must be in [0, 1], got {t.min_lr_ratio}")
    if len(t.betas) != 2 or not all(0 <= b < 1 for b in t.betas):  # (before: AdamW's error, after loading)
        raise ConfigError(
            f"train.betas must be two numbers in [0, 1) (Adam's beta1, beta2), got {list(t.betas)}"
        )
    _choice("algo.kl.estimator", a.kl.estimator, KL_ESTIMATORS)
    _choice("algo.adv_estimator", a.adv_estimator, ADVANTAGES.names())
    _choice("algo.policy_loss", a.policy_loss, POLICY_LOSSES.names())
    if not cfg.data.train_files and not cfg.data.mixture:
        from reasonrl.data.mixture import check_task

        check_task("data.task", cfg.data.task,
                   f"data.mixture=[{{name: gym, weight: 1, reasoning_gym: '{cfg.data.task}:1'}}]")  # fmt: skip
    from reasonrl.data.mixture import check_data_config

    check_data_config(cfg.data)
    try:
        ROLLOUT_ENGINES.check_kwargs(r.engine, dict(r.engine_kwargs), where="rollout.engine_kwargs")
        ADVANTAGES.check_kwargs(a.adv_estimator, a.adv_kwargs, where="algo.adv_kwargs")
        loss_opts = dict(a.loss_kwargs)
        POLICY_LOSSES.check_kwargs(a.policy_loss, loss_opts, where="algo.loss_kwargs")
        if "selected" in loss_opts:  # clip_cov / kl_cov: chosen by the trainer each step
            raise RegistryError("algo.loss_kwargs.selected: the trainer chooses these tokens each step; "
                                "set the loss's ratio instead")  # fmt: skip
    except RegistryError as e:
        raise ConfigError(str(e)) from None
    _dry_run_algo(a)
    from reasonrl.rewards import VERIFIERS
    from reasonrl.rewards.verifiers.unverified import NONE

    if NONE in cfg.reward.weights:
        raise ConfigError(
            f"reward.weights: {NONE!r} is the route of rows with no checkable answer; it scores nothing"
        )
    if cfg.reward.verifier == NONE and cfg.algo.objective != "sft":
        raise ConfigError(f"reward.verifier={NONE!r} routes every row to no verifier (no checkable answer): only "
                          "algo.objective=sft can train on such rows")  # fmt: skip
    for term in cfg.reward.weights:
        if term != "correctness" and term not in VERIFIERS:
            raise ConfigError(
                f"reward.weights: unknown verifier {term!r}; known: {', '.join(VERIFIERS.names())}"
            )
    from reasonrl.rewards.base import check_options

    if not any(cfg.reward.weights.values()):
        raise ConfigError(
            f"reward.weights are all 0 ({dict(cfg.reward.weights)}): every reward would be 0, so nothing is learned"
        )
    for name, opts in cfg.reward.options.items():
        if not isinstance(opts, Mapping):
            raise ConfigError(f"reward.options.{name} must be a mapping of option: value, got {opts!r}")
        try:
            VERIFIERS.check_kwargs(name, dict(opts), where=f"reward.options.{name}")
        except RegistryError as e:
            raise ConfigError(str(e)) from None
        try:
            check_options(name, dict(opts))
        except ValueError as e:
            raise ConfigError(f"reward.options.{name}: {e}") from None
    if cfg.reward.verifier is not None:  # every row of the data files goes to it: its options must work
        _choice("reward.verifier", cfg.reward.verifier, VERIFIERS.names())
        try:
            check_options(cfg.reward.verifier, dict(cfg.reward.options.get(cfg.reward.verifier, {})))
        except ValueError as e:
            raise ConfigError(
                f"reward.verifier {cfg.reward.verifier}: {e} (reward.options.{cfg.reward.verifier})"
            ) from None
    positive = {
        "rollout.n": r.n,
        "rollout.max_new_tokens": r.max_new_tokens,
        "train.steps": t.steps,
        "train.dist_timeout_s": t.dist_timeout_s,
        "train.global_batch": t.global_batch,
        "train.mini_batch": t.mini_batch,
        "train.micro_batch": t.micro_batch,
        "train.epochs": t.epochs,
        "val.size": cfg.val.size,
        "val.n": cfg.val.n,
        "reward.workers": cfg.reward.workers,
        "reward.timeout_s": cfg.reward.timeout_s,
        "checkpoint.keep_last": cfg.checkpoint.keep_last,
        "data.max_prompt_tokens": cfg.data.max_prompt_tokens,
        "data.train_size": cfg.data.train_size,
        "data.val_size": cfg.data.val_size,
        "val.batch_size": cfg.val.batch_size,
        "train.grad_clip": t.grad_clip,  # a negative clip norm would flip the gradient
    }
    non_negative = {
        "train.warmup_steps": t.warmup_steps,
        "train.weight_decay": t.weight_decay,
        "rollout.top_k": r.top_k,
        "checkpoint.every": cfg.checkpoint.every,
        "val.every": cfg.val.every,
        "val.temperature": cfg.val.temperature,
        "log.rollouts_per_step": cfg.log.rollouts_per_step,
        "algo.entropy_coef": a.entropy_coef,
        "reward.error_patience": cfg.reward.error_patience,
        "reward.service_wait_s": cfg.reward.service_wait_s,
    }
    ec = a.entropy_control
    if ec.enabled and not (ec.target > 0 and ec.delta > 0 and 0 <= ec.coef_min <= ec.coef_max):
        raise ConfigError(
            "algo.entropy_control needs target > 0, delta > 0 and 0 <= coef_min <= coef_max, got "
            f"target {ec.target}, delta {ec.delta}, coef_min {ec.coef_min}, coef_max {ec.coef_max}"
        )
    if not 0 <= t.warmup_ratio < 1:
        raise ConfigError(f"train.warmup_ratio must be in [0, 1), got {t.warmup_ratio}")
    if t.warmup_ratio and t.warmup_steps:
        raise ConfigError("train.warmup_steps and train.warmup_ratio are both set; give one")
    for key, v in non_negative.items():
        if v < 0:
            raise ConfigError(f"{key} must be >= 0, got {v}")
    for key, v in positive.items():
        if v <= 0:
            raise ConfigError(f"{key} must be > 0, got {v}")
    if t.lr <= 0:
        raise ConfigError(f"train.lr must be > 0, got {t.lr}")
    if r.temperature <= 0:
        raise ConfigError(
            f"rollout.temperature must be > 0 for training rollouts, got {r.temperature} (greedy samples of a "
            "prompt are all the same, so every group-relative advantage is 0)"
        )
    _choice("algo.objective", a.objective, ("rl", "sft"))
    from reasonrl.trainer.guidance import check_guidance

    check_guidance(cfg)  # (algo.guidance: LUFFY's demonstrations in the groups)
    if a.objective == "sft":
        from reasonrl.trainer.sft import check_sft

        check_sft(cfg)
    elif r.n < 2 and getattr(ADVANTAGES.get(a.adv_estimator), "group_relative", False):
        raise ConfigError(
            f"rollout.n=1 with algo.adv_estimator={a.adv_estimator}, which compares each sample with the others "
            "of its group: every advantage would be 0. Use rollout.n >= 2 or a non-group estimator (reinforce_pp)"
        )
    if not 0 < r.top_p <= 1:
        raise ConfigError(f"rollout.top_p must be in (0, 1], got {r.top_p}")
    if cfg.val.top_p is not None and not 0 < cfg.val.top_p <= 1:
        raise ConfigError(f"val.top_p must be in (0, 1] (or null: the rollout's), got {cfg.val.top_p}")
    if cfg.val.top_k is not None and cfg.val.top_k < 0:
        raise ConfigError(f"val.top_k must be >= 0 (0 = off; null: the rollout's), got {cfg.val.top_k}")
    if not 0 <= r.min_p < 1:  # 1 would keep the top token alone: greedy in disguise
        raise ConfigError(f"rollout.min_p must be in [0, 1), got {r.min_p}")
    if not 0 < a.top_entropy_quantile <= 1:
        raise ConfigError(
            f"algo.top_entropy_quantile must be in (0, 1] (the share of tokens trained), got {a.top_entropy_quantile}"
        )
    if not 0 <= cfg.reward.max_error_rate < 1:
        raise ConfigError(
            f"reward.max_error_rate must be in [0, 1) (a share of calls), got {cfg.reward.max_error_rate}"
        )
    if t.global_batch % r.n:
        raise ConfigError(
            f"train.global_batch={t.global_batch} is not divisible by rollout.n={r.n} (the group size)"
        )
    if t.mini_batch > t.global_batch or t.global_batch % t.mini_batch:
        raise ConfigError(f"train.mini_batch={t.mini_batch} must divide train.global_batch={t.global_batch}")
    if t.micro_batch > t.mini_batch:
        raise ConfigError(f"train.micro_batch={t.micro_batch} is larger than train.mini_batch={t.mini_batch}")
    if t.mini_batch % t.micro_batch:
        raise ConfigError(f"train.micro_batch={t.micro_batch} must divide train.mini_batch={t.mini_batch}")
    if len(t.betas) != 2:
        raise ConfigError(f"train.betas must have two values, got {t.betas}")
    if (a.clip_low is not None and a.clip_low < 0) or (a.clip_high is not None and a.clip_high < 0):
        raise ConfigError("algo.clip_low and algo.clip_high must be >= 0")
    if a.kl.coef < 0:
        raise ConfigError(f"algo.kl.coef must be >= 0, got {a.kl.coef}")
    d = cfg.data
    if not d.val_files and (d.mixture or not d.train_files) and cfg.val.size > d.val_size:
        raise ConfigError(f"val.size={cfg.val.size} is more than the {d.val_size} validation problems "
                          f"generated (data.val_size); raise data.val_size to {cfg.val.size}")  # fmt: skip
    _validate_algo_extras(a, r)
    _validate_async(a, r)
    from reasonrl.rewards.pseudo_label import check_pseudo_label
    from reasonrl.rollout.agents import check_agent
    from reasonrl.rollout.environments import check_environments
    from reasonrl.rollout.function_tools import with_function_schemas
    from reasonrl.rollout.interaction import check_interaction
    from reasonrl.rollout.tool_checks import check_tools
    from reasonrl.trainer.confidence import check_confidence
    from reasonrl.trainer.stop_rules import check_stop_rules

    check_tools(r.tools, r.max_new_tokens)
    check_stop_rules(t.stop_when)
    # the functions' schemas in every prompt's template arguments (shown by --print-config, kept in config.yaml)
    cfg.data.chat_template_kwargs = with_function_schemas(dict(cfg.data.chat_template_kwargs), r.tools)
    # each feature's own checks
    for check in (check_interaction, check_pseudo_label, check_confidence, check_environments, check_agent):
        check(cfg)
    _choice("checkpoint.best_mode", cfg.checkpoint.best_mode, ("max", "min"))
    benchmarks = []
    if cfg.val.benchmarks:
        from reasonrl.eval.benchmarks import resolve

        try:
            benchmarks = resolve(list(cfg.val.benchmarks))
        except InputError as e:
            raise ConfigError(f"val.benchmarks: {e}") from None
    if cfg.checkpoint.keep_best is not None:
        logged = _validation_metrics(cfg, benchmarks)
        if cfg.checkpoint.keep_best not in logged:  # a typo would never save a best checkpoint
            raise ConfigError(f"checkpoint.keep_best={cfg.checkpoint.keep_best!r} is not a metric this run's "
                              f"validation logs; it logs: {', '.join(logged)}")  # fmt: skip


def _validation_metrics(cfg: RunConfig, benchmarks: list) -> list[str]:
    """Every metric in-training validation logs (`trainer.setup.validate_policy`)."""
    # the held-out problems (val.size > 0): greedy accuracy, and mean@n when sampled n times
    names = ["eval/accuracy", *([f"eval/mean@{cfg.val.n}"] if cfg.val.n > 1 else []), "eval/verifier_errors"]
    if cfg.algo.objective == "sft":  # the validation rows' responses (trainer.sft.validation_nll)
        names.append("eval/nll")
    if benchmarks:
        from reasonrl.eval.runner import benchmark_metric_names

        names += [m for b in benchmarks for m in benchmark_metric_names(b)]
    return names


def _validate_async(a: AlgoConfig, r: RolloutConfig) -> None:
    if r.max_staleness < 0:
        raise ConfigError(f"rollout.max_staleness must be >= 0, got {r.max_staleness}")
    if r.worker_threads < 1 or r.worker_timeout_s <= 0:
        raise ConfigError("rollout.worker_threads must be >= 1 and rollout.worker_timeout_s > 0")
    if r.warn_logprob_gap < 0:
        raise ConfigError(f"rollout.warn_logprob_gap must be >= 0 (0: off), got {r.warn_logprob_gap}")
    if r.max_staleness and a.off_policy.tis_cap <= 0 and not a.off_policy.bypass:
        raise ConfigError(
            f"rollout.max_staleness={r.max_staleness} trains on samples from older policies; set "
            "algo.off_policy.tis_cap (e.g. 2.0) so the loss corrects for the sampling policy (decoupled PPO), "
            "or algo.off_policy.bypass=true (its ratio is to the sampling policy)"
        )
    _validate_bypass(a, r)


def _validate_bypass(a: AlgoConfig, r: RolloutConfig) -> None:
    """verl's bypass mode: the sampler's log-probs must be of the distribution the trainer computes, and
    importance weights only go with a loss that has no ratio of its own."""
    from reasonrl.algorithms import POLICY_LOSSES

    if not a.off_policy.bypass:
        return
    if r.top_p < 1.0 or r.top_k > 0 or r.min_p > 0:
        raise ConfigError(
            "algo.off_policy.bypass=true uses the sampler's log-probs as the old ones, but with rollout.top_p < 1 "
            "(top_k, min_p) they are of a truncated distribution the trainer does not compute: sample from the "
            "whole distribution, or turn bypass off"
        )
    if a.off_policy.tis_cap > 0 and not getattr(POLICY_LOSSES.get(a.policy_loss), "ratio_free", False):
        raise ConfigError(
            f"algo.off_policy.bypass=true with algo.off_policy.tis_cap > 0: {a.policy_loss}'s ratio is already "
            "pi / pi_sampler, weights would count the mismatch twice; set tis_cap 0, or policy_loss reinforce "
            "for explicit weights (verl's bypass loss_type)"
        )


def _validate_algo_extras(a: AlgoConfig, r: RolloutConfig) -> None:
    """Checks of the algo fields beyond estimator / loss / aggregation (shaping, guards, critic)."""
    from reasonrl.algorithms import ADVANTAGES
    from reasonrl.algorithms.advantages import TRAINER_INPUTS  # keyword tensors the trainer supplies

    reserved = [k for k in a.adv_kwargs if k in TRAINER_INPUTS]
    if reserved:
        raise ConfigError(f"algo.adv_kwargs.{reserved[0]} is set by the trainer, not the recipe")
    if a.kl.in_reward and a.kl.coef <= 0:
        raise ConfigError("algo.kl.in_reward=true needs algo.kl.coef > 0")
    if a.kl.target < 0 or a.kl.horizon <= 0:
        raise ConfigError(
            f"algo.kl.target must be >= 0 and algo.kl.horizon > 0, got {a.kl.target} and {a.kl.horizon}"
        )
    if a.kl.target > 0 and a.kl.coef <= 0:
        raise ConfigError("algo.kl.target (the adaptive KL controller) needs a starting algo.kl.coef > 0")
    summed = a.shaping.reward_map or a.kl.in_reward or a.shaping.truncated_reward is not None
    if "term_rewards" in ADVANTAGES.get(a.adv_estimator).needs and summed:
        raise ConfigError(
            f"algo.adv_estimator={a.adv_estimator} normalises each reward term on its own: algo.shaping.reward_map, "
            "algo.shaping.truncated_reward and algo.kl.in_reward change the summed reward it does not use"
        )
    if a.shaping.truncated_reward is not None and a.shaping.truncated_reward > 1:
        raise ConfigError(f"algo.shaping.truncated_reward must be in [0, 1] (a scale) or negative (the reward "
                          f"itself), got {a.shaping.truncated_reward}")  # fmt: skip
    if a.shaping.reward_map and (
        len(a.shaping.reward_map) != 2 or a.shaping.reward_map[0] >= a.shaping.reward_map[1]
    ):
        raise ConfigError(
            f"algo.shaping.reward_map must be [low, high] with low < high, got {list(a.shaping.reward_map)}"
        )
    if not 0 <= a.shaping.overlong_buffer <= r.max_new_tokens:
        raise ConfigError(
            f"algo.shaping.overlong_buffer={a.shaping.overlong_buffer} must be in [0, rollout.max_new_tokens={r.max_new_tokens}]"
        )
    if a.shaping.overlong_penalty < 0:
        raise ConfigError(f"algo.shaping.overlong_penalty must be >= 0, got {a.shaping.overlong_penalty}")
    if a.dynamic_sampling.max_rounds < 0:
        raise ConfigError(
            f"algo.dynamic_sampling.max_rounds must be >= 0, got {a.dynamic_sampling.max_rounds}"
        )
    optional_positive = {"off_policy.early_stop_ratio": a.off_policy.early_stop_ratio,
                         "off_policy.early_stop_kl": a.off_policy.early_stop_kl, "critic.lr": a.critic.lr,
                         "critic.value_clip": a.critic.value_clip,
                         "off_policy.mask_threshold": a.off_policy.mask_threshold}  # fmt: skip
    for key, v in optional_positive.items():
        if v is not None and v <= 0:
            raise ConfigError(f"algo.{key} must be > 0 (or null), got {v}")
    from reasonrl.config.correction_checks import validate_correction

    validate_correction(a)
    if a.critic.warmup_steps < 0:
        raise ConfigError(f"algo.critic.warmup_steps must be >= 0 (0 = off), got {a.critic.warmup_steps}")
    for key in ("model", "warmup_steps"):
        if getattr(a.critic, key) and "values" not in ADVANTAGES.get(a.adv_estimator).needs:
            raise ConfigError(
                f"algo.critic.{key} is only used by estimators with a critic (gae), not {a.adv_estimator}"
            )


def _dry_run_algo(a: AlgoConfig) -> None:
    """Call the estimator and the policy loss once on two tiny rows with the recipe's options, so a bad
    option value (grpo's std_scope, ppo_clip's clip_c, sapo's temperatures) is an error now, not at step 1."""
    import torch

    from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
    from reasonrl.trainer.step import loss_options

    estimator = ADVANTAGES.get(a.adv_estimator)
    mask = torch.ones(2, 1, dtype=torch.bool)
    supplied = {
        "values": torch.zeros(2, 1),
        "mask": mask,
        "token_rewards": None,
        "baseline_rewards": torch.zeros(2),
        "term_rewards": torch.zeros(2, 1),
        "term_weights": (1.0,),
    }
    zeros = torch.zeros(2, 1)
    for key, call in (
        ("algo.adv_kwargs", lambda: estimator(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]),
                                              **{**a.adv_kwargs, **{k: supplied[k] for k in estimator.needs}})),
        ("algo.loss_kwargs", lambda: POLICY_LOSSES.get(a.policy_loss)(zeros, zeros, zeros + 1, mask,
                                                                       **loss_options(a))),
    ):  # fmt: skip
        try:
            call()
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{key}: {e}") from None


def _check_log(cfg: RunConfig) -> None:
    lg = cfg.log
    if lg.wandb_mode:
        _choice("log.wandb_mode", lg.wandb_mode, ("online", "offline", "disabled"))
    if lg.wandb:
        import importlib.util

        if importlib.util.find_spec("wandb") is None:
            raise ConfigError("log.wandb=true needs the wandb package: pip install 'reasonrl[wandb]'")
    if cfg.hub.push:
        from reasonrl.publish.hub import check_repo_id

        try:
            check_repo_id(cfg.hub.repo, where="hub.repo")
        except InputError as e:
            raise ConfigError(f"hub.push=true: {e}") from None
