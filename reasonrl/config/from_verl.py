"""verl launch scripts as reasonrl recipes.

Owns: the `key=value` overrides of a verl launch script (`verl_overrides`, over `config.shell`'s reading
of the script), the key table (`VERL`: verl key -> reasonrl key and value conversion), the settings computed
from several keys (batch sizes in sequences, the KL term, the reward function file, rollout correction)
and the notes on keys left out. Does not own: what the verl and TRL readers share (`config.foreign`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reasonrl.config.foreign import (
    Converted,
    Reading,
    as_list,
    choice,
    critic_warmup,
    off_if_negative,
    parse_value,
)
from reasonrl.config.from_luffy import luffy_keys
from reasonrl.config.from_ttrl import ttrl_keys
from reasonrl.config.shell import script_commands
from reasonrl.config.verl_hydra import hydra_settings
from reasonrl.config.verl_tools import verl_tools
from reasonrl.errors import InputError

KL_TYPES = {"low_var_kl": "k3", "k3": "k3", "kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "abs": "abs"}
LOSS_AGG = {"token-mean": "token_mean", "seq-mean-token-mean": "seq_mean_token_mean",
            "seq-mean-token-sum": "seq_mean_token_sum", "seq-mean-token-sum-norm": "seq_mean_token_sum_norm"}  # fmt: skip
SCHEDULES = {
    "constant": "constant",
    "cosine": "cosine",
    "linear": "linear",
    "constant_with_warmup": "constant",
}
A = "actor_rollout_ref."
# verl key -> (reasonrl key, conversion or None); keys whose meaning depends on others are in convert_verl
VERL: dict[str, tuple[str, Callable | None]] = {
    "algorithm.adv_estimator": ("algo.adv_estimator", choice({
        "grpo": "grpo", "rloo": "rloo", "reinforce_plus_plus": "reinforce_pp", "remax": "remax", "gae": "gae",
        "reinforce_plus_plus_baseline": "reinforce_pp_baseline", "gpg": "gpg"}, "algorithm.adv_estimator")),
    "algorithm.gamma": ("algo.adv_kwargs.gamma", float),
    "algorithm.lam": ("algo.adv_kwargs.lam", float),
    "algorithm.filter_groups.enable": ("algo.dynamic_sampling.enabled", bool),
    "data.train_files": ("data.train_files", as_list),
    "data.val_files": ("data.val_files", as_list),
    "data.max_prompt_length": ("data.max_prompt_tokens", int),
    "data.max_response_length": ("rollout.max_new_tokens", int),
    "data.filter_overlong_prompts": ("data.drop_overlong_prompts", bool),
    "data.shuffle": ("data.shuffle", bool),
    "data.seed": ("data.seed", int),
    A + "model.path": ("model.path", str),
    A + "model.enable_gradient_checkpointing": ("model.gradient_checkpointing", bool),
    A + "model.use_remove_padding": ("model.remove_padding", bool),
    A + "model.lora_rank": ("model.lora.rank", int),
    A + "model.lora_alpha": ("model.lora.alpha", float),
    A + "model.target_modules": ("model.lora.target_modules", as_list),
    A + "actor.optim.lr": ("train.lr", float),
    A + "actor.optim.weight_decay": ("train.weight_decay", float),
    A + "actor.optim.betas": ("train.betas", list),
    A + "actor.optim.lr_warmup_steps": ("train.warmup_steps", off_if_negative),
    A + "actor.optim.lr_warmup_steps_ratio": ("train.warmup_ratio", float),
    A + "actor.optim.warmup_style": ("train.lr_schedule", choice(SCHEDULES, "warmup_style")),
    A + "actor.optim.lr_scheduler_type": ("train.lr_schedule", choice(SCHEDULES, "lr_scheduler_type")),
    A + "actor.optim.min_lr_ratio": ("train.min_lr_ratio", float),
    A + "actor.optim.clip_grad": ("train.grad_clip", float),
    A + "actor.grad_clip": ("train.grad_clip", float),
    A + "actor.ppo_micro_batch_size_per_gpu": ("train.micro_batch", int),
    A + "actor.ppo_epochs": ("train.epochs", int),
    A + "actor.clip_ratio_low": ("algo.clip_low", float),
    A + "actor.clip_ratio_high": ("algo.clip_high", float),
    A + "actor.clip_ratio_c": ("algo.loss_kwargs.clip_c", float),
    A + "actor.loss_agg_mode": ("algo.loss_agg", choice(LOSS_AGG, "loss_agg_mode")),
    A + "actor.entropy_coeff": ("algo.entropy_coef", float),
    A + "actor.policy_loss.loss_mode": ("algo.policy_loss", choice({
        "vanilla": "ppo_clip", "gspo": "gspo", "geo_mean": "gmpo", "cispo": "cispo", "sapo": "sapo",
        "clip_cov": "clip_cov", "kl_cov": "kl_cov", "gpg": "reinforce"}, "policy_loss.loss_mode")),
    A + "actor.policy_loss.clip_cov_ratio": ("algo.loss_kwargs.clip_cov_ratio", float),
    A + "actor.policy_loss.clip_cov_lb": ("algo.loss_kwargs.clip_cov_lb", float),
    A + "actor.policy_loss.clip_cov_ub": ("algo.loss_kwargs.clip_cov_ub", float),
    A + "actor.policy_loss.kl_cov_ratio": ("algo.loss_kwargs.kl_cov_ratio", float),
    A + "actor.policy_loss.ppo_kl_coef": ("algo.loss_kwargs.kl_coef", float),
    A + "actor.tau_pos": ("algo.loss_kwargs.tau_pos", float),
    A + "actor.tau_neg": ("algo.loss_kwargs.tau_neg", float),
    A + "actor.tis_imp_ratio_cap": ("algo.off_policy.tis_cap", float),
    # SGLang and TensorRT-LLM are not engines here: their recipes get reasonrl's fast engine (a note says so)
    A + "rollout.name": ("rollout.engine", choice({"vllm": "vllm", "hf": "hf", "sglang": "vllm", "trtllm": "vllm"}, "rollout.name")),
    A + "rollout.n": ("rollout.n", int),
    A + "rollout.temperature": ("rollout.temperature", float),
    A + "rollout.top_p": ("rollout.top_p", float),
    A + "rollout.top_k": ("rollout.top_k", off_if_negative),
    A + "rollout.tensor_model_parallel_size": ("rollout.engine_kwargs.tensor_parallel_size", int),
    A + "rollout.gpu_memory_utilization": ("rollout.engine_kwargs.gpu_memory_utilization", float),
    A + "rollout.max_model_len": ("rollout.engine_kwargs.max_model_len", int),
    A + "rollout.enforce_eager": ("rollout.engine_kwargs.enforce_eager", bool),
    A + "rollout.max_num_seqs": ("rollout.engine_kwargs.max_num_seqs", int),
    A + "rollout.max_num_batched_tokens": ("rollout.engine_kwargs.max_num_batched_tokens", int),
    A + "rollout.enable_chunked_prefill": ("rollout.engine_kwargs.enable_chunked_prefill", bool),
    A + "rollout.val_kwargs.n": ("val.n", int),
    A + "rollout.val_kwargs.temperature": ("val.temperature", float),
    A + "rollout.val_kwargs.top_p": ("val.top_p", float),
    A + "rollout.val_kwargs.top_k": ("val.top_k", off_if_negative),
    "critic.optim.lr": ("algo.critic.lr", float),
    "critic.model.path": ("algo.critic.model", str),
    "critic.cliprange_value": ("algo.critic.value_clip", float),
    "trainer.balance_batch": ("train.balance_tokens", bool),
    A + "nccl_timeout": ("train.dist_timeout_s", float),
    A + "actor.use_torch_compile": ("model.compile", bool),
    "trainer.total_training_steps": ("train.steps", int),
    "trainer.save_freq": ("checkpoint.every", off_if_negative),
    "trainer.test_freq": ("val.every", off_if_negative),
    "trainer.max_actor_ckpt_to_keep": ("checkpoint.keep_last", int),
    "trainer.experiment_name": ("name", str),
    "trainer.project_name": ("log.wandb_project", str),
    "trainer.default_local_dir": ("log.run_dir", str),
    "trainer.logger": ("log.wandb", lambda v: "wandb" in as_list(v)),
}  # fmt: skip
# verl's defaults (verl/trainer/config/_generated_ppo_trainer.yaml) where they differ from reasonrl's
VERL_DEFAULTS = {
    "algorithm.adv_estimator": "gae", A + "rollout.n": 1, "data.max_response_length": 512,
    "data.train_batch_size": 1024, A + "actor.ppo_mini_batch_size": 256, A + "actor.optim.lr": 1e-6,
    A + "actor.optim.weight_decay": 0.01, A + "model.enable_gradient_checkpointing": True,
    A + "model.use_remove_padding": True,
}  # fmt: skip
# keys reasonrl needs no setting for: the reason, shown in the notes
VERL_NOT_NEEDED = {
    "data.truncation": "a prompt over data.max_prompt_tokens is an error, or dropped with data.drop_overlong_prompts",
    "data.prompt_key": "the verl parquet's `prompt` column is read as it is",
    "data.reward_fn_key": "rows are routed by their data_source",
    "trainer.val_before_train": "validation always runs at step 0",
    "trainer.n_gpus_per_node": "launch with torchrun --nproc-per-node N (docs/distributed.md)",
    "trainer.nnodes": "launch with torchrun --nnodes N, or recipes/distributed/slurm.sh",
    "reward_model.reward_manager": "rewards are computed by the routed verifiers (docs/rewards.md)",
    A + "rollout.calculate_log_probs": "the engines always report the sampled tokens' log-probs",
    A + "rollout.mode": "vLLM's LLM runs in this process; asynchronous training: rollout.max_staleness",
    A + "rollout.free_cache_engine": "on CUDA the vLLM engine sleeps between generations, its KV cache freed",
    A + "rollout.load_format": "the engine is built from the policy's weights and synced in memory",
    A + "rollout.layered_summon": "weights are synced to the engine one decoder layer at a time",
    "critic.model.enable_gradient_checkpointing": "the critic follows model.gradient_checkpointing",
    "data.return_raw_chat": "reasonrl renders chat prompts with the tokenizer's chat template itself",
    "trainer.resume_mode": "resume with `reasonrl train RECIPE --resume`",
    "trainer.log_val_generations": "log.rollouts_per_step samples go to rollouts.jsonl every step",
    A + "rollout.val_kwargs.do_sample": "eval/accuracy is always greedy; val.n > 1 adds a sampled mean@n",
}
VERL_PREFIXES_NOT_NEEDED = {  # families of engine knobs reasonrl sets itself or does not have
    A + "ref.": "the reference model shares the policy's engine settings",
    A + "rollout.log_prob_": "log-prob forwards use train.micro_batch / train.micro_tokens",
    "critic.ppo_micro_batch_size": "the critic's forwards use train.micro_batch / train.micro_tokens",
    "critic.forward_micro_batch_size": "the critic's forwards use train.micro_batch / train.micro_tokens",
    "critic.ppo_max_token_len": "the critic's forwards use train.micro_batch / train.micro_tokens",
    "critic.forward_max_token_len": "the critic's forwards use train.micro_batch / train.micro_tokens",
    "critic.use_dynamic_bsz": "the critic's forwards use train.micro_batch / train.micro_tokens",
    A + "model.use_fused_kernels": "model.logprob_chunk computes log-probs without the [B, T, V] logits",
    A + "actor.fsdp_config.": "FSDP2 wraps every decoder layer (train.cpu_offload for offload)",
    A + "actor.checkpoint.": "checkpoints hold the HF model, optimizer and state (docs/operations.md)",
    A + "actor.ulysses_sequence_parallel_size": "sequence parallelism is not implemented",
    **dict.fromkeys(
        (
            "reward_model.rollout.",
            "reward_model.model.",
            "reward_model.num_workers",
            "reward_model.strategy",
            "reward_model.use_reward_loop",
            "reward_model.use_dynamic_bsz",
            "reward_model.n_gpus_per_node",
            "reward_model.nnodes",
            "reward_model.enable_resource_pool",
            "reward_model.forward_max_token_len",
            "reward_model.micro_batch_size",
        ),  # fmt: skip
        "the reward model runs in the trainer's process, reward.options.reward_model.batch_size rows "
        "per forward on its device (docs/rewards.md)",
    ),
}


OVERRIDE = r"\+{0,2}([A-Za-z_][\w.]*\.[\w.]+)=(.*)"


def verl_overrides(text: str) -> dict[str, Any]:
    """The `key=value` overrides of a verl launch script (or a file of overrides), values parsed. Control
    flow is not followed: both branches of an `if` are read, in order (the notes show what came out)."""
    overrides: dict[str, Any] = {}
    # (a line whose quotes do not balance: what looks like key=value)
    for words in script_commands(text, lambda line: re.findall(r"\S+=(?:'[^']*'|\"[^\"]*\"|\S)*", line)):
        for tok in words:
            m = re.fullmatch(OVERRIDE, tok, re.S)
            if m:
                overrides[m.group(1)] = parse_value(m.group(2))
    return overrides


def convert_verl(text: str, base: Path | None = None) -> Converted:
    """The recipe of a verl launch script's text; `base`: the script's directory (files it names, such as
    the tool configuration, are looked for there too)."""
    given = verl_overrides(text)
    if not given:
        raise InputError("no verl overrides (key=value with a dotted key) found in the script")
    read: list[str] = []  # (the script's --config-name file: its settings under the script's overrides)
    given = {**hydra_settings(text, base, read), **given}
    if m := re.search(r"verl\.trainer\.(fsdp_)?sft_trainer", text):  # an SFT script: algo.objective sft
        from reasonrl.config.from_verl_sft import convert_verl_sft

        return convert_verl_sft(given, messages=m.group(1) is None)
    r = Reading("verl", given, VERL_DEFAULTS)
    r.out.notes[:0] = read
    r.apply(VERL)
    r.derive(lambda: _derived(r.values, r.take, r.out, base), what="a setting of the script is not a number",
             hint="; a variable it does not set?")  # fmt: skip
    r.leftovers(VERL_NOT_NEEDED, VERL_PREFIXES_NOT_NEEDED)
    return r.out


def _derived(o, take, out: Converted, base: Path | None = None) -> None:
    """The settings computed from several verl keys."""
    n = int(take(A + "rollout.n", 1))
    _verl_reward(o, take, out)  # (before TTRL's keys, which may replace its reward function file)
    if (trained := ttrl_keys(o, take, out)) is not None:  # TTRL: n_votes generated, n_samples trained
        n = trained
    if (bs := take("data.train_batch_size")) is not None:
        out.set("train.global_batch", int(bs) * n)  # verl counts prompts, reasonrl sequences
        out.notes.append(
            f"data.train_batch_size={bs} prompts -> train.global_batch={int(bs) * n} sequences (x n)"
        )
    if (mini := take(A + "actor.ppo_mini_batch_size")) is not None:
        out.set("train.mini_batch", int(mini) * n)
    if (clip := take(A + "actor.clip_ratio")) is not None:
        for side in ("low", "high"):
            if A + f"actor.clip_ratio_{side}" not in o:
                out.set(f"algo.clip_{side}", float(clip))
    micro = take(A + "actor.ppo_micro_batch_size")  # verl's deprecated global one: sequences over every GPU
    if micro is not None and A + "actor.ppo_micro_batch_size_per_gpu" not in o:
        gpus = int(o.get("trainer.n_gpus_per_node", 1)) * int(o.get("trainer.nnodes", 1))
        per_rank = max(1, int(micro) // gpus)
        out.set("train.micro_batch", per_rank)
        out.notes.append(
            f"{A}actor.ppo_micro_batch_size={micro} over {gpus} GPU(s) -> train.micro_batch={per_rank}"
        )
    if take(A + "actor.use_dynamic_bsz"):
        out.set("train.micro_tokens", int(take(A + "actor.ppo_max_token_len_per_gpu", 16384)))
        if mini is not None:  # verl then ignores the micro-batch sizes: the token budget cuts micro-batches
            out.set("train.micro_batch", int(mini) * n)
    else:  # a token budget verl does not use without dynamic batch sizes
        take(A + "actor.ppo_max_token_len_per_gpu")
    if take(A + "actor.fsdp_config.param_offload") or take(A + "actor.fsdp_config.optimizer_offload"):
        out.set("train.cpu_offload", True)
    if (name := str(o.get(A + "rollout.name", "")).lower()) in ("sglang", "trtllm"):
        out.notes.append(f"{A}rollout.name={name} -> rollout.engine=vllm (reasonrl has no {name} engine)")
    _verl_kl(o, take, out)
    verl_tools(take, out, base)
    _verl_correction(take, out)
    luffy_keys(o, take, out)  # LUFFY's verl fork: off-policy guidance (config.from_luffy)
    if "algorithm.norm_adv_by_std_in_grpo" in o and not take("algorithm.norm_adv_by_std_in_grpo"):
        out.set("algo.adv_kwargs.scale_by_std", False)
    if (rounds := take("algorithm.filter_groups.max_num_gen_batches")) is not None:
        out.set("algo.dynamic_sampling.max_rounds", max(int(rounds) - 1, 0) if int(rounds) > 0 else 10)
        if int(rounds) <= 0:
            out.notes.append("algorithm.filter_groups.max_num_gen_batches<=0 (unlimited) -> max_rounds=10")
    if (warmup := take("trainer.critic_warmup")) is not None:  # verl: the actor updates once step >= it
        critic_warmup(out, f"trainer.critic_warmup={warmup}", int(warmup) - 1)
    if (epochs := take("trainer.total_epochs")) is not None and "trainer.total_training_steps" not in o:
        out.notes.append(f"trainer.total_epochs={epochs}: reasonrl counts steps; set train.steps "
                         "(epochs x rows / prompts per step)")  # fmt: skip


def _verl_kl(o, take, out: Converted) -> None:
    def estimator(key: str, default: str) -> None:
        try:
            out.set("algo.kl.estimator", choice(KL_TYPES, key)(take(key, default)))
        except ValueError as e:  # e.g. verl's straight-through "k3+": the coefficient stays, k3 is used
            out.notes.append(f"{e}; reasonrl's default k3 is used")

    in_reward = take("algorithm.use_kl_in_reward")  # (read even when the KL loss is on, so not a leftover)
    if take(A + "actor.use_kl_loss"):
        out.set("algo.kl.coef", float(take(A + "actor.kl_loss_coef", 0.001)))
        estimator(A + "actor.kl_loss_type", "low_var_kl")
        if not in_reward:  # the in-reward KL's settings, which verl does not use then either
            for key in (
                "kl_ctrl.kl_coef",
                "kl_penalty",
                "kl_ctrl.type",
                "kl_ctrl.target_kl",
                "kl_ctrl.horizon",
            ):
                take("algorithm." + key)
    elif in_reward:
        out.set("algo.kl.coef", float(take("algorithm.kl_ctrl.kl_coef", 0.001)))
        out.set("algo.kl.in_reward", True)
        estimator("algorithm.kl_penalty", "kl")
        kind = take("algorithm.kl_ctrl.type", "fixed")
        if kind == "adaptive":  # verl's defaults: target 0.1, horizon 10000
            out.set("algo.kl.target", float(take("algorithm.kl_ctrl.target_kl", 0.1)))
            out.set("algo.kl.horizon", int(take("algorithm.kl_ctrl.horizon", 10000)))
        elif kind != "fixed":
            out.notes.append(f"algorithm.kl_ctrl.type={kind!r} (verl knows fixed and adaptive): left fixed")
    else:  # the settings of a KL that is off
        for key in (A + "actor.kl_loss_coef", A + "actor.kl_loss_type", "algorithm.kl_ctrl.kl_coef",
                    "algorithm.kl_penalty", "algorithm.kl_ctrl.type", "algorithm.kl_ctrl.target_kl",
                    "algorithm.kl_ctrl.horizon"):  # fmt: skip
            take(key)
        out.set("algo.kl.coef", 0.0)


def _verl_reward(o, take, out: Converted) -> None:
    if path := take("custom_reward_function.path"):
        out.set("reward.verifier", "verl_function")
        opts = {"path": path, "name": take("custom_reward_function.name", "compute_score")}
        kwargs = {
            k.rsplit(".", 1)[1]: v
            for k, v in o.items()
            if k.startswith("custom_reward_function.reward_kwargs.")
        }
        used_kwargs = [take(k) for k in o if k.startswith("custom_reward_function.reward_kwargs.")]
        del used_kwargs
        if kwargs:
            opts["kwargs"] = kwargs
        out.set("reward.options.verl_function", opts)
    take("custom_reward_function.name")
    for prefix in ("reward_model.overlong_buffer.", "reward_model.reward_kwargs.overlong_buffer_cfg."):
        if take(prefix + "enable"):  # DAPO's overlong penalty (recipe/dapo; newer verl: reward_kwargs)
            out.set("algo.shaping.overlong_buffer", int(take(prefix + "len", 0)))
            out.set("algo.shaping.overlong_penalty", float(take(prefix + "penalty_factor", 1.0)))
        for key in ("len", "penalty_factor", "log"):
            take(prefix + key)
    take("reward_model.reward_kwargs.max_resp_len")  # the rollout's max_new_tokens
    _verl_reward_model(o, take, out)


def _verl_reward_model(o, take, out: Converted) -> None:
    """verl's `reward_model.enable`: once the model's scores exist, verl's reward manager returns them as
    the reward and calls no rule-based function, so the model is the only term rewarded here too."""
    if not take("reward_model.enable"):
        return
    if not (path := take("reward_model.model.path")):
        raise InputError("reward_model.enable=true with no reward_model.model.path: which reward model?")
    out.set("reward.weights", {"correctness": 0.0, "reward_model": 1.0})
    out.set("reward.options.reward_model.path", str(path))
    for key, ours in (("micro_batch_size_per_gpu", "batch_size"), ("max_length", "max_length")):
        if (value := take("reward_model." + key)) is not None:
            out.set(f"reward.options.reward_model.{ours}", int(value))
    prompt, response = (
        take("reward_model.rollout.prompt_length"),
        take("reward_model.rollout.response_length"),
    )
    if "max_length" not in out.recipe["reward"]["options"]["reward_model"] and prompt and response:
        out.set("reward.options.reward_model.max_length", int(prompt) + int(response))  # its server's context
    out.notes.append("reward_model.enable: the reward is the reward model's score alone, as in verl (its "
                     "rule-based reward is not computed then): reward.weights {correctness: 0.0, reward_model: "
                     "1.0}; correctness is still logged (reward/accuracy)")  # fmt: skip
    if "custom_reward_function.path" in o:
        out.notes.append("custom_reward_function.path with reward_model.enable: verl rewards the model's score; "
                         "the function is set as the routed verifier (weight 0)")  # fmt: skip


def _verl_correction(take, out: Converted) -> None:
    rc = "algorithm.rollout_correction."
    level, cap = take(rc + "rollout_is"), take(rc + "rollout_is_threshold", 2.0)
    reject, spec = take(rc + "rollout_rs"), take(rc + "rollout_rs_threshold")
    if _verl_bypass(rc, take, out) == "ppo_clip" and level:  # the ratio is to the sampler already
        out.notes.append(f"{rc}rollout_is={level} with bypass_mode and loss_type=ppo_clip: verl computes the "
                         "weights for its metrics only (the ratio is pi / pi_sampler); left out")  # fmt: skip
        level = None
    normalize = take(rc + "rollout_is_batch_normalize")  # (read either way: without weights it does nothing)
    if level in ("token", "sequence"):
        out.set("algo.off_policy.tis_cap", float(cap))
        out.set("algo.off_policy.tis_mode", f"{level}_truncate")
        if normalize:
            out.set("algo.off_policy.tis_normalize", True)
    elif level:
        out.notes.append(f"{rc}rollout_is={level}: no reasonrl equivalent, left out")
    if reject in ("token", "sequence"):  # verl's earlier API: a masked importance weight
        if level:
            out.notes.append(
                f"{rc}rollout_rs={reject}: with rollout_is set too, only the truncated weights are kept"
            )
        elif spec is not None:
            out.set("algo.off_policy.tis_cap", float(spec))
            out.set("algo.off_policy.tis_mode", f"{reject}_mask")
    elif reject:
        _verl_rejection(rc, str(reject), spec, out)


def _verl_bypass(rc: str, take, out: Converted) -> str | None:
    """verl's bypass mode: the sampler's log-probs as the old ones, and its own loss (ppo_clip, or
    reinforce with explicit weights) in place of the actor's loss mode; returns that loss, None when off."""
    loss_type = str(take(rc + "loss_type", "ppo_clip"))  # (read either way: decoupled mode ignores it)
    if not take(rc + "bypass_mode"):
        return None
    out.set("algo.off_policy.bypass", True)
    if loss_type not in ("ppo_clip", "reinforce"):
        out.notes.append(f"{rc}loss_type={loss_type!r} (verl knows ppo_clip and reinforce): ppo_clip used")
        loss_type = "ppo_clip"
    mode = take(A + "actor.policy_loss.loss_mode")
    if mode not in (None, "vanilla"):
        out.notes.append(f"{rc}bypass_mode: verl's bypass loss ({loss_type}) replaces "
                         f"{A}actor.policy_loss.loss_mode={mode}")  # fmt: skip
    out.set("algo.policy_loss", loss_type)
    return loss_type


def _verl_rejection(rc: str, reject: str, spec, out: Converted) -> None:
    """verl's rollout_rs criteria (comma-separated) and their thresholds (one shared, or one per criterion:
    'low_high' for the k1 ratio modes, an upper bound otherwise) -> algo.off_policy.reject."""
    from reasonrl.algorithms.correction import check_criterion

    modes = list(dict.fromkeys(m.strip() for m in reject.strip("'\"").split(",") if m.strip()))
    specs = [p.strip() for p in str(spec).strip("'\"").split(",")] if spec is not None else []
    if len(specs) == 1:
        specs *= len(modes)
    try:
        if len(specs) != len(modes):
            raise ValueError(f"{len(modes)} criteria, {len(specs)} thresholds")
        criteria = []
        for mode, bounds in zip(modes, specs):
            low, _, high = bounds.rpartition("_")
            criterion = {"mode": mode, "high": float(high), **({"low": float(low)} if low else {})}
            check_criterion(criterion)
            criteria.append(criterion)
    except ValueError as e:
        out.notes.append(f"{rc}rollout_rs={reject} / rollout_rs_threshold={spec}: {e}; left out")
        return
    out.set("algo.off_policy.reject", criteria)
