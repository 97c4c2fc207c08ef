"""OpenRLHF launch scripts (`python -m openrlhf.cli.train_ppo_ray --flag value ...`) as reasonrl recipes.

Owns: the flags of the script's train_ppo_ray command (`openrlhf_args`: the dotted names OpenRLHF uses
since April 2026, and the flat names before them, `--init_kl_coef` and the like, read as the dotted
ones), the key table (`OPENRLHF`), the settings computed from several flags (batch sizes, the advantage
estimator, the KL term, the importance correction, asynchronous training) and the notes on flags left
out. Does not own: reading the script's shell (`config.shell`) or what every reader shares
(`config.foreign`). The semantics are OpenRLHF's `openrlhf/cli/train_ppo_ray.py` and
`trainer/ppo_utils/experience_maker.py` (read 2026-12-01, commit 3c3be62).
"""

from __future__ import annotations

import re
from typing import Any

from reasonrl.algorithms import ADVANTAGES
from reasonrl.config.foreign import (
    Converted,
    Reading,
    as_list,
    choice,
    critic_warmup,
    off_if_negative,
    parse_value,
)
from reasonrl.config.shell import script_commands
from reasonrl.errors import InputError

# the flat names of OpenRLHF before its dotted flags (2026-04), for the flags this reader converts
FLAT = {
    "pretrain": "actor.model_name_or_path", "critic_pretrain": "critic.model_name_or_path",
    "reward_pretrain": "reward.model_name_or_path", "remote_rm_url": "reward.remote_url",
    "agent_func_path": "train.agent_func_path",
    "prompt_data": "data.prompt_dataset", "input_key": "data.input_key", "label_key": "data.label_key",
    "apply_chat_template": "data.apply_chat_template", "input_template": "data.input_template",
    "prompt_split": "data.prompt_split", "prompt_data_probs": "data.prompt_probs", "max_samples": "data.max_samples",
    "max_len": "data.max_len", "prompt_max_len": "data.prompt_max_len", "generate_max_len": "rollout.max_new_tokens",
    "max_new_tokens": "rollout.max_new_tokens", "eval_dataset": "eval.dataset", "eval_split": "eval.split",
    "eval_temperature": "eval.temperature", "eval_n_samples_per_prompt": "eval.n_samples_per_prompt",
    "eval_steps": "eval.steps", "save_steps": "ckpt.save_steps", "max_ckpt_num": "ckpt.max_num",
    "save_path": "ckpt.output_dir", "ckpt_path": "ckpt.path", "save_hf_ckpt": "ckpt.save_hf",
    "load_checkpoint": "ckpt.load_enable", "disable_ds_ckpt": "ckpt.disable_ds", "max_ckpt_mem": "ckpt.max_mem",
    "logging_steps": "logger.logging_steps", "num_episodes": "train.num_episodes",
    "rollout_batch_size": "rollout.batch_size", "micro_rollout_batch_size": "rollout.micro_batch_size",
    "vllm_generate_batch_size": "rollout.vllm_generate_batch_size", "max_epochs": "train.max_epochs",
    "micro_train_batch_size": "train.micro_batch_size", "train_batch_size": "train.batch_size",
    "n_samples_per_prompt": "rollout.n_samples_per_prompt", "temperature": "rollout.temperature",
    "top_p": "rollout.top_p", "seed": "train.seed", "actor_learning_rate": "actor.adam.lr",
    "critic_learning_rate": "critic.adam.lr", "lr_warmup_ratio": "actor.lr_warmup_ratio",
    "lr_scheduler": "actor.lr_scheduler", "adam_betas": "actor.adam.betas", "l2": "actor.adam.weight_decay",
    "max_norm": "actor.max_norm", "eps_clip": "actor.eps_clip", "eps_clip_low_high": "actor.eps_clip_low_high",
    "dual_clip": "actor.dual_clip", "value_clip": "critic.value_clip", "lambd": "algo.advantage.lambd",
    "gamma": "algo.advantage.gamma", "init_kl_coef": "algo.kl.init_coef", "kl_target": "algo.kl.target",
    "kl_horizon": "algo.kl.horizon", "use_kl_loss": "algo.kl.use_loss", "kl_estimator": "algo.kl.estimator",
    "advantage_estimator": "algo.advantage.estimator", "no_advantage_std_norm": "algo.advantage.no_std_norm",
    "policy_loss_type": "actor.policy_loss_type", "entropy_loss_coef": "actor.entropy_coef",
    "aux_loss_coef": "actor.aux_loss_coef", "overlong_buffer_len": "reward.overlong_buffer_len",
    "overlong_penalty_factor": "reward.overlong_penalty_factor",
    "stop_properly_penalty_coef": "reward.stop_properly_penalty_coef", "reward_clip_range": "reward.clip_range",
    "normalize_reward": "reward.normalize_enable", "value_head_prefix": "ds.value_head_prefix", "use_tensorboard": "logger.tensorboard_dir",
    "dynamic_filtering": "algo.dynamic_filtering_enable",
    "dynamic_filtering_reward_range": "algo.dynamic_filtering_range",
    "enable_vllm_is_correction": "algo.advantage.is_correction_enable",
    "vllm_is_truncated_threshold": "algo.advantage.is_correction_threshold",
    "vllm_is_correction_type": "algo.advantage.is_correction_type", "async_train": "train.async_enable",
    "async_queue_size": "train.async_queue_size", "partial_rollout": "train.partial_rollout_enable",
    "zero_stage": "ds.zero_stage", "gradient_checkpointing": "actor.gradient_checkpointing_enable",
    "adam_offload": "ds.adam_offload", "packing_samples": "ds.packing_samples",
    "use_dynamic_batch": "train.dynamic_batch_enable", "train_max_tokens_per_gpu": "train.max_tokens_per_gpu",
    "rollout_max_tokens_per_gpu": "rollout.max_tokens_per_gpu", "param_dtype": "ds.param_dtype",
    "bf16": "ds.param_dtype", "lora_rank": "ds.lora.rank", "lora_alpha": "ds.lora.alpha",
    "target_modules": "ds.lora.target_modules", "lora_dropout": "ds.lora.dropout",
    "vllm_num_engines": "vllm.num_engines", "vllm_tensor_parallel_size": "vllm.tensor_parallel_size",
    "vllm_gpu_memory_utilization": "vllm.gpu_memory_utilization", "enforce_eager": "vllm.enforce_eager",
    "vllm_enable_sleep": "vllm.enable_sleep", "vllm_sync_backend": "vllm.sync_backend",
    "enable_prefix_caching": "vllm.enable_prefix_caching", "colocate_all_models": "train.colocate_all",
    "colocate_actor_ref": "train.colocate_actor_ref", "colocate_critic_reward": "train.colocate_critic_reward",
    "deepspeed_enable_sleep": "ds.enable_sleep", "use_wandb": "logger.wandb.key",
    "wandb_project": "logger.wandb.project", "wandb_org": "logger.wandb.org",
    "wandb_run_name": "logger.wandb.run_name", "wandb_group": "logger.wandb.group",
    "flash_attn": "ds.attn_implementation", "attn_implementation": "ds.attn_implementation",
    "use_liger_kernel": "ds.use_liger_kernel", "freezing_actor_steps": "critic.freezing_steps",
    "actor_num_nodes": "actor.num_nodes", "actor_num_gpus_per_node": "actor.num_gpus_per_node",
    "critic_num_nodes": "critic.num_nodes", "critic_num_gpus_per_node": "critic.num_gpus_per_node",
    "ref_num_nodes": "ref.num_nodes", "ref_num_gpus_per_node": "ref.num_gpus_per_node",
    "reward_num_nodes": "reward.num_nodes", "reward_num_gpus_per_node": "reward.num_gpus_per_node",
}  # fmt: skip

SCHEDULES = {"cosine_with_min_lr": "cosine", "cosine": "cosine", "linear": "linear", "constant": "constant",
             "constant_with_warmup": "constant"}  # fmt: skip
# OpenRLHF estimator -> (reasonrl estimator, its options)
ESTIMATORS = {
    "gae": ("gae", {}),
    "reinforce": ("reinforce_pp", {}),  # REINFORCE++: batch-whitened returns
    "rloo": ("rloo", {}),
    "reinforce_baseline": ("reinforce_pp_baseline", {}),  # group mean off, then batch-whitened
    "group_norm": ("grpo", {}),
    "dr_grpo": ("grpo", {"scale_by_std": False}),
}

# flags read as they are: OpenRLHF flag -> (reasonrl key, conversion)
OPENRLHF: dict[str, tuple[str, Any]] = {
    "actor.model_name_or_path": ("model.path", str),
    "critic.model_name_or_path": ("algo.critic.model", str),
    "actor.adam.lr": ("train.lr", float),
    "actor.adam.betas": ("train.betas", lambda v: [float(x) for x in as_list(v)]),
    "actor.adam.weight_decay": ("train.weight_decay", float),
    "actor.lr_warmup_ratio": ("train.warmup_ratio", float),
    "actor.lr_scheduler": ("train.lr_schedule", choice(SCHEDULES, "actor.lr_scheduler")),
    "actor.max_norm": ("train.grad_clip", float),
    "critic.adam.lr": ("algo.critic.lr", float),
    "critic.value_clip": ("algo.critic.value_clip", float),
    "rollout.n_samples_per_prompt": ("rollout.n", int),
    "rollout.temperature": ("rollout.temperature", float),
    "rollout.top_p": ("rollout.top_p", float),
    "rollout.max_new_tokens": ("rollout.max_new_tokens", int),
    "data.prompt_max_len": ("data.max_prompt_tokens", int),
    "train.max_epochs": ("train.epochs", int),
    "train.seed": ("train.seed", int),
    "actor.dual_clip": ("algo.loss_kwargs.clip_c", float),
    "actor.entropy_coef": ("algo.entropy_coef", float),
    "actor.gradient_checkpointing_enable": ("model.gradient_checkpointing", bool),
    "ds.adam_offload": ("train.cpu_offload", bool),
    "ds.lora.alpha": ("model.lora.alpha", float),
    "ds.lora.dropout": ("model.lora.dropout", float),
    "ds.lora.target_modules": ("model.lora.target_modules", lambda v: as_list(v)),
    "ckpt.save_steps": ("checkpoint.every", off_if_negative),
    "ckpt.max_num": ("checkpoint.keep_last", int),
    "ckpt.output_dir": ("log.run_dir", str),
    "eval.steps": ("val.every", off_if_negative),
    "eval.temperature": ("val.temperature", float),
    "eval.n_samples_per_prompt": ("val.n", int),
    "vllm.tensor_parallel_size": ("rollout.engine_kwargs.tensor_parallel_size", int),
    "vllm.gpu_memory_utilization": ("rollout.engine_kwargs.gpu_memory_utilization", float),
    "vllm.enforce_eager": ("rollout.engine_kwargs.enforce_eager", bool),
    "reward.overlong_buffer_len": ("algo.shaping.overlong_buffer", int),
    "reward.overlong_penalty_factor": ("algo.shaping.overlong_penalty", float),
    "reward.stop_properly_penalty_coef": ("algo.shaping.truncated_reward", float),
    "logger.wandb.org": ("log.wandb_entity", str),
    "logger.wandb.run_name": ("name", str),
}
# OpenRLHF's defaults (train_ppo_ray.py) that make the run what it is, where they differ from reasonrl's
OPENRLHF_DEFAULTS = {
    "algo.advantage.estimator": "gae", "rollout.n_samples_per_prompt": 1, "rollout.batch_size": 1024,
    "train.batch_size": 128, "train.micro_batch_size": 1, "actor.adam.lr": 1e-6, "actor.adam.betas": [0.9, 0.95],
    "actor.lr_warmup_ratio": 0.03, "actor.lr_scheduler": "cosine_with_min_lr", "actor.min_lr_ratio": 0.1,
    "algo.kl.init_coef": 0.01, "algo.kl.estimator": "k1", "train.seed": 42,
}  # fmt: skip
CLUSTER = (
    "launch with torchrun --nproc-per-node N (docs/distributed.md); the reference shares the policy's engine"
)
OPENRLHF_NOT_NEEDED = {
    "data.apply_chat_template": "prompts are chat messages, formatted with the tokenizer's chat template",
    "data.input_key": "data comes from local files in verl's format (reasonrl data convert ...)",
    "data.label_key": "data comes from local files in verl's format (reasonrl data convert ...)",
    "data.prompt_split": None, "eval.split": None, "data.max_samples": "data.train_size",
    "logger.logging_steps": "every step is logged", "logger.wandb.key": "wandb reads WANDB_API_KEY",
    "ckpt.path": "checkpoints go to log.run_dir/checkpoints", "ckpt.save_hf": "every checkpoint is a HF directory",
    "ckpt.disable_ds": None, "ckpt.max_mem": None, "ckpt.load_enable": "resume with `reasonrl train RECIPE --resume`",
    "ds.zero_stage": "FSDP2 shards every decoder layer under torchrun (docs/distributed.md)",
    "ds.param_dtype": None, "ds.attn_implementation": "SDPA, or packed attention with model.pack_tokens",
    "ds.use_liger_kernel": "model.logprob_chunk computes log-probs without the [B, T, V] logits",
    "rollout.micro_batch_size": "log-prob forwards use train.micro_batch / train.micro_tokens",
    "rollout.max_tokens_per_gpu": "log-prob forwards use train.micro_batch / train.micro_tokens",
    "rollout.vllm_generate_batch_size": "each step generates its global batch", "reward.clip_range":
    "verifier scores are in [0, 1]", "critic.save_value_network": None, "local_rank": None,
    "vllm.sync_backend": "weights are synced in process", "vllm.enable_sleep": "the vLLM engine sleeps on CUDA",
    "ds.enable_sleep": None, "vllm.enable_prefix_caching": None, "data.disable_fast_tokenizer": None,
    "data.dataloader_num_workers": None, "actor.gradient_checkpointing_reentrant": None,
    "logger.tensorboard_dir": "TensorBoard events go to the run directory (log.tensorboard, on by default)",
    "reward.normalize_enable": "it normalises a reward model's scores, and this run has none",
    "ds.value_head_prefix": "it names a reward model's value head, and this run has none",
}  # fmt: skip
OPENRLHF_PREFIXES_NOT_NEEDED = {p: CLUSTER for p in ("actor.num_", "critic.num_", "ref.", "reward.num_",
                                                     "train.colocate_", "vllm.num_engines")}  # fmt: skip


def openrlhf_args(text: str, entry: str = "train_ppo", flat: dict[str, str] | None = None) -> dict[str, Any]:
    """The flags of the script's `openrlhf.cli.<entry>*` command(s): {dotted name: value} (a flag alone:
    True; one value parsed; several: a list), flat names read as their dotted ones (`flat`, else FLAT)."""
    flat = FLAT if flat is None else flat
    args: dict[str, Any] = {}
    found = False
    for words in script_commands(text):
        start = next((i for i, w in enumerate(words) if re.search(rf"openrlhf[./]cli[./]{entry}", w)), None)
        if start is None:
            continue
        found, name, values = True, None, []
        for word in [*words[start + 1 :], "--"]:
            if word.startswith("--"):
                if name:
                    args[flat.get(name, name)] = (
                        True if not values else parse_value(values[0]) if len(values) == 1
                        else [parse_value(v) for v in values]
                    )  # fmt: skip
                name, _, inline = word[2:].partition("=")
                values = [inline] if inline else []
            elif name:
                values.append(word)
    if not found:
        name = "train_ppo_ray" if entry == "train_ppo" else entry
        raise InputError(f"no `python -m openrlhf.cli.{name} ...` command found in the script")
    return {k: v for k, v in args.items() if k}


def convert_openrlhf(text: str) -> Converted:
    if re.search(r"openrlhf[./]cli[./]train_sft", text):  # an SFT script: algo.objective sft
        from reasonrl.config.from_openrlhf_sft import convert_openrlhf_sft

        return convert_openrlhf_sft(text)
    r = Reading("OpenRLHF", openrlhf_args(text), OPENRLHF_DEFAULTS)
    r.apply(OPENRLHF)
    r.derive(*(lambda f=f: f(r.values, r.take, r.out) for f in (_batches, _algorithm, _runtime)),
             what="a flag of the script cannot be converted", hint="; a variable it does not set?")  # fmt: skip
    r.leftovers(OPENRLHF_NOT_NEEDED, OPENRLHF_PREFIXES_NOT_NEEDED)
    return r.out


def _batches(o, take, out: Converted) -> None:
    n = int(take("rollout.n_samples_per_prompt", 1))
    prompts, mini = int(take("rollout.batch_size", 1024)), int(take("train.batch_size", 128))
    out.set("train.global_batch", prompts * n)  # OpenRLHF counts prompts here, samples in train.batch_size
    out.set("train.mini_batch", mini)
    out.notes.append(f"rollout.batch_size={prompts} prompts x n={n} -> train.global_batch={prompts * n} "
                     f"sequences; train.batch_size={mini} samples -> train.mini_batch={mini}")  # fmt: skip
    micro = int(take("train.micro_batch_size", 1))
    if take("train.dynamic_batch_enable"):  # the token budget cuts micro-batches, as OpenRLHF's
        out.set("train.micro_tokens", int(take("train.max_tokens_per_gpu", 16192)))
        out.set("train.micro_batch", mini)
    else:
        take("train.max_tokens_per_gpu")
        out.set("train.micro_batch", micro)
    if (episodes := take("train.num_episodes")) is not None:
        out.notes.append(f"train.num_episodes={episodes}: reasonrl counts steps; set train.steps "
                         "(episodes x prompts / rollout.batch_size)")  # fmt: skip
    if "rollout.max_new_tokens" not in o and (total := take("data.max_len")) is not None:
        out.notes.append(f"data.max_len={total} (prompt + response): set rollout.max_new_tokens (OpenRLHF "
                         "gives each sample max_len minus its prompt's length)")  # fmt: skip
    else:
        take("data.max_len")


def _algorithm(o, take, out: Converted) -> None:
    name = str(take("algo.advantage.estimator", "gae"))
    if name not in ESTIMATORS:
        raise InputError(f"algo.advantage.estimator={name!r}: unknown (known: {', '.join(ESTIMATORS)})")
    estimator, options = ESTIMATORS[name]
    out.set("algo.adv_estimator", estimator)
    for k, v in options.items():
        out.set(f"algo.adv_kwargs.{k}", v)
    valid = ADVANTAGES.options(estimator)  # gae takes a discount and lambda; the others neither
    for key, value in (("gamma", take("algo.advantage.gamma")), ("lam", take("algo.advantage.lambd"))):
        if value is not None and key in valid:
            out.set(f"algo.adv_kwargs.{key}", float(value))
        elif value is not None and key == "gamma" and float(value) != 1.0:
            out.notes.append(f"algo.advantage.gamma={value}: reasonrl's {estimator} has no discount (OpenRLHF's "
                             "reinforce discounts token returns); left out")  # fmt: skip
    if name in ("reinforce", "reinforce_baseline"):  # (gae whitens over tokens in both)
        out.notes.append(f"{name}: OpenRLHF whitens advantages over the batch's tokens, reasonrl's {estimator} "
                         "over its sequences")  # fmt: skip
    if take("algo.advantage.no_std_norm"):
        out.notes.append(
            "algo.advantage.no_std_norm: reasonrl's batch whitening divides by the std; left out"
        )
    loss = str(take("actor.policy_loss_type", "ppo"))
    out.set("algo.policy_loss", {"ppo": "ppo_clip", "gspo": "gspo"}.get(loss, "ppo_clip"))
    out.set("algo.loss_agg", "seq_mean_token_mean" if loss == "gspo" else "token_mean")
    if loss not in ("ppo", "gspo"):
        out.notes.append(f"actor.policy_loss_type={loss!r}: unknown, ppo_clip used")
    clip = float(take("actor.eps_clip", 0.2))
    low, high = (float(x) for x in as_list(take("actor.eps_clip_low_high") or [clip, clip]))
    out.set("algo.clip_low", low)
    out.set("algo.clip_high", high)
    _kl(o, take, out)
    _correction(take, out)
    if (frozen := take("critic.freezing_steps")) is not None:  # the actor trains once global_step > it,
        critic_warmup(out, f"critic.freezing_steps={frozen}", int(frozen) + 1)  # which counts from 0
    if take("algo.dynamic_filtering_enable"):
        out.set("algo.dynamic_sampling.enabled", True)
        rng = [float(x) for x in as_list(take("algo.dynamic_filtering_range", [0, 1]))]
        if rng != [0.0, 1.0]:
            out.notes.append(f"algo.dynamic_filtering_range={rng}: reasonrl drops groups whose rewards are all "
                             "equal (OpenRLHF's (0, 1) on 0/1 rewards), not by a mean-reward range")  # fmt: skip
    else:
        take("algo.dynamic_filtering_range")


def _kl(o, take, out: Converted) -> None:
    coef = float(take("algo.kl.init_coef", 0.01))
    estimator = str(take("algo.kl.estimator", "k1"))
    target, horizon = take("algo.kl.target"), take("algo.kl.horizon")
    if coef <= 0:
        out.set("algo.kl.coef", 0.0)
        take("algo.kl.use_loss")
        return
    out.set("algo.kl.coef", coef)
    out.set("algo.kl.estimator", choice({"k1": "k1", "k2": "k2", "k3": "k3"}, "algo.kl.estimator")(estimator))
    if not take("algo.kl.use_loss"):  # OpenRLHF's default: the KL folded into the reward
        out.set("algo.kl.in_reward", True)
        adv = ADVANTAGES.get(ESTIMATORS[str(o.get("algo.advantage.estimator"))][0])
        if "token_rewards" not in adv.needs:  # (gae takes the per-token KL rewards, as OpenRLHF)
            out.notes.append("KL in the reward: OpenRLHF subtracts each token's return-to-go of -coef*kl, "
                             "reasonrl each sequence's summed -coef*kl from its reward")  # fmt: skip
    if target is not None:  # the adaptive controller, in the reward or on the loss as OpenRLHF runs it
        out.set("algo.kl.target", float(target))
        out.set("algo.kl.horizon", int(horizon if horizon is not None else 10000))


def _correction(take, out: Converted) -> None:
    kind = str(take("algo.advantage.is_correction_type", "tis"))
    threshold = take("algo.advantage.is_correction_threshold", [0.5, 5.0])
    if not take("algo.advantage.is_correction_enable"):
        return  # (its threshold unread: OpenRLHF does not use it either)
    low, high = (float(x) for x in as_list(threshold))
    if kind == "icepop":  # token weights outside [low, high] set to 0
        out.set("algo.off_policy.tis_mode", "token_mask")
        out.set("algo.off_policy.tis_floor", low)
    elif kind == "tis":
        out.set("algo.off_policy.tis_mode", "token_truncate")
        out.notes.append(f"is_correction_type=tis clamps the token weights to [{low}, {high}]; reasonrl's "
                         f"token_truncate caps them at {high} only")  # fmt: skip
    elif kind == "seq-mask-tis":  # rows whose geometric-mean ratio leaves [low, high] out, token weights
        out.set("algo.off_policy.tis_mode", "token_truncate")
        # (k1 = -log r: OpenRLHF's ratio range [low, high] is [1/high, 1/low] of k1's ratio bounds)
        out.set("algo.off_policy.reject", [{"mode": "seq_mean_k1", "high": 1.0 / low, "low": 1.0 / high}])
        out.notes.append(f"is_correction_type=seq-mask-tis: its token weights are not capped; reasonrl's "
                         f"token_truncate caps them at {high}")  # fmt: skip
    else:
        out.notes.append(f"is_correction_type={kind!r}: unknown (OpenRLHF knows tis, icepop, seq-mask-tis); "
                         "left out")  # fmt: skip
        return
    out.set("algo.off_policy.tis_cap", high)


def _runtime(o, take, out: Converted) -> None:
    if int(take("vllm.num_engines") or 0) > 0:
        out.set("rollout.engine", "vllm")
    if take("train.async_enable"):  # the sampler runs up to the queue's size ahead
        out.set("rollout.max_staleness", int(take("train.async_queue_size", 1)))
        if "tis_cap" not in out.recipe.get("algo", {}).get("off_policy", {}):
            out.set("algo.off_policy.tis_cap", 2.0)
            out.notes.append("train.async_enable without is_correction: reasonrl corrects stale samples; "
                             "algo.off_policy.tis_cap=2.0 (token_truncate)")  # fmt: skip
    else:
        take("train.async_queue_size")
    if take("ds.packing_samples"):
        out.set("model.remove_padding", True)
        out.notes.append("ds.packing_samples -> model.remove_padding (length-sorted micro-batches cut to "
                         "their longest row; model.pack_tokens packs rows into sequences)")  # fmt: skip
    sched, ratio = o.get("actor.lr_scheduler", "cosine_with_min_lr"), take("actor.min_lr_ratio", 0.1)
    if sched == "cosine_with_min_lr":  # (transformers' plain cosine decays to 0, reasonrl's default)
        out.set("train.min_lr_ratio", float(ratio))
    dtype = take("ds.param_dtype")
    if dtype in (True, "bf16"):
        out.set("model.dtype", "bfloat16")
    elif dtype is not None:
        out.notes.append(f"ds.param_dtype={dtype!r}: reasonrl trains in float32 or bfloat16; left as float32")
    rank = int(take("ds.lora.rank") or 0)
    if rank > 0:
        out.set("model.lora.rank", rank)
    elif "model" in out.recipe:  # LoRA settings without a rank: OpenRLHF trains every weight
        out.recipe["model"].pop("lora", None)
    if (project := take("logger.wandb.project")) is not None or o.get("logger.wandb.key"):
        out.set("log.wandb", True)
        if project is not None:
            out.set("log.wandb_project", str(project))
    if (path := take("data.prompt_dataset")) is not None:
        out.notes.append(f"data.prompt_dataset={path}: data comes from local files; convert it with "
                         "`reasonrl data convert` and set data.train_files")  # fmt: skip
    if (path := take("eval.dataset")) is not None:
        out.notes.append(f"eval.dataset={path}: set data.val_files (or val.benchmarks) to local files")
    _reward_model(o, take, out)


def _reward_model(o, take, out: Converted) -> None:
    """OpenRLHF's reward: the remote function or server where one is given, else its reward model's score
    alone (`reward.model_name_or_path`, which also starts GAE's critic where none is given)."""
    paths = [p for p in str(take("reward.model_name_or_path") or "").split(",") if p]
    if (agent := take("train.agent_func_path")) is not None:  # the agent's rewards alone, as in OpenRLHF
        out.set("rollout.agent.path", str(agent))
        out.set("reward.verifier", "environment")
        out.notes.append(f"train.agent_func_path={agent}: every rollout is an episode of its AgentInstance, run as it "
                         "is (rollout.agent.path); its steps' rewards, summed, score every row (reward.verifier: "
                         "environment; docs/rollouts.md)")  # fmt: skip
        left = [f"{k}={v}" for k in ("reward.remote_url",) if (v := take(k)) is not None] + \
            [f"reward.model_name_or_path={','.join(paths)}"] * bool(paths)  # fmt: skip
        if left:
            out.notes.append(f"{'; '.join(left)}: not used (the agent's rewards score, as in OpenRLHF)")
        return
    if (rm := take("reward.remote_url")) is not None:
        _remote_reward(o, str(rm), out)
        if paths:
            out.notes.append(f"reward.model_name_or_path={','.join(paths)}: not used (the remote reward scores, "
                             "as in OpenRLHF)")  # fmt: skip
        return
    if not paths:
        return
    out.set("reward.weights", {"correctness": 0.0, "reward_model": 1.0})
    opts: dict[str, Any] = {"path": paths[0], "format": "openrlhf"}  # read as OpenRLHF reads any reward model
    if take("reward.normalize_enable"):
        opts["normalize"] = True  # by the mean and std its training saved
    if (prefix := take("ds.value_head_prefix")) not in (None, "score"):
        opts["value_head_prefix"] = str(prefix)
    out.set("reward.options.reward_model", opts)
    out.notes.append("reward.model_name_or_path: the reward is the reward model's score alone, as in OpenRLHF: "
                     "reward.weights {correctness: 0.0, reward_model: 1.0}; correctness is still logged")  # fmt: skip
    if len(paths) > 1:
        out.notes.append(f"reward.model_name_or_path: {len(paths) - 1} more reward model(s) left out "
                         f"({', '.join(paths[1:])}); reasonrl reads one")  # fmt: skip
    estimator = ESTIMATORS.get(str(o.get("algo.advantage.estimator", "gae")), ("grpo",))[0]
    if "values" in ADVANTAGES.get(estimator).needs and "critic.model_name_or_path" not in o:
        out.set("algo.critic.model", paths[0])  # OpenRLHF's default critic: the reward model's backbone


def _remote_reward(o, url: str, out: Converted) -> None:
    """OpenRLHF's `--remote_rm_url`: a `reward_func` file or reward servers, used as they are for every
    row (`rewards.verifiers.openrlhf_reward`), the prompt rendered as the actor's chat template renders it
    where the script has `--apply_chat_template`."""
    file = url.endswith(".py")
    name = "openrlhf_function" if file else "openrlhf_remote"
    opts: dict[str, str] = {"path": url} if file else {"url": url}
    if o.get("data.apply_chat_template") and o.get("actor.model_name_or_path"):
        opts["tokenizer"] = str(o["actor.model_name_or_path"])
    out.set("reward.verifier", name)
    out.set(f"reward.options.{name}", opts)
    out.notes.append(f"reward.remote_url={url}: every row is scored by {'its reward_func' if file else 'the server'}, "
                     f"as OpenRLHF calls it (reward.verifier: {name}; docs/rewards.md)")  # fmt: skip
