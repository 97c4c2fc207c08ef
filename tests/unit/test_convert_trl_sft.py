"""TRL SFTConfig files become recipes with algo.objective=sft: open-r1's distillation config (cosine with
a floor, packing off, bf16, Liger), a LoRA one with TRL's defaults, the loss-scope notes; an SFT file is
told from a GRPO one by its fields; the recipes load."""

from __future__ import annotations

from _convert import convert_text, load_recipe

# open-r1's recipes/OpenR1-Distill-7B/sft/config_distill.yaml (2025-06)
OPEN_R1 = """
model_name_or_path: open-r1/Qwen2.5-Math-7B-RoPE-300k
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2
chat_template: "{%- if tools %}...{%- endif %}"
dataset_name: open-r1/Mixture-of-Thoughts
dataset_config: all
dataset_num_proc: 12
eos_token: <|im_end|>
bf16: true
do_eval: false
eval_strategy: 'no'
gradient_accumulation_steps: 8
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: false
hub_model_id: OpenR1-Distill-7B
hub_strategy: every_save
learning_rate: 4.0e-05
log_level: info
logging_steps: 1
logging_strategy: steps
lr_scheduler_type: cosine_with_min_lr
lr_scheduler_kwargs:
  min_lr_rate: 0.1
packing: false
max_grad_norm: 0.2
max_length: 32768
max_steps: -1
num_train_epochs: 5
output_dir: data/OpenR1-Distill-7B
overwrite_output_dir: true
per_device_eval_batch_size: 1
per_device_train_batch_size: 2
push_to_hub: true
report_to:
- wandb
save_strategy: epoch
save_total_limit: 1
seed: 42
use_liger_kernel: true
warmup_ratio: 0.03
"""


def _convert(tmp_path, text):
    return convert_text(tmp_path, "trl", text, "config.yaml")


def test_open_r1s_distillation_config_becomes_an_sft_recipe_that_loads(tmp_path):
    out = _convert(tmp_path, OPEN_R1)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["algo"] == {"objective": "sft"} and r["rollout"] == {"max_new_tokens": 32768, "n": 1}
    t = r["train"]
    assert (t["micro_batch"], t["mini_batch"], t["global_batch"], t["lr"]) == (2, 16, 16, 4e-5)
    assert (t["lr_schedule"], t["min_lr_ratio"], t["grad_clip"], t["warmup_ratio"]) == (
        "cosine",
        0.1,
        0.2,
        0.03,
    )
    assert r["model"] == {"path": "open-r1/Qwen2.5-Math-7B-RoPE-300k", "gradient_checkpointing": True,
                          "dtype": "bfloat16"}  # fmt: skip
    assert r["log"]["wandb"] is True and r["checkpoint"]["keep_last"] == 1 and r["train"]["seed"] == 42
    assert "num_train_epochs=5: reasonrl counts steps" in notes
    assert "eos_token='<|im_end|>': set it in the model's own tokenizer files" in notes
    assert "max_length=32768 (prompt + response) -> rollout.max_new_tokens" in notes
    assert (
        "chat_template='{%- if tools %}...{%- endif %}': set it in the model's own tokenizer files" in notes
    )
    assert "left out" not in notes, notes
    cfg = load_recipe(tmp_path, r, "train.steps=10", f"log.run_dir={tmp_path / 'run'}")
    assert (cfg.algo.objective, cfg.rollout.n, cfg.train.min_lr_ratio) == ("sft", 1, 0.1)


def test_lora_defaults_and_the_loss_scope_notes(tmp_path):
    out = _convert(tmp_path, "model_name_or_path: Qwen/Qwen2.5-0.5B\nuse_peft: true\nlora_r: 32\npacking: true\n"
                             "assistant_only_loss: true\ncompletion_only_loss: false\nmax_steps: 200\n")  # fmt: skip
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["train"]["lr"] == 2e-5 and r["train"]["lr_schedule"] == "linear" and r["train"]["steps"] == 200
    assert r["model"]["lora"] == {"rank": 32} and r["model"]["remove_padding"] is True
    assert (
        "assistant_only_loss: convert conversations with `reasonrl data prepare sft --option turns=all`"
        in notes
    )
    assert "completion_only_loss=false (loss on the prompt too): the loss covers the response only" in notes


def test_a_grpo_file_stays_grpo(tmp_path):
    out = _convert(tmp_path, "model_name_or_path: m\nnum_generations: 4\nmax_completion_length: 64\n"
                             "max_length: 512\nper_device_train_batch_size: 4\n")  # fmt: skip
    assert out.recipe.get("algo", {}).get("objective") is None and out.recipe["rollout"]["n"] == 4
