"""verl's SFT launch scripts (`-m verl.trainer.fsdp_sft_trainer`) become recipes with algo.objective=sft:
verl's GSM8K SFT example (extra_info.answer as the response, LoRA, the SFT trainer's own defaults), the
multi-turn one (a note on converting its messages), deprecated global micro-batches; the recipes load."""

from __future__ import annotations

from _convert import convert_text, load_recipe

# verl's examples/sft/gsm8k/run_qwen_05_peft.sh (2026-01), its command
GSM8K = """torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node \\
     -m verl.trainer.fsdp_sft_trainer \\
    data.train_files=$HOME/data/gsm8k/train.parquet \\
    data.val_files=$HOME/data/gsm8k/test.parquet \\
    data.prompt_key=extra_info \\
    data.response_key=extra_info \\
    optim.lr=1e-4 \\
    data.prompt_dict_keys=['question'] \\
    +data.response_dict_keys=['answer'] \\
    data.micro_batch_size_per_gpu=4 \\
    model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct \\
    trainer.default_local_dir=runs/sft \\
    trainer.project_name=gsm8k-sft \\
    trainer.experiment_name=gsm8k-sft-qwen-2.5-0.5b-instruct \\
    trainer.logger=console \\
    trainer.total_epochs=1 $@ \\
    model.lora_rank=32\\
    model.lora_alpha=16 \\
    model.target_modules=all-linear
"""
# examples/sft/multiturn/run_qwen_05_sp2.sh, its command
MULTITURN = """torchrun --nnodes=1 --nproc_per_node=$nproc_per_node -m verl.trainer.fsdp_sft_trainer \\
    data.train_files=data/multiturn/train.parquet data.val_files=data/multiturn/test.parquet \\
    data.multiturn.enable=true data.multiturn.messages_key=messages data.micro_batch_size=4 \\
    model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct trainer.total_training_steps=1 \\
    model.fsdp_config.cpu_offload=true trainer.n_gpus_per_node=2
"""


def _convert(tmp_path, text):
    return convert_text(tmp_path, "verl", text, "run.sh")


def test_verls_gsm8k_sft_example_becomes_an_sft_recipe(tmp_path):
    out = _convert(tmp_path, GSM8K)
    r = out.recipe
    assert r["algo"] == {"objective": "sft"} and r["rollout"] == {"n": 1, "max_new_tokens": 1024}
    assert r["data"]["response_key"] == "extra_info.answer"  # verl's gsm8k parquet: the worked answer
    assert r["model"]["lora"] == {"rank": 32, "alpha": 16.0, "target_modules": ["all-linear"]}
    t = r["train"]  # verl's SFT defaults where the script is silent: 256 rows a step, betas, decay, warm-up
    assert (t["global_batch"], t["mini_batch"], t["micro_batch"], t["lr"]) == (256, 256, 4, 1e-4)
    assert (t["betas"], t["weight_decay"], t["warmup_ratio"], t["lr_schedule"]) == (
        [0.9, 0.95],
        0.01,
        0.1,
        "cosine",
    )
    assert r["model"]["path"] == "Qwen/Qwen2.5-0.5B-Instruct" and r["model"]["gradient_checkpointing"] is True
    notes = "\n".join(out.notes)
    assert "trainer.total_epochs=1: reasonrl counts steps" in notes
    assert "data.max_length=1024 (prompt + response) -> rollout.max_new_tokens" in notes
    assert "left out" not in notes, notes  # every key of the script has a meaning here or a reason
    cfg = load_recipe(tmp_path, r, "train.steps=10")
    assert (cfg.algo.objective, cfg.rollout.n, cfg.data.response_key) == ("sft", 1, "extra_info.answer")
    assert (
        cfg.data.prompt_key == "extra_info.question"
    )  # verl's prompt: the question alone, as the user's message


def test_the_multiturn_example_notes_how_to_convert_its_messages(tmp_path):
    out = _convert(tmp_path, MULTITURN)
    r, notes = out.recipe, "\n".join(out.notes)
    assert "the data are conversations (messages): convert the files with `reasonrl data prepare sft --option " \
           "messages=messages --option turns=all`" in notes  # fmt: skip
    assert r["train"]["micro_batch"] == 2  # data.micro_batch_size=4 over 2 GPUs
    assert r["train"]["steps"] == 1 and r["train"]["cpu_offload"] is True
    assert "left out" not in notes, notes
    assert "response_key" not in r.get("data", {})


def test_a_response_column_of_an_sft_file_says_to_convert_it(tmp_path):
    out = _convert(tmp_path, "python -m verl.trainer.fsdp_sft_trainer data.train_files=t.parquet "
                             "data.prompt_key=question data.response_key=answer optim.lr=2e-5\n")  # fmt: skip
    notes = "\n".join(out.notes)
    assert "data.response_key=answer: a column of an SFT file: convert the files with `reasonrl data prepare " \
           "sft --option response=answer`" in notes  # fmt: skip
    assert "data.prompt_key=question: a column of an SFT file: convert the files with `reasonrl data prepare " \
           "sft --option prompt=question`" in notes  # fmt: skip
    assert out.recipe["train"]["lr"] == 2e-5 and out.recipe["algo"]["objective"] == "sft"


def test_an_rl_script_is_not_read_as_sft(tmp_path):
    out = _convert(tmp_path, "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
                             "actor_rollout_ref.rollout.n=4 data.train_batch_size=8\n")  # fmt: skip
    assert "objective" not in out.recipe.get("algo", {}) and out.recipe["train"]["global_batch"] == 32


# examples/sft/vlm/run_qwen3_vl_2b.sh's command (verl.trainer.sft_trainer: conversations, token budgets)
ENGINE = """torchrun --standalone --nnodes=1 --nproc-per-node=8 -m verl.trainer.sft_trainer \\
    data.train_files=train.parquet data.train_batch_size=96 data.max_length=2048 data.pad_mode=no_padding \\
    data.use_dynamic_bsz=True data.max_token_len_per_gpu=65536 model.path=Qwen/Qwen3-1.7B \\
    model.use_remove_padding=True optim.lr=2e-5 optim.min_lr=2e-6 optim.lr_decay_style=cosine \\
    engine.tensor_model_parallel_size=2 checkpoint.save_contents=[model,optimizer,extra] trainer.save_freq=4000
"""


def test_the_engine_based_sft_trainer_reads_conversations_and_token_budgets(tmp_path):
    out = _convert(tmp_path, ENGINE)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["train"]["micro_tokens"] == 65536 and r["train"]["min_lr_ratio"] == 0.1
    assert r["model"] == {"path": "Qwen/Qwen3-1.7B", "remove_padding": True, "gradient_checkpointing": True}
    assert r["train"]["global_batch"] == 96 and r["checkpoint"]["every"] == 4000
    assert "the data are conversations (messages)" in notes
    assert (
        "engine.tensor_model_parallel_size: not needed (FSDP2 wraps every decoder layer; Megatron's" in notes
    )
    assert "left out" not in notes, notes
