"""`reasonrl convert openrlhf SCRIPT`: OpenRLHF launch scripts (dotted flags since 2026-04, flat before)
as recipes with exact values, loaded by load_config; the shell they are written in (arrays, command
substitutions, variables); bad input named."""

from __future__ import annotations

import pytest
import yaml

from reasonrl.cli.main import main
from reasonrl.config import load_config
from reasonrl.config.foreign import convert
from reasonrl.config.sections import ConfigError
from reasonrl.config.shell import script_commands
from reasonrl.errors import InputError

# the shape of OpenRLHF's own examples/scripts/train_reinforce_baseline_hybrid_engine.sh (2026)
DOTTED = """#!/bin/bash
SCRIPT_DIR="$(dirname "$0")"
WORK_DIR=$(cd "$SCRIPT_DIR/../.." && pwd)
MODEL_PATH="Qwen/Qwen3-4B"
SAVE_PATH="runs/orl"
CKPT_ARGS=(
   --actor.model_name_or_path ${MODEL_PATH}
   # --reward.model_name_or_path ${REWARD_MODEL}
   --ckpt.output_dir ${SAVE_PATH}
   --ckpt.path "${SAVE_PATH}/ckpt"
   --ckpt.save_hf
   --ckpt.max_num 3
   --ckpt.save_steps 10
)
ROLLOUT_ARGS=(
   --data.prompt_dataset zhuzilin/dapo-math-17k
   --data.max_len 74240
   --rollout.max_new_tokens 6400
   --data.apply_chat_template
   --ds.packing_samples
   --rollout.batch_size 128
   --rollout.n_samples_per_prompt 8
   --train.batch_size 256
   --algo.dynamic_filtering_enable
   --algo.dynamic_filtering_range 0.0 1.0
   --train.dynamic_batch_enable
   --train.max_tokens_per_gpu 16192
   --train.micro_batch_size 1
   --train.max_epochs 1
   --eval.steps -1
)
OPTIMIZER_ARGS=(
   --algo.advantage.estimator reinforce_baseline
   --actor.adam.lr 5e-7
   --actor.eps_clip_low_high 0.2 0.27
   --algo.kl.init_coef 1e-4
   --algo.kl.use_loss
   --algo.kl.estimator k2
   --algo.advantage.is_correction_enable
   --algo.advantage.is_correction_type icepop
   --ds.lora.rank 16 --ds.lora.alpha 32
)
ray job submit --address="http://127.0.0.1:8265" \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   ${CKPT_ARGS[@]} \\
   "${ROLLOUT_ARGS[@]}" \\
   ${OPTIMIZER_ARGS[@]} \\
   --vllm.num_engines 2 --vllm.tensor_parallel_size 2 --vllm.gpu_memory_utilization 0.7 \\
   --ds.param_dtype bf16 --actor.gradient_checkpointing_enable \\
   --reward.remote_url ${WORK_DIR}/examples/python/math_reward_func.py \\
   --some.future_flag 3
"""

# the flat flags of OpenRLHF before 2026-04 (its README's REINFORCE++ / GRPO commands)
FLAT = """python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-1.5B --advantage_estimator group_norm \\
   --n_samples_per_prompt 4 --rollout_batch_size 16 --train_batch_size 32 --micro_train_batch_size 2 \\
   --prompt_max_len 512 --generate_max_len 256 --actor_learning_rate 5e-7 --init_kl_coef 0.01 \\
   --kl_target 0.05 --kl_horizon 5000 --bf16 --async_train --eval_steps 20 --eval_temperature 0.6 \\
   --eval_n_samples_per_prompt 8 --use_wandb "$WANDB_KEY" --wandb_project grpo --lr_scheduler cosine \\
   --normalize_reward --use_tensorboard logs/tb
"""


def _load(tmp_path, recipe):
    """The recipe loaded on this machine: HF engine (vLLM's options left out), float32."""
    rollout = {k: v for k, v in recipe.get("rollout", {}).items() if k != "engine_kwargs"}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({**recipe, "rollout": rollout}))
    return load_config(path, ["rollout.engine=hf", "model.dtype=float32"])


def test_a_dotted_script_with_arrays_becomes_a_recipe_that_loads(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(DOTTED)
    out = convert("openrlhf", script)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["model"] == {"path": "Qwen/Qwen3-4B", "remove_padding": True, "dtype": "bfloat16",
                          "gradient_checkpointing": True, "lora": {"alpha": 32.0, "rank": 16}}  # fmt: skip
    # 128 prompts x 8 = 1024 sequences a step; train.batch_size counts samples; a token budget per micro-batch
    want = {
        "global_batch": 1024,
        "mini_batch": 256,
        "micro_batch": 256,
        "micro_tokens": 16192,
        "epochs": 1,
        "lr": 5e-7,
    }
    assert {k: r["train"][k] for k in want} == want
    a = r["algo"]
    assert (a["adv_estimator"], a["policy_loss"], a["loss_agg"], a["clip_low"], a["clip_high"]) == (
        "reinforce_pp_baseline", "ppo_clip", "token_mean", 0.2, 0.27)  # fmt: skip
    assert a["kl"] == {"coef": 1e-4, "estimator": "k2"}  # --algo.kl.use_loss: a loss term, not in the reward
    assert a["off_policy"] == {"tis_mode": "token_mask", "tis_floor": 0.5, "tis_cap": 5.0}  # IcePop [0.5, 5]
    assert a["dynamic_sampling"] == {"enabled": True}
    assert r["rollout"] == {"max_new_tokens": 6400, "n": 8, "engine": "vllm",
                            "engine_kwargs": {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.7}}  # fmt: skip
    assert (r["checkpoint"], r["log"]["run_dir"], r["val"]) == (
        {"every": 10, "keep_last": 3},
        "runs/orl",
        {"every": 0},
    )
    # the reward function's path keeps its command substitution whole, as written, in one note
    assert (
        'reward.remote_url=$(cd "$(dirname "$0")/../.." && pwd)/examples/python/math_reward_func.py' in notes
    )
    assert "some.future_flag=3: no reasonrl equivalent, left out" in notes
    assert "reward.model_name_or_path" not in notes  # a commented-out line of the array
    assert "actor.num_" not in notes and "ds.zero_stage" not in notes
    # the reward function file, used as it is, its prompt rendered with the actor's chat template
    func = '$(cd "$(dirname "$0")/../.." && pwd)/examples/python/math_reward_func.py'
    assert r["reward"] == {"verifier": "openrlhf_function",
                           "options": {"openrlhf_function": {"path": func, "tokenizer": "Qwen/Qwen3-4B"}}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"reward.options.openrlhf_function: path .* no such file"):
        _load(tmp_path, r)  # (the script's command substitution is not run)
    (tmp_path / "math_reward_func.py").write_text("def reward_func(queries, prompts, labels, **kw):\n"
                                                 "    return {'rewards': [0.0] * len(queries)}\n")  # fmt: skip
    r["reward"]["options"]["openrlhf_function"]["path"] = str(tmp_path / "math_reward_func.py")
    cfg = _load(tmp_path, r)
    assert (cfg.train.global_batch, cfg.algo.adv_estimator, cfg.algo.off_policy.tis_mode) == (
        1024, "reinforce_pp_baseline", "token_mask")  # fmt: skip


def test_flat_flags_of_older_scripts_read_as_the_dotted_ones(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_KEY", raising=False)
    script = tmp_path / "old.sh"
    script.write_text(FLAT)
    out = convert("openrlhf", script)
    r, notes = out.recipe, "\n".join(out.notes)
    assert (r["model"]["path"], r["model"]["dtype"], r["algo"]["adv_estimator"]) == (
        "Qwen/Qwen2.5-1.5B", "bfloat16", "grpo")  # fmt: skip
    assert (r["train"]["global_batch"], r["train"]["mini_batch"], r["train"]["micro_batch"]) == (64, 32, 2)
    assert (r["rollout"]["max_new_tokens"], r["data"]["max_prompt_tokens"]) == (256, 512)
    # the KL in the reward (no --use_kl_loss), k1 (OpenRLHF's default), adaptive toward 0.05
    assert r["algo"]["kl"] == {"coef": 0.01, "estimator": "k1", "in_reward": True, "target": 0.05,
                               "horizon": 5000}  # fmt: skip
    # asynchronous training one batch ahead; reasonrl corrects stale samples, so a cap is added and noted
    assert r["rollout"]["max_staleness"] == 1 and r["algo"]["off_policy"] == {"tis_cap": 2.0}
    assert "train.async_enable without is_correction" in notes
    assert r["val"] == {"every": 20, "temperature": 0.6, "n": 8}
    assert r["log"]["wandb"] is True and r["log"]["wandb_project"] == "grpo"
    assert r["train"]["lr_schedule"] == "cosine" and "min_lr_ratio" not in r["train"]  # plain cosine: to 0
    assert (
        "reward.normalize_enable: not needed (it normalises a reward model's scores, and this run has none"
        in notes
    )
    assert "logger.tensorboard_dir: not needed (TensorBoard events go to the run directory" in notes
    cfg = _load(tmp_path, r)
    assert (cfg.algo.kl.target, cfg.rollout.max_staleness) == (0.05, 1)


def test_openrlhfs_defaults_where_the_script_is_silent(tmp_path):
    script = tmp_path / "min.sh"
    script.write_text("python -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m "
                      "--critic.model_name_or_path c --rollout.max_new_tokens 64\n")  # fmt: skip
    out = convert("openrlhf", script)
    r = out.recipe
    assert out.notes[0].startswith(
        "OpenRLHF's defaults where the file sets nothing: algo.advantage.estimator=gae"
    )
    assert (r["algo"]["adv_estimator"], r["algo"]["critic"]["model"], r["rollout"]["n"]) == ("gae", "c", 1)
    assert r["algo"]["kl"] == {"coef": 0.01, "estimator": "k1", "in_reward": True}
    t = r["train"]
    assert (t["lr"], t["betas"], t["warmup_ratio"], t["lr_schedule"], t["min_lr_ratio"], t["seed"]) == (
        1e-6, [0.9, 0.95], 0.03, "cosine", 0.1, 42)  # fmt: skip
    assert (t["global_batch"], t["mini_batch"], t["micro_batch"]) == (1024, 128, 1)


def test_estimators_kl_off_and_corrections(tmp_path):
    script = tmp_path / "e.sh"

    def run(flags: str):
        script.write_text(f"python -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m {flags}\n")
        return convert("openrlhf", script)

    assert run("--algo.advantage.estimator dr_grpo").recipe["algo"]["adv_kwargs"] == {"scale_by_std": False}
    assert run("--algo.advantage.estimator rloo").recipe["algo"]["adv_estimator"] == "rloo"
    assert run("--algo.advantage.estimator reinforce").recipe["algo"]["adv_estimator"] == "reinforce_pp"
    gae = run("--algo.advantage.gamma 0.99 --algo.advantage.lambd 0.95").recipe["algo"]
    assert gae["adv_kwargs"] == {"gamma": 0.99, "lam": 0.95}
    assert run("--algo.kl.init_coef 0").recipe["algo"]["kl"] == {"coef": 0.0}
    out = run("--actor.policy_loss_type gspo --algo.advantage.is_correction_enable "
              "--algo.advantage.is_correction_threshold 0.8 2.0")  # fmt: skip
    algo = out.recipe["algo"]
    assert (algo["policy_loss"], algo["loss_agg"], algo["off_policy"]) == (
        "gspo", "seq_mean_token_mean", {"tis_mode": "token_truncate", "tis_cap": 2.0})  # fmt: skip
    assert (
        "is_correction_type=tis clamps the token weights to [0.8, 2.0]; reasonrl's token_truncate caps them at 2.0 only"
        in out.notes
    )
    # seq-mask-tis: rows whose geometric-mean ratio r leaves [0.5, 5] out (k1 = -log r within [1/5, 2]),
    # token weights beside it
    seq = run("--algo.advantage.is_correction_enable --algo.advantage.is_correction_type seq-mask-tis")
    assert seq.recipe["algo"]["off_policy"] == {"tis_mode": "token_truncate", "tis_cap": 5.0,
                                                "reject": [{"mode": "seq_mean_k1", "high": 2.0, "low": 0.2}]}  # fmt: skip
    assert any("seq-mask-tis: its token weights are not capped" in n for n in seq.notes)
    assert dict(_load(tmp_path, seq.recipe).algo.off_policy.reject[0])["low"] == 0.2
    with pytest.raises(InputError, match="algo.advantage.estimator='ppo2': unknown"):
        run("--algo.advantage.estimator ppo2")
    with pytest.raises(InputError, match="a flag of the script cannot be converted"):
        run("--rollout.n_samples_per_prompt $UNSET_N_FOR_TEST")
    # the correction off: its threshold is not read (OpenRLHF does not use it), an unset variable is no error
    off = run("--algo.advantage.is_correction_threshold $UNSET_T_FOR_TEST")
    assert "off_policy" not in off.recipe["algo"] and not any("is_correction" in n for n in off.notes)


def test_bad_input_and_the_cli(tmp_path, capsys):
    script = tmp_path / "none.sh"
    script.write_text("echo training\npython train.py --lr 1\n")
    with pytest.raises(InputError, match="no `python -m openrlhf.cli.train_ppo_ray ...` command"):
        convert("openrlhf", script)
    good = tmp_path / "good.sh"
    good.write_text(FLAT)
    out = tmp_path / "recipe.yaml"
    assert main(["convert", "openrlhf", str(good), "-o", str(out)]) == 0
    assert out.read_text().startswith(f"# Converted by `reasonrl convert openrlhf {good}`")
    assert load_config(out, ["rollout.engine=hf", "model.dtype=float32"]).rollout.n == 4


def test_the_shell_reader_arrays_and_substitutions():
    text = """A=(--x 1 # a comment
   --y "two words"
)
B="$(dirname "$0")/../x"
run "${A[@]}" --z $B --w ${A[*]}
"""
    assert list(script_commands(text)) == [
        ["run", "--x", "1", "--y", "two words", "--z", '$(dirname "$0")/../x', "--w", "--x", "1", "--y",
         "two words"]]  # fmt: skip
