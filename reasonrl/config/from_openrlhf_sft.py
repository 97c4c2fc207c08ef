"""OpenRLHF's SFT launch scripts (`openrlhf.cli.train_sft`) as reasonrl recipes with `algo.objective:
sft` (trainer/sft.py).

Owns: the SFT flags' table (`OPENRLHF_SFT`; dotted flags, and the flat names of OpenRLHF before them),
its defaults (openrlhf/cli/train_sft.py) and the settings computed from several flags (the data files to
convert, batch sizes, LoRA, dtype). Does not own: reading the script (`config.from_openrlhf.openrlhf_args`),
what the readers share (`config.foreign`).
"""

from __future__ import annotations

from reasonrl.config.foreign import Converted, Reading, as_list, choice, off_if_negative
from reasonrl.config.from_openrlhf import SCHEDULES, openrlhf_args

# the flat names of OpenRLHF's SFT trainer before its dotted flags
FLAT_SFT = {
    "pretrain": "model.model_name_or_path", "dataset": "data.dataset", "input_key": "data.input_key",
    "output_key": "data.output_key", "apply_chat_template": "data.apply_chat_template",
    "input_template": "data.input_template", "multiturn": "data.multiturn", "max_len": "data.max_len",
    "max_samples": "data.max_samples", "eval_dataset": "eval.dataset", "train_batch_size": "train.batch_size",
    "micro_train_batch_size": "train.micro_batch_size", "max_epochs": "train.max_epochs", "seed": "train.seed",
    "learning_rate": "adam.lr", "adam_betas": "adam.betas", "l2": "adam.weight_decay", "max_norm": "max_norm",
    "lr_warmup_ratio": "lr_warmup_ratio", "lr_scheduler": "lr_scheduler", "min_lr_ratio": "min_lr_ratio",
    "gradient_checkpointing": "model.gradient_checkpointing_enable", "lora_rank": "ds.lora.rank",
    "lora_alpha": "ds.lora.alpha", "target_modules": "ds.lora.target_modules", "lora_dropout": "ds.lora.dropout",
    "packing_samples": "ds.packing_samples", "bf16": "ds.param_dtype", "param_dtype": "ds.param_dtype",
    "zero_stage": "ds.zero_stage", "adam_offload": "ds.adam_offload", "save_path": "ckpt.output_dir",
    "save_steps": "ckpt.save_steps", "max_ckpt_num": "ckpt.max_num", "eval_steps": "eval.steps",
    "logging_steps": "logger.logging_steps", "ckpt_path": "ckpt.path", "load_checkpoint": "ckpt.load_enable",
    "use_wandb": "logger.wandb.key", "wandb_project": "logger.wandb.project", "wandb_run_name": "logger.wandb.run_name",
    "flash_attn": "ds.attn_implementation", "attn_implementation": "ds.attn_implementation",
    "pretrain_mode": "model.pretrain_mode_enable",
}  # fmt: skip
OPENRLHF_SFT = {
    "model.model_name_or_path": ("model.path", str),
    "train.micro_batch_size": ("train.micro_batch", int),
    "train.seed": ("train.seed", int),
    "data.max_len": ("rollout.max_new_tokens", int),
    "adam.lr": ("train.lr", float),
    "adam.betas": ("train.betas", lambda v: [float(x) for x in as_list(v)]),
    "adam.weight_decay": ("train.weight_decay", float),
    "lr_warmup_ratio": ("train.warmup_ratio", float),
    "lr_scheduler": ("train.lr_schedule", choice(SCHEDULES, "lr_scheduler")),
    "max_norm": ("train.grad_clip", float),
    "model.gradient_checkpointing_enable": ("model.gradient_checkpointing", bool),
    "ds.lora.alpha": ("model.lora.alpha", float),
    "ds.lora.dropout": ("model.lora.dropout", float),
    "ds.lora.target_modules": ("model.lora.target_modules", lambda v: as_list(v)),
    "ds.adam_offload": ("train.cpu_offload", bool),
    "ckpt.save_steps": ("checkpoint.every", off_if_negative),
    "ckpt.max_num": ("checkpoint.keep_last", int),
    "ckpt.output_dir": ("log.run_dir", str),
    "eval.steps": ("val.every", off_if_negative),
    "logger.wandb.run_name": ("name", str),
}
# openrlhf/cli/train_sft.py's defaults where they differ from reasonrl's
OPENRLHF_SFT_DEFAULTS = {
    "train.batch_size": 128, "train.micro_batch_size": 8, "train.max_epochs": 2, "adam.lr": 5e-6,
    "adam.betas": [0.9, 0.95], "lr_warmup_ratio": 0.03, "lr_scheduler": "cosine_with_min_lr", "data.max_len": 2048,
    "data.input_key": "input",
}  # fmt: skip
CLUSTER = "launch with torchrun; FSDP2 wraps every decoder layer (DeepSpeed's settings have no meaning here)"
OPENRLHF_SFT_NOT_NEEDED = {
    "ds.zero_stage": CLUSTER, "ds.attn_implementation": "transformers picks the model's attention (sdpa)",
    "ckpt.load_enable": "resume with `reasonrl train RECIPE --resume`", "ckpt.path": "checkpoints go to log.run_dir",
    "ckpt.save_hf": "every checkpoint holds the Hugging Face model", "ckpt.disable_ds": None,
    "logger.logging_steps": "every step is logged", "data.max_samples": None, "local_rank": None,
    "data.input_key": None, "data.output_key": None, "data.apply_chat_template": None,  # read for the note
    "data.input_template": None, "data.multiturn": None,
    "ds.use_liger_kernel": "model.logprob_chunk computes log-probs without the [B, T, V] logits",
}  # fmt: skip


def convert_openrlhf_sft(text: str) -> Converted:
    given = openrlhf_args(text, "train_sft", FLAT_SFT)
    r = Reading("OpenRLHF's SFT trainer", given, OPENRLHF_SFT_DEFAULTS)
    r.apply(OPENRLHF_SFT)
    r.derive(lambda: _derived(r.values, r.take, r.out), what="a flag of the script cannot be converted",
             hint="; a variable it does not set?")  # fmt: skip
    r.leftovers(OPENRLHF_SFT_NOT_NEEDED, {"ds.": CLUSTER})
    return r.out


def _derived(o, take, out: Converted) -> None:
    out.set("algo.objective", "sft")
    out.set("rollout.n", 1)
    batch = int(take("train.batch_size"))
    out.set("train.global_batch", batch)  # one optimizer step a batch, as OpenRLHF's SFT trainer takes
    out.set("train.mini_batch", batch)
    if (dataset := take("data.dataset")) is not None:
        how = "--option turns=all" if o.get("data.multiturn") else (
            f"--option prompt={o.get('data.input_key')}"
            + (f" --option response={o['data.output_key']}" if o.get("data.output_key") else ""))  # fmt: skip
        out.notes.append(f"data.dataset={dataset}: data comes from local files: `reasonrl data prepare sft --input "
                         f"FILE {how} --out sft.parquet`, then set data.train_files")  # fmt: skip
    if (path := take("eval.dataset")) is not None:
        out.notes.append(f"eval.dataset={path}: convert it the same way and set data.val_files")
    if o.get("data.apply_chat_template") is not True and o.get("data.input_template"):
        out.notes.append(f"data.input_template={o['data.input_template']!r}: prompts go through the tokenizer's "
                         "chat template (a row with apply_chat_template false is used as it is)")  # fmt: skip
    if "data.max_len" in o:
        out.notes.append(f"data.max_len={o['data.max_len']} (prompt + response) -> rollout.max_new_tokens (the "
                         "response alone; the prompt is bounded by data.max_prompt_tokens)")  # fmt: skip
    if take("model.pretrain_mode_enable"):
        out.notes.append(
            "model.pretrain_mode_enable (loss on the prompt too): the loss covers the response only"
        )
    if (epochs := take("train.max_epochs")) is not None:
        out.notes.append(f"train.max_epochs={epochs}: reasonrl counts steps; set train.steps "
                         f"(epochs x rows / {batch} rows per step)")  # fmt: skip
    if take("lr_scheduler", "cosine_with_min_lr") == "cosine_with_min_lr":
        out.set("train.min_lr_ratio", float(take("min_lr_ratio", 0.1)))
    else:
        take("min_lr_ratio")
    if take("ds.packing_samples"):
        out.set("model.remove_padding", True)
    dtype = take("ds.param_dtype")
    if dtype in (True, "bf16"):
        out.set("model.dtype", "bfloat16")
    elif dtype is not None:
        out.notes.append(f"ds.param_dtype={dtype!r}: reasonrl trains in float32 or bfloat16; left as float32")
    if int(take("ds.lora.rank") or 0) > 0:
        out.set("model.lora.rank", int(o["ds.lora.rank"]))
    elif "model" in out.recipe:  # LoRA settings without a rank: every weight is trained
        out.recipe["model"].pop("lora", None)
    project, key = take("logger.wandb.project"), take("logger.wandb.key")
    if project is not None or key:
        out.set("log.wandb", True)
        if project is not None:
            out.set("log.wandb_project", str(project))
