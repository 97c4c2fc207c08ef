"""TRL GRPOConfig files (YAML / JSON of its fields, as `trl grpo --config` reads) as reasonrl recipes
(SFTConfig files: `config.from_trl_sft`).

Owns: the key table (`TRL`) and the settings computed from several fields (batch sizes, loss type,
importance sampling, reference sync). Does not own: what the verl and TRL readers share (`config.foreign`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reasonrl.config.foreign import Converted, Reading, as_list, choice, parse_value, read_source
from reasonrl.errors import InputError


def trl_fields(path: str | Path) -> dict[str, Any]:
    """A TRL config file's fields (YAML or JSON: `trl grpo --config` reads YAML)."""
    import yaml

    text = read_source(path)
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise InputError(f"{path}: not a YAML / JSON mapping ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a YAML / JSON mapping of GRPOConfig fields")
    return {k: parse_value(v) if isinstance(v, str) else v for k, v in data.items()}


SCHEDULES = {
    "constant": "constant",
    "cosine": "cosine",
    "linear": "linear",
    "constant_with_warmup": "constant",
}
# TRL loss_type -> (policy loss, aggregation)
LOSS_TYPES = {"grpo": ("ppo_clip", "seq_mean_token_mean"), "bnpo": ("ppo_clip", "token_mean"),
              "dr_grpo": ("ppo_clip", "seq_mean_token_sum_norm"), "dapo": ("ppo_clip", "token_mean"),
              "cispo": ("cispo", "token_mean"), "sapo": ("sapo", "seq_mean_token_mean"),
              # LUSPO: each sequence's loss times its length, averaged over sequences (GSPO's sequence ratio
              # with importance_sampling_level=sequence, below, as the paper runs it)
              "luspo": ("ppo_clip", "seq_mean_token_sum"), "vespo": ("vespo", "token_mean")}  # fmt: skip
# fields read as they are: TRL field -> (reasonrl key, conversion)
TRL: dict[str, tuple[str, Any]] = {
    "model_name_or_path": ("model.path", str),
    "learning_rate": ("train.lr", float),
    "num_generations": ("rollout.n", int),
    "max_completion_length": ("rollout.max_new_tokens", int),
    "max_prompt_length": ("data.max_prompt_tokens", int),
    "temperature": ("rollout.temperature", float),
    "top_p": ("rollout.top_p", float),
    "top_k": ("rollout.top_k", lambda v: int(v or 0)),
    "min_p": ("rollout.min_p", lambda v: float(v or 0.0)),
    "epsilon_high": ("algo.clip_high", float),
    "delta": ("algo.loss_kwargs.clip_c", float),
    "mask_truncated_completions": ("algo.shaping.mask_truncated", bool),
    "top_entropy_quantile": ("algo.top_entropy_quantile", float),
    "entropy_coef": ("algo.entropy_coef", float),
    "use_adaptive_entropy": ("algo.entropy_control.enabled", bool),
    "entropy_target": ("algo.entropy_control.target", float),
    "entropy_coef_delta": ("algo.entropy_control.delta", float),
    "entropy_coef_min": ("algo.entropy_control.coef_min", float),
    "entropy_coef_max": ("algo.entropy_control.coef_max", float),
    "off_policy_mask_threshold": ("algo.off_policy.mask_threshold", float),
    "sapo_temperature_pos": ("algo.loss_kwargs.tau_pos", float),
    "sapo_temperature_neg": ("algo.loss_kwargs.tau_neg", float),
    "vespo_k_pos": ("algo.loss_kwargs.k_pos", float),
    "vespo_lambda_pos": ("algo.loss_kwargs.lambda_pos", float),
    "vespo_k_neg": ("algo.loss_kwargs.k_neg", float),
    "vespo_lambda_neg": ("algo.loss_kwargs.lambda_neg", float),
    "num_iterations": ("train.epochs", int),
    "warmup_ratio": ("train.warmup_ratio", float),
    "lr_scheduler_type": ("train.lr_schedule", choice(SCHEDULES, "lr_scheduler_type")),
    "weight_decay": ("train.weight_decay", float),
    "max_grad_norm": ("train.grad_clip", float),
    "seed": ("train.seed", int),
    "data_seed": ("data.seed", int),
    "gradient_checkpointing": ("model.gradient_checkpointing", bool),
    "torch_compile": ("model.compile", bool),
    "disable_dropout": ("model.disable_dropout", bool),
    "chat_template_kwargs": ("data.chat_template_kwargs", dict),
    "vllm_gpu_memory_utilization": ("rollout.engine_kwargs.gpu_memory_utilization", float),
    "vllm_tensor_parallel_size": ("rollout.engine_kwargs.tensor_parallel_size", int),
    "output_dir": ("log.run_dir", str),
    "save_total_limit": ("checkpoint.keep_last", int),
    "run_name": ("name", str),
    "lora_r": ("model.lora.rank", int),
    "lora_alpha": ("model.lora.alpha", float),
    "lora_dropout": ("model.lora.dropout", float),
    "lora_target_modules": ("model.lora.target_modules", lambda v: v if isinstance(v, list) else [v]),
}
# GRPOConfig's defaults (and transformers' TrainingArguments') where they differ from reasonrl's
TRL_DEFAULTS = {"learning_rate": 1e-6, "max_completion_length": 512, "lr_scheduler_type": "linear",
                "gradient_checkpointing": True, "bf16": True}  # fmt: skip
# fields reasonrl needs no setting for: the reason, shown in the notes
TRL_NOT_NEEDED = {
    "logging_steps": "every step is logged",
    "log_completions": "log.rollouts_per_step samples go to rollouts.jsonl every step",
    "per_device_eval_batch_size": "val.batch_size",
    "bf16": None, "use_peft": None, "save_strategy": None, "eval_strategy": None, "report_to": None,
    "vllm_mode": "the vLLM engine runs in the trainer's process (colocated)",
    "dataset_name": "data comes from local files: data.train_files (`reasonrl data prepare trl --input FILE "
    "--out train.parquet` converts TRL's GRPO data, keeping its columns for reward functions), or data.task",
    "dataset_train_split": "data comes from local files", "dataset_config": "data comes from local files",
    "use_liger_kernel": "model.logprob_chunk computes log-probs without the [B, T, V] logits",
    "max_tool_calling_iterations": "TRL's tools are Python functions given in code: list them in "
    "rollout.tools.functions (import paths), an environment_factory's class in rollout.tools.environment, with "
    "rollout.tools.enabled=true, format=auto (the model's template's calls), names=[]; this is rollout.tools.max_calls (calls, not messages; TRL "
    "runs every call of a message: rollout.tools.parallel_calls) (docs/rollouts.md)",
}  # fmt: skip


def convert_trl(path) -> Converted:
    fields = trl_fields(path)
    from reasonrl.config.from_trl_sft import convert_trl_sft, is_sft

    if is_sft(fields):  # an SFTConfig file (packing, max_length, ...): algo.objective sft
        return convert_trl_sft(fields, path)
    r = Reading("TRL", fields, TRL_DEFAULTS)
    r.apply(TRL)
    if not r.values.get("use_peft") and r.out.recipe.get("model", {}).pop("lora", None):  # only with use_peft
        r.out.notes.append("lora_* fields without use_peft=true: TRL trains every weight; so does the recipe")
    r.derive(lambda: _trl_batches(r.take, r.out), lambda: _trl_loss(r.values, r.take, r.out),
             lambda: _trl_rewards(r.take, r.out),
             lambda: _trl_optimizer(r.values, r.take, r.out), what=f"{path}: a field is not a number where TRL expects one")  # fmt: skip
    r.leftovers(TRL_NOT_NEEDED)
    return r.out


def _trl_batches(take, out: Converted) -> None:
    per = int(take("per_device_train_batch_size", 8))
    accum = int(take("gradient_accumulation_steps", 1))
    per_generation = int(take("steps_per_generation") or accum)
    generation = int(take("generation_batch_size") or per * per_generation)
    out.set("train.micro_batch", per)
    out.set("train.mini_batch", per * accum)
    out.set("train.global_batch", generation)
    out.notes.append(f"batch sizes for one process: train.global_batch={generation} (generation batch), "
                     f"train.mini_batch={per * accum} (per device x accumulation); with P processes multiply "
                     "both by P (reasonrl's are global)")  # fmt: skip
    steps = take("max_steps", -1)
    if steps is not None and int(steps) > 0:
        out.set("train.steps", int(steps))
    elif (epochs := take("num_train_epochs")) is not None:
        out.notes.append(f"num_train_epochs={epochs}: reasonrl counts steps; set train.steps")
    if (every := take("save_steps")) is not None and take("save_strategy", "steps") != "no":
        out.set("checkpoint.every", int(every))
    if (every := take("eval_steps")) is not None and take("eval_strategy", "no") != "no":
        out.set("val.every", int(every))
    if "wandb" in (take("report_to") or []) or take("report_to") == "wandb":
        out.set("log.wandb", True)
    if take("bf16"):
        out.set("model.dtype", "bfloat16")
    if take("use_peft") and "rank" not in out.recipe.get("model", {}).get("lora", {}):
        out.set("model.lora.rank", 16)  # TRL's ModelConfig default lora_r


def _trl_loss(f, take, out: Converted) -> None:
    loss_type = str(take("loss_type", "dapo"))
    if loss_type in LOSS_TYPES:
        loss, agg = LOSS_TYPES[loss_type]
        out.set("algo.policy_loss", loss)
        out.set("algo.loss_agg", agg)
    else:
        out.notes.append(
            f"loss_type={loss_type!r}: no reasonrl equivalent, the default ppo_clip / token_mean"
        )
        loss = "ppo_clip"
    eps = take("epsilon")
    if loss == "cispo":  # TRL caps the weight at epsilon_high itself; reasonrl's bound is 1 + clip_high
        out.set("algo.clip_high", float(take("epsilon_high", 5.0)) - 1.0)
        out.set("algo.clip_low", 1.0)
    elif eps is not None:
        out.set("algo.clip_low", float(eps))
        if "epsilon_high" not in f:
            out.set("algo.clip_high", float(eps))
    if str(take("importance_sampling_level", "token")) == "sequence":
        if loss == "ppo_clip":
            out.set("algo.policy_loss", "gspo")
            if eps is None:  # TRL clips the sequence ratio at its epsilon default, not GSPO's 3e-4
                out.set("algo.clip_low", 0.2)
                if "epsilon_high" not in f:
                    out.set("algo.clip_high", 0.2)
        else:
            out.notes.append(f"importance_sampling_level=sequence with loss_type={loss_type}: left out")
    scale = take("scale_rewards", "group")
    if take("multi_objective_aggregation") == "normalize_then_sum":
        out.set("algo.adv_estimator", "gdpo")  # which normalises by group and batch itself, as TRL does
        if "scale_rewards" in f:
            out.notes.append(
                f"scale_rewards={scale!r}: not needed (normalize_then_sum ignores it, in TRL too)"
            )
    elif scale in (False, "none", "false"):
        out.set("algo.adv_kwargs.scale_by_std", False)
    elif scale == "batch":
        out.set("algo.adv_kwargs.std_scope", "batch")
    beta = float(take("beta", 0.0) or 0.0)
    out.set("algo.kl.coef", beta)  # TRL's KL term is k3 (reasonrl's default estimator)
    if beta > 0 and take("use_bias_correction_kl"):
        out.set("algo.kl.importance_weighted", True)
    if beta > 0 and take("sync_ref_model"):
        out.set("algo.kl.ref_sync_steps", int(take("ref_model_sync_steps", 512)))
        out.set("algo.kl.ref_sync_alpha", float(take("ref_model_mixup_alpha", 0.6)))
    for key in ("use_bias_correction_kl", "sync_ref_model", "ref_model_sync_steps", "ref_model_mixup_alpha"):
        take(key)
    if take("use_vllm"):
        out.set("rollout.engine", "vllm")
        if take("vllm_importance_sampling_correction", True):  # TRL's defaults when not given
            mode = str(take("vllm_importance_sampling_mode", "sequence_mask"))
            if out.recipe.get("algo", {}).get("policy_loss") == "vespo" and mode.startswith("sequence"):
                token = mode.replace("sequence", "token")  # (vespo builds its own sequence ratio from them)
                out.notes.append(f"vllm_importance_sampling_mode={mode}: TRL refuses it with vespo (token_truncate "
                                 f"or token_mask only); {token} is used")  # fmt: skip
                mode = token
            out.set("algo.off_policy.tis_mode", mode)
            cap = take(
                "vllm_importance_sampling_clip_max", take("vllm_importance_sampling_cap", 3.0)
            )  # (the old name)
            out.set("algo.off_policy.tis_cap", float(cap))
            floor = take("vllm_importance_sampling_clip_min")
            if floor is not None and str(take("vllm_importance_sampling_mode", "sequence_mask")).endswith(
                "mask"
            ):
                out.set("algo.off_policy.tis_floor", float(floor))
            elif floor is not None:
                out.notes.append(
                    f"vllm_importance_sampling_clip_min={floor}: reasonrl's truncate modes cap only from above; left out"
                )
    for key in ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode", "vllm_importance_sampling_cap",
                "vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min"):  # fmt: skip
        take(key)


# `trl grpo --reward_funcs` names -> reasonrl's term (TRL's math answer checks: the routed verifier)
TRL_REWARD_FUNCS = {"accuracy_reward": "correctness", "reasoning_accuracy_reward": "correctness"}
TRL_FUNCTION = "trl_function"  # any other function, run as it is (`rewards.verifiers.trl_function`)


def _trl_rewards(take, out: Converted) -> None:
    """`trl grpo`'s reward model (`reward_model_name_or_path`, first in TRL's order) and `reward_funcs`,
    weighted by `reward_weights` (one each, in that order; all 1 when not given), as reward.weights; the
    functions reasonrl has no term for are the `trl_function` term, called as TRL calls them."""
    terms: list[str] = []
    names: list[str] = []
    if rm := take("reward_model_name_or_path"):
        terms.append("reward_model")
        names.append("reward_model")
        out.set("reward.options.reward_model.path", str(rm))
    for name in as_list(take("reward_funcs") or []):
        names.append(str(name))
        terms.append(
            TRL_REWARD_FUNCS.get(name)
            or ("overlong" if name == "get_soft_overlong_punishment" else TRL_FUNCTION)
        )
    weights = take("reward_weights")
    weights = [1.0] * len(terms) if weights is None else [float(w) for w in as_list(weights)]
    if len(weights) != len(terms):
        raise InputError(f"reward_weights has {len(weights)} weights for {len(terms)} reward functions "
                         f"(the reward model first, then reward_funcs), as TRL requires one each")  # fmt: skip
    if not terms:
        return
    chosen: dict[str, float] = {}
    functions: list[tuple[str, float]] = []
    for term, name, weight in zip(terms, names, weights):
        if term == "overlong":  # TRL's script: a linear penalty from 1024 to 1280 tokens, -1 beyond
            out.set("algo.shaping.overlong_buffer", 256)
            out.set("algo.shaping.overlong_penalty", weight)
            out.notes.append("reward_funcs: get_soft_overlong_punishment: algo.shaping.overlong_buffer=256; TRL's "
                             "script ends it at 1280 tokens, reasonrl's at rollout.max_new_tokens")  # fmt: skip
        elif term == TRL_FUNCTION:
            functions.append((name, weight))
        else:
            chosen[term] = chosen.get(term, 0.0) + weight
    if functions:  # one term: the functions summed with their own weights inside it, as TRL sums them
        chosen[TRL_FUNCTION] = 1.0
        options = {"functions": [n for n, _ in functions], "weights": [w for _, w in functions]}
        if path := out.recipe.get("model", {}).get("path"):
            options["tokenizer"] = str(path)  # TRL hands every function the completion's token ids too
        out.set("reward.options.trl_function", options)
        from reasonrl.algorithms.advantages import ADVANTAGES

        estimator = out.recipe.get("algo", {}).get("adv_estimator", "grpo")
        if len(functions) > 1 and "term_rewards" in ADVANTAGES.get(estimator).needs:  # (normalize_then_sum)
            out.notes.append("multi_objective_aggregation=normalize_then_sum: GDPO normalises each reward "
                             "function on its own (the trl_function term's functions, as TRL does), then their "
                             "weighted sum over the batch")  # fmt: skip
        out.notes.append(f"reward_funcs: {', '.join(n for n, _ in functions)}: called as TRL calls them "
                         "(reward.options.trl_function; an import path is imported from the directory the run "
                         "starts in, as `trl grpo` does; docs/rewards.md)")  # fmt: skip
    if "correctness" not in chosen and chosen:  # no accuracy function: correctness is logged, not rewarded
        out.set("reward.weights", {"correctness": 0.0, **chosen})
    elif chosen:
        out.set("reward.weights", chosen)


def _trl_optimizer(f, take, out: Converted) -> None:
    if "adam_beta1" in f or "adam_beta2" in f:
        out.set("train.betas", [float(take("adam_beta1", 0.9)), float(take("adam_beta2", 0.999))])
    warm = take("warmup_steps")
    if warm is not None:  # transformers reads a float below 1 as a share of the steps
        out.set("train.warmup_ratio" if isinstance(warm, float) and warm < 1 else "train.warmup_steps",
                float(warm) if isinstance(warm, float) and warm < 1 else int(warm))  # fmt: skip
