"""OpenRLHF's SFT launch scripts (`openrlhf.cli.train_sft`) become recipes with algo.objective=sft: its
own example (dotted flags) and an older flat-flag one, with the data to convert named; the recipe loads."""

from __future__ import annotations

from _convert import convert_text, load_recipe

# OpenRLHF's examples/scripts/train_sft.sh (2026-04)
DOTTED = """read -r -d '' training_commands <<EOF
openrlhf.cli.train_sft \\
   --data.max_len 2048 \\
   --data.dataset Open-Orca/OpenOrca \\
   --data.input_key question \\
   --data.output_key response \\
   --train.batch_size 256 \\
   --train.micro_batch_size 2 \\
   --data.max_samples 500000 \\
   --model.model_name_or_path meta-llama/Meta-Llama-3-8B \\
   --ckpt.output_dir ./checkpoint/llama3-8b-sft \\
   --ckpt.save_steps -1 \\
   --logger.logging_steps 1 \\
   --eval.steps -1 \\
   --ds.zero_stage 2 \\
   --train.max_epochs 1 \\
   --ds.param_dtype bf16 \\
   --ds.attn_implementation flash_attention_2 \\
   --adam.lr 5e-6 \\
   --ckpt.load_enable \\
   --ds.packing_samples \\
   --model.gradient_checkpointing_enable
EOF
deepspeed --module $training_commands
"""
# the same trainer's flat flags (before 2026), a multi-turn LoRA run
FLAT = """deepspeed --module openrlhf.cli.train_sft --pretrain Qwen/Qwen2.5-1.5B --dataset chats.jsonl --multiturn \\
   --apply_chat_template --train_batch_size 64 --micro_train_batch_size 4 --learning_rate 1e-4 --lora_rank 16 \\
   --lora_alpha 32 --target_modules q_proj v_proj --max_len 4096 --bf16 --save_steps 100 --max_epochs 3 \\
   --lr_scheduler cosine --use_wandb KEY --wandb_project sft-runs
"""


def _convert(tmp_path, text):
    return convert_text(tmp_path, "openrlhf", text, "train_sft.sh")


def test_openrlhfs_sft_example_becomes_an_sft_recipe_that_loads(tmp_path):
    out = _convert(tmp_path, DOTTED)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["algo"] == {"objective": "sft"} and r["rollout"] == {"max_new_tokens": 2048, "n": 1}
    t = r["train"]
    assert (t["global_batch"], t["mini_batch"], t["micro_batch"], t["lr"]) == (256, 256, 2, 5e-6)
    assert (t["warmup_ratio"], t["lr_schedule"], t["min_lr_ratio"], t["betas"]) == (
        0.03,
        "cosine",
        0.1,
        [0.9, 0.95],
    )
    assert r["model"] == {"path": "meta-llama/Meta-Llama-3-8B", "gradient_checkpointing": True,
                          "remove_padding": True, "dtype": "bfloat16"}  # fmt: skip
    assert (
        r["checkpoint"]["every"] == 0
        and r["val"]["every"] == 0
        and r["log"]["run_dir"] == "./checkpoint/llama3-8b-sft"
    )
    assert ("data.dataset=Open-Orca/OpenOrca: data comes from local files: `reasonrl data prepare sft --input FILE "
            "--option prompt=question --option response=response --out sft.parquet`") in notes  # fmt: skip
    assert "data.max_len=2048 (prompt + response) -> rollout.max_new_tokens" in notes
    assert "train.max_epochs=1: reasonrl counts steps" in notes and "left out" not in notes, notes
    cfg = load_recipe(tmp_path, r, "train.steps=5", "log.run_dir=" + str(tmp_path / "run"))
    assert (cfg.algo.objective, cfg.train.global_batch, cfg.model.dtype) == ("sft", 256, "bfloat16")


def test_flat_flags_multiturn_and_lora(tmp_path):
    out = _convert(tmp_path, FLAT)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["model"]["path"] == "Qwen/Qwen2.5-1.5B" and r["train"]["lr"] == 1e-4
    assert r["model"]["lora"] == {"rank": 16, "alpha": 32.0, "target_modules": ["q_proj", "v_proj"]}
    assert (r["train"]["global_batch"], r["train"]["micro_batch"], r["checkpoint"]["every"]) == (64, 4, 100)
    assert "min_lr_ratio" not in r["train"] and r["train"]["lr_schedule"] == "cosine"  # plain cosine: to 0
    assert r["log"]["wandb"] is True and r["log"]["wandb_project"] == "sft-runs"
    assert "`reasonrl data prepare sft --input FILE --option turns=all --out sft.parquet`" in notes
    assert "left out" not in notes, notes
