"""TRL SFTConfig files (`trl sft --config`, open-r1's `recipes/*/sft/config_*.yaml`) as reasonrl recipes
with `algo.objective: sft` (trainer/sft.py).

Owns: telling an SFTConfig file from a GRPOConfig one (`is_sft`: SFT-only fields and no GRPO-only ones),
the SFT fields' table and defaults, and the settings computed from several fields (batch sizes, the
schedule's floor, the loss's scope). Does not own: reading the file (`config.from_trl.trl_fields`), what
the readers share (`config.foreign`).
"""

from __future__ import annotations

from reasonrl.config.foreign import Converted, Reading, choice
from reasonrl.config.from_trl import TRL, TRL_NOT_NEEDED, _trl_optimizer

SFT_ONLY = ("packing", "completion_only_loss", "assistant_only_loss", "dataset_text_field", "max_seq_length",
            "packing_strategy", "padding_free", "eos_token", "chat_template_path")  # fmt: skip
GRPO_ONLY = ("num_generations", "max_completion_length", "reward_funcs", "beta", "loss_type", "epsilon",
             "use_vllm", "temperature", "num_iterations")  # fmt: skip
SCHEDULES = {"constant": "constant", "cosine": "cosine", "linear": "linear", "constant_with_warmup": "constant",
             "cosine_with_min_lr": "cosine"}  # fmt: skip
SHARED = ("model_name_or_path", "learning_rate", "warmup_ratio", "weight_decay", "max_grad_norm", "seed",
          "data_seed", "gradient_checkpointing", "torch_compile", "chat_template_kwargs", "output_dir",
          "save_total_limit", "run_name", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")  # fmt: skip
TRL_SFT = {**{k: TRL[k] for k in SHARED},
           "max_length": ("rollout.max_new_tokens", int), "max_seq_length": ("rollout.max_new_tokens", int),
           "lr_scheduler_type": ("train.lr_schedule", choice(SCHEDULES, "lr_scheduler_type"))}  # fmt: skip
# SFTConfig's defaults (and transformers' TrainingArguments') where they differ from reasonrl's
TRL_SFT_DEFAULTS = {"learning_rate": 2e-5, "max_length": 1024, "lr_scheduler_type": "linear",
                    "gradient_checkpointing": True, "bf16": True}  # fmt: skip
TRL_SFT_NOT_NEEDED = {
    **{k: v for k, v in TRL_NOT_NEEDED.items() if k not in ("log_completions", "vllm_mode", "max_tool_calling_iterations")},
    "dataset_name": "data comes from local files: `reasonrl data prepare sft`, then data.train_files",
    "dataset_num_proc": None, "log_level": None, "logging_strategy": None, "overwrite_output_dir": None,
    "do_eval": None, "per_device_eval_batch_size": "val.batch_size", "model_revision": None,
    "torch_dtype": None, "dtype": None, "attn_implementation": "transformers picks the model's attention (sdpa)",
    "gradient_checkpointing_kwargs": None, "push_to_hub": "`reasonrl export` or hub.push", "hub_model_id": None,
    "hub_strategy": None, "lr_scheduler_kwargs": None, "chat_template": None, "chat_template_path": None,
    "eos_token": None,
    "completion_only_loss": None, "assistant_only_loss": None, "dataset_text_field": None,
    "packing_strategy": None, "padding_free": None,
}  # fmt: skip


def is_sft(fields: dict) -> bool:
    return any(k in fields for k in SFT_ONLY) and not any(k in fields for k in GRPO_ONLY)


def convert_trl_sft(fields: dict, path) -> Converted:
    r = Reading("TRL's SFTConfig", fields, TRL_SFT_DEFAULTS)
    r.apply(TRL_SFT)
    if not r.values.get("use_peft") and r.out.recipe.get("model", {}).pop("lora", None):  # only with use_peft
        r.out.notes.append("lora_* fields without use_peft=true: TRL trains every weight; so does the recipe")
    r.derive(lambda: _derived(r.values, r.take, r.out), lambda: _trl_optimizer(r.values, r.take, r.out),
             what=f"{path}: a field is not a number where TRL expects one")  # fmt: skip
    r.leftovers(TRL_SFT_NOT_NEEDED)
    return r.out


def _derived(f, take, out: Converted) -> None:
    out.set("algo.objective", "sft")
    out.set("rollout.n", 1)
    per, accum = int(take("per_device_train_batch_size", 8)), int(take("gradient_accumulation_steps", 1))
    out.set("train.micro_batch", per)
    out.set("train.global_batch", per * accum)
    out.set("train.mini_batch", per * accum)
    out.notes.append(f"batch sizes for one process: train.global_batch={per * accum} (per device x accumulation); "
                     "with P processes multiply it by P (reasonrl's is global)")  # fmt: skip
    steps = take("max_steps", -1)
    if steps is not None and int(steps) > 0:
        out.set("train.steps", int(steps))
    elif (epochs := take("num_train_epochs")) is not None:
        out.notes.append(f"num_train_epochs={epochs}: reasonrl counts steps; set train.steps "
                         f"(epochs x rows / {per * accum} rows per step and process)")  # fmt: skip
    if take("lr_scheduler_type") == "cosine_with_min_lr":
        kwargs = take("lr_scheduler_kwargs") or {}
        out.set("train.min_lr_ratio", float(kwargs.get("min_lr_rate", 0.0)))
    if (every := take("save_steps")) is not None and take("save_strategy", "steps") != "no":
        out.set("checkpoint.every", int(every))
    if (every := take("eval_steps")) is not None and take("eval_strategy", "no") != "no":
        out.set("val.every", int(every))
    if "wandb" in (take("report_to") or []) or f.get("report_to") == "wandb":
        out.set("log.wandb", True)
    if take("bf16"):
        out.set("model.dtype", "bfloat16")
    if take("use_peft") and "rank" not in out.recipe.get("model", {}).get("lora", {}):
        out.set("model.lora.rank", 16)  # TRL's ModelConfig default lora_r
    if take("packing") or take("padding_free"):
        out.set("model.remove_padding", True)
        out.notes.append("packing -> model.remove_padding (length-sorted micro-batches cut to their longest row; "
                         "model.pack_tokens packs rows into sequences)")  # fmt: skip
    if take("completion_only_loss") is False:
        out.notes.append(
            "completion_only_loss=false (loss on the prompt too): the loss covers the response only"
        )
    if take("assistant_only_loss"):
        out.notes.append("assistant_only_loss: convert conversations with `reasonrl data prepare sft --option "
                         "turns=all` (every assistant turn trained, the other turns not)")  # fmt: skip
    if (field := take("dataset_text_field")) is not None:
        out.notes.append(f"dataset_text_field={field}: plain-text language modelling is not built; SFT rows "
                         "need a prompt and a response (`reasonrl data prepare sft`)")  # fmt: skip
    for key in ("chat_template", "chat_template_path", "eos_token"):
        if (value := take(key)) is not None:
            out.notes.append(f"{key}={str(value)[:40]!r}: set it in the model's own tokenizer files "
                             "(`reasonrl data chat-template` writes think-aware templates)")  # fmt: skip
    if "max_length" in f:
        out.notes.append(f"max_length={f['max_length']} (prompt + response) -> rollout.max_new_tokens (the response "
                         "alone; the prompt is bounded by data.max_prompt_tokens)")  # fmt: skip
