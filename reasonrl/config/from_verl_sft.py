"""verl's SFT launch scripts (`-m verl.trainer.fsdp_sft_trainer`, `verl.trainer.sft_trainer`) as reasonrl
recipes with `algo.objective: sft` (trainer/sft.py).

Owns: the SFT trainer's key table (`VERL_SFT`), its defaults (verl/trainer/config/sft_trainer.yaml) and
the settings computed from several keys (where a row's response is, batch sizes, epochs). Does not own:
reading the script (`config.from_verl.verl_overrides`), what the readers share (`config.foreign`).
"""

from __future__ import annotations

from reasonrl.config.foreign import Converted, Reading, as_list, choice, off_if_negative

SCHEDULES = {"cosine": "cosine", "constant": "constant", "wsd": "cosine"}
VERL_SFT = {
    "data.train_files": ("data.train_files", as_list),
    "data.val_files": ("data.val_files", as_list),
    "data.micro_batch_size_per_gpu": ("train.micro_batch", int),
    "data.max_length": ("rollout.max_new_tokens", int),
    "model.partial_pretrain": ("model.path", str),
    "model.path": ("model.path", str),  # (verl.trainer.sft_trainer's name for it)
    "model.use_remove_padding": ("model.remove_padding", bool),
    "model.enable_gradient_checkpointing": ("model.gradient_checkpointing", bool),
    "model.lora_rank": ("model.lora.rank", int),
    "model.lora_alpha": ("model.lora.alpha", float),
    "model.target_modules": ("model.lora.target_modules", as_list),
    "optim.lr": ("train.lr", float),
    "optim.betas": ("train.betas", list),
    "optim.weight_decay": ("train.weight_decay", float),
    "optim.lr_warmup_steps_ratio": ("train.warmup_ratio", float),
    "optim.clip_grad": ("train.grad_clip", float),
    "optim.lr_scheduler": ("train.lr_schedule", choice(SCHEDULES, "optim.lr_scheduler")),
    "optim.lr_decay_style": ("train.lr_schedule", choice(SCHEDULES, "optim.lr_decay_style")),
    "trainer.total_training_steps": ("train.steps", int),
    "trainer.save_freq": ("checkpoint.every", off_if_negative),
    "trainer.test_freq": ("val.every", off_if_negative),
    "trainer.max_ckpt_to_keep": ("checkpoint.keep_last", int),
    "trainer.seed": ("train.seed", int),
    "trainer.experiment_name": ("name", str),
    "trainer.project_name": ("log.wandb_project", str),
    "trainer.default_local_dir": ("log.run_dir", str),
    "trainer.logger": ("log.wandb", lambda v: "wandb" in as_list(v)),
}  # fmt: skip
# verl's SFT defaults where they differ from reasonrl's (a script that sets nothing trains with these)
VERL_SFT_DEFAULTS = {
    "data.train_batch_size": 256, "data.micro_batch_size_per_gpu": 4, "data.max_length": 1024,
    "data.prompt_key": "question", "data.response_key": "answer", "optim.lr": 1e-5, "optim.betas": [0.9, 0.95],
    "optim.weight_decay": 0.01, "optim.lr_warmup_steps_ratio": 0.1, "optim.lr_scheduler": "cosine",
    "model.enable_gradient_checkpointing": True, "trainer.total_epochs": 4,
}  # fmt: skip
VERL_SFT_NOT_NEEDED = {
    "data.truncation": "a response over rollout.max_new_tokens is cut there (rollout/truncated_frac)",
    "data.prompt_dict_keys": None,  # read with data.prompt_key
    "data.response_dict_keys": None,  # read with data.response_key
    "model.strategy": "FSDP2 under torchrun (train.engine: auto)",
    "model.fsdp_config.model_dtype": "model.dtype",
    "model.fsdp_config.wrap_policy.min_num_params": "FSDP2 wraps every decoder layer",
    "model.use_liger": "model.logprob_chunk computes log-probs without the [B, T, V] logits",
    "trainer.n_gpus_per_node": "launch with torchrun --nproc-per-node N (docs/distributed.md)",
    "trainer.nnodes": "launch with torchrun --nnodes N, or recipes/distributed/slurm.sh",
    "trainer.resume_mode": "resume with `reasonrl train RECIPE --resume`",
    "data.pad_mode": "model.remove_padding: micro-batches without padding",
    "optim.lr_warmup_init": None,  # read with optim.lr_warmup_steps_ratio
}
VERL_SFT_PREFIXES_NOT_NEEDED = {
    "checkpoint.": "checkpoints hold the HF model, optimizer and trainer state (docs/operations.md)",
    "engine.": "FSDP2 wraps every decoder layer; Megatron's tensor / pipeline / context parallelism is not built",
}


def convert_verl_sft(given: dict, messages: bool = False) -> Converted:
    """The recipe of an SFT script's overrides; `messages`: verl.trainer.sft_trainer (the engine-based
    trainer), whose data is always conversations."""
    r = Reading("verl's SFT trainer", given, VERL_SFT_DEFAULTS)
    r.apply(VERL_SFT)
    r.derive(lambda: _derived(r.values, r.take, r.out, set(given), messages),
             what="a setting of the script is not a number", hint="; a variable it does not set?")  # fmt: skip
    r.leftovers(VERL_SFT_NOT_NEEDED, VERL_SFT_PREFIXES_NOT_NEEDED)
    return r.out


def _field(take, key: str) -> tuple[str, str | None]:
    """(verl's column, the field inside it or None) of data.<key>_key and its <key>_dict_keys."""
    column = str(take(f"data.{key}_key"))
    inside = take(f"data.{key}_dict_keys")
    inside = as_list(inside) if inside is not None else []
    return column, (str(inside[0]) if inside else None)


def _derived(o, take, out: Converted, given: set[str], messages: bool) -> None:
    out.set("algo.objective", "sft")
    out.set("rollout.n", 1)
    batch = int(take("data.train_batch_size"))
    out.set("train.global_batch", batch)  # one optimizer step per batch, as verl's SFT trainer takes
    out.set("train.mini_batch", batch)
    micro = take("data.micro_batch_size")  # deprecated: over every GPU
    if micro is not None and "data.micro_batch_size_per_gpu" not in given:
        gpus = int(o.get("trainer.n_gpus_per_node", 1)) * int(o.get("trainer.nnodes", 1))
        out.set("train.micro_batch", max(1, int(micro) // gpus))
        out.notes.append(f"data.micro_batch_size={micro} over {gpus} GPU(s) -> train.micro_batch="
                         f"{max(1, int(micro) // gpus)}")  # fmt: skip
    if take("data.use_dynamic_bsz"):  # micro-batches cut by tokens
        out.set("train.micro_tokens", int(take("data.max_token_len_per_gpu", 8192)))
    else:
        take("data.max_token_len_per_gpu")
    if (min_lr := take("optim.min_lr")) is not None:
        out.set("train.min_lr_ratio", round(float(min_lr) / float(o["optim.lr"]), 12))
    if take("data.multiturn.enable") or messages:
        key = take("data.multiturn.messages_key") or take("data.messages_key") or "messages"
        take("data.prompt_key"), take("data.response_key")  # (single-turn settings: not read by verl either)
        out.notes.append(f"the data are conversations ({key}): convert the files with `reasonrl data prepare sft "
                         f"--option messages={key} --option turns=all` (every assistant turn trained, as verl does)")  # fmt: skip
    else:
        column, inside = _field(take, "response")
        if column == "extra_info" and inside:
            out.set("data.response_key", f"extra_info.{inside}")
        else:
            out.notes.append(f"data.response_key={column}: a column of an SFT file: convert the files with "
                             f"`reasonrl data prepare sft --option response={column}` (data.response_key then "
                             "stays extra_info.response)")  # fmt: skip
        column, inside = _field(take, "prompt")
        if column == "extra_info" and inside:
            out.set("data.prompt_key", f"extra_info.{inside}")  # as verl: that text as the user's message
        elif column != "prompt":
            out.notes.append(f"data.prompt_key={column}: a column of an SFT file: convert the files with "
                             f"`reasonrl data prepare sft --option prompt={column}` (the row's prompt then)")  # fmt: skip
    if "data.max_length" in o:
        out.notes.append(f"data.max_length={o['data.max_length']} (prompt + response) -> rollout.max_new_tokens "
                         "(the response alone; the prompt is bounded by data.max_prompt_tokens)")  # fmt: skip
    if take("model.fsdp_config.cpu_offload") or take("model.fsdp_config.offload_params"):
        out.set("train.cpu_offload", True)
    epochs = take("trainer.total_epochs")
    if epochs is not None and "trainer.total_training_steps" not in o:
        out.notes.append(f"trainer.total_epochs={epochs}: reasonrl counts steps; set train.steps "
                         f"(epochs x rows / {batch} rows per step)")  # fmt: skip
