"""`reasonrl convert`: a verl launch script (read, never run) and a TRL GRPOConfig file become reasonrl
recipes that load, with every setting mapped to its reasonrl meaning (verl's prompt counts become
sequence counts, TRL's absolute CISPO cap a relative bound, ...) and a note for each one left out."""

from __future__ import annotations

import pytest
import yaml

from reasonrl.cli.main import main
from reasonrl.config import load_config
from reasonrl.config.foreign import convert, parse_value
from reasonrl.config.from_verl import verl_overrides
from reasonrl.errors import InputError

VERL_SCRIPT = r"""#!/usr/bin/env bash
set -xeuo pipefail
project_name='RL'
exp_name="grpo-${project_name}"   # a variable from a variable
n=8
max_response_length=$((1024 * 3))
DATA=${DATA:-"/data/gsm8k"}
touched=$(touch {marker})
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.norm_adv_by_std_in_grpo=False \
    data.train_files="['$DATA/train.parquet','$DATA/extra.parquet']" \
    data.val_files=$DATA/test.parquet \
    data.train_batch_size=32 \
    data.max_prompt_length=512 \
    data.max_response_length=${max_response_length} \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.optim.lr_warmup_steps=-1 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.actor.clip_ratio=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm \
    actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov \
    actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.0005 \
    actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.002 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=$n \
    actor_rollout_ref.rollout.top_k=-1 \
    algorithm.filter_groups.enable=True \
    algorithm.filter_groups.max_num_gen_batches=4 \
    algorithm.rollout_correction.rollout_is=sequence \
    algorithm.rollout_correction.rollout_is_threshold=2.5 \
    custom_reward_function.path={reward} \
    custom_reward_function.name=score_fn \
    +custom_reward_function.reward_kwargs.strict=true \
    trainer.logger='["console","wandb"]' \
    trainer.experiment_name="$exp_name" \
    trainer.total_training_steps=300 \
    trainer.save_freq=-1 \
    trainer.n_gpus_per_node=8 \
    trainer.some_new_knob=7 $@
"""


def _verl(tmp_path):
    reward = tmp_path / "score.py"
    reward.write_text("def score_fn(data_source, solution_str, ground_truth, extra_info=None, strict=False):\n"
                      "    return float(solution_str.strip() == ground_truth)\n")  # fmt: skip
    script = tmp_path / "run.sh"
    script.write_text(VERL_SCRIPT.replace("{reward}", str(reward)).replace("{marker}", str(tmp_path / "ran")))
    return script, reward


def test_a_verl_script_becomes_a_recipe_with_reasonrl_meanings(tmp_path):
    script, reward = _verl(tmp_path)
    out = convert("verl", script)
    r = out.recipe
    assert r["data"]["train_files"] == ["/data/gsm8k/train.parquet", "/data/gsm8k/extra.parquet"]
    assert r["data"]["val_files"] == ["/data/gsm8k/test.parquet"] and r["rollout"]["max_new_tokens"] == 3072
    # verl counts prompts per step and per mini-batch; reasonrl counts sequences (x rollout.n)
    assert (r["train"]["global_batch"], r["train"]["mini_batch"], r["train"]["micro_batch"]) == (256, 128, 4)
    assert (r["algo"]["clip_low"], r["algo"]["clip_high"]) == (0.2, 0.28)  # clip_ratio fills the unset side
    assert r["algo"]["kl"] == {"coef": 0.001, "estimator": "k3"} and r["algo"]["adv_kwargs"] == {
        "scale_by_std": False
    }
    assert r["algo"]["loss_agg"] == "seq_mean_token_sum_norm" and r["algo"]["policy_loss"] == "clip_cov"
    assert r["algo"]["loss_kwargs"] == {"clip_cov_ratio": 0.0005}  # kl_cov's ratio is not clip_cov's option
    assert r["algo"]["dynamic_sampling"] == {"enabled": True, "max_rounds": 3}
    assert r["algo"]["off_policy"] == {"tis_cap": 2.5, "tis_mode": "sequence_truncate"}
    assert r["reward"] == {"verifier": "verl_function",
                           "options": {"verl_function": {"path": str(reward), "name": "score_fn", "kwargs": {"strict": True}}}}  # fmt: skip
    assert (r["rollout"]["engine"], r["rollout"]["n"], r["rollout"]["top_k"]) == ("vllm", 8, 0)
    assert (r["train"]["steps"], r["train"]["warmup_steps"], r["checkpoint"]["every"]) == (300, 0, 0)
    assert r["name"] == "grpo-RL" and r["log"]["wandb"] is True and r["model"]["path"] == "Qwen/Qwen2.5-0.5B"
    # verl's own defaults where the script sets nothing (reasonrl's differ): the same run as verl's
    assert (r["train"]["weight_decay"], r["model"]["gradient_checkpointing"], r["model"]["remove_padding"]) == (
        0.01, True, True)  # fmt: skip
    notes = "\n".join(out.notes)
    assert (
        "verl's defaults where the file sets nothing: " in notes and "rollout.n" not in notes.split("\n")[0]
    )
    assert "algo.loss_kwargs.kl_cov_ratio=0.002: not an option of clip_cov, left out" in notes
    assert "trainer.some_new_knob=7: no reasonrl equivalent, left out" in notes
    assert "trainer.n_gpus_per_node: not needed (launch with torchrun --nproc-per-node N" in notes
    assert not (tmp_path / "ran").exists()  # the script was read, never run


def test_the_converted_recipes_load_and_the_cli_writes_them(tmp_path, capsys):
    script, _ = _verl(tmp_path)
    out = tmp_path / "recipe.yaml"
    assert main(["convert", "verl", str(script), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {out}; train it with: reasonrl train {out}" in err and "note: trainer.some_new_knob" in err
    assert out.read_text().startswith(f"# Converted by `reasonrl convert verl {script}`")
    cfg = load_config(out)  # the recipe reasonrl trains
    assert (cfg.train.global_batch, cfg.rollout.n, cfg.reward.verifier, cfg.algo.kl.coef) == (
        256,
        8,
        "verl_function",
        0.001,
    )
    assert main(["convert", "verl", str(script), "-o", str(out)]) == 2  # never over a file by accident
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert main(["convert", "verl", str(script), "-o", str(out), "--overwrite"]) == 0


TRL = """
model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct
dataset_name: trl-lib/DeepMath-103K
learning_rate: 1.0e-6
per_device_train_batch_size: 8
gradient_accumulation_steps: 4
steps_per_generation: 8
num_generations: 8
max_completion_length: 1024
max_steps: 500
beta: 0.04
loss_type: {loss_type}
epsilon_high: 4.0
scale_rewards: batch
use_vllm: true
bf16: true
warmup_steps: 0.05
report_to: [wandb]
sync_ref_model: true
ref_model_sync_steps: 100
use_bias_correction_kl: true
multi_objective_aggregation: normalize_then_sum
chat_template_kwargs: {{enable_thinking: false}}
logging_steps: 1
some_future_field: 3
"""


def test_a_trl_config_becomes_a_recipe_that_loads(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text(TRL.format(loss_type="cispo"))
    out = convert("trl", path)
    r = out.recipe
    # one process: the generation batch is per device x steps_per_generation, an update per device x accumulation
    assert (r["train"]["global_batch"], r["train"]["mini_batch"], r["train"]["micro_batch"]) == (64, 32, 8)
    # TRL's CISPO caps the weight at epsilon_high itself; reasonrl's bound is 1 + clip_high
    assert (r["algo"]["policy_loss"], r["algo"]["clip_high"], r["algo"]["loss_agg"]) == (
        "cispo",
        3.0,
        "token_mean",
    )
    assert (
        r["algo"]["adv_estimator"] == "gdpo" and "adv_kwargs" not in r["algo"]
    )  # TRL ignores scale_rewards then
    assert r["algo"]["kl"] == {
        "coef": 0.04,
        "importance_weighted": True,
        "ref_sync_steps": 100,
        "ref_sync_alpha": 0.6,
    }
    assert r["algo"]["off_policy"] == {
        "tis_mode": "sequence_mask",
        "tis_cap": 3.0,
    }  # TRL's defaults with vLLM
    assert (r["train"]["warmup_ratio"], r["model"]["dtype"], r["rollout"]["engine"]) == (
        0.05,
        "bfloat16",
        "vllm",
    )
    assert r["data"]["chat_template_kwargs"] == {"enable_thinking": False}
    # TRL's / transformers' defaults where the file sets nothing
    assert (r["train"]["lr_schedule"], r["model"]["gradient_checkpointing"]) == ("linear", True)
    notes = "\n".join(out.notes)
    assert (
        "with P processes multiply both by P" in notes
        and "some_future_field=3: no reasonrl equivalent" in notes
    )
    assert "dataset_name: not needed (data comes from local files" in notes
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(r))
    cfg = load_config(recipe, ["rollout.engine=hf"])  # (vLLM is an optional extra)
    assert (cfg.algo.policy_loss, cfg.algo.clip_high, cfg.train.global_batch) == ("cispo", 3.0, 64)


@pytest.mark.parametrize(
    "loss_type,loss,agg",
    [("grpo", "ppo_clip", "seq_mean_token_mean"), ("dr_grpo", "ppo_clip", "seq_mean_token_sum_norm"),
     ("dapo", "ppo_clip", "token_mean"), ("sapo", "sapo", "seq_mean_token_mean"),
     ("vespo", "vespo", "token_mean"), ("luspo", "ppo_clip", "seq_mean_token_sum")],
)  # fmt: skip
def test_trl_loss_types(tmp_path, loss_type, loss, agg):
    path = tmp_path / "grpo.yaml"
    text = TRL.format(loss_type=loss_type).replace("epsilon_high: 4.0", "epsilon_high: 0.28")
    path.write_text(text.replace("multi_objective_aggregation: normalize_then_sum\n", ""))
    r = convert("trl", path).recipe
    assert (r["algo"]["policy_loss"], r["algo"]["loss_agg"], r["algo"]["clip_high"]) == (loss, agg, 0.28)
    assert r["algo"]["adv_kwargs"] == {"std_scope": "batch"}  # scale_rewards: batch


def test_trl_luspo_and_vespo_as_their_papers_run_them(tmp_path):
    path = tmp_path / "grpo.yaml"
    base = TRL.format(loss_type="luspo").replace("multi_objective_aggregation: normalize_then_sum\n", "")
    path.write_text(base.replace("epsilon_high: 4.0\n", "importance_sampling_level: sequence\n"))
    out = convert("trl", path)
    # LUSPO: GSPO's sequence ratio, each sequence's loss times its length; TRL's epsilon default (0.2)
    algo = out.recipe["algo"]
    assert (algo["policy_loss"], algo["loss_agg"], algo["clip_low"], algo["clip_high"]) == (
        "gspo", "seq_mean_token_sum", 0.2, 0.2)  # fmt: skip
    assert not any("importance_sampling_level" in n for n in out.notes)
    path.write_text(
        TRL.format(loss_type="vespo").replace("epsilon_high: 4.0", "vespo_k_pos: 1.5\nvespo_lambda_neg: 2.5")
    )
    out = convert("trl", path)
    recipe = out.recipe
    assert recipe["algo"]["policy_loss"] == "vespo"
    # TRL's default sequence_mask is refused with vespo (by TRL too): the token-level mask instead
    assert recipe["algo"]["off_policy"]["tis_mode"] == "token_mask"
    assert "vllm_importance_sampling_mode=sequence_mask: TRL refuses it with vespo" in "\n".join(out.notes)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    cfg = load_config(tmp_path / "r.yaml", ["rollout.engine=hf"])  # the options reach the loss and load
    assert dict(cfg.algo.loss_kwargs) == {"k_pos": 1.5, "lambda_neg": 2.5}


def test_verl_gpg_and_kl_cov(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gpg "
                      "actor_rollout_ref.actor.policy_loss.loss_mode=gpg actor_rollout_ref.rollout.n=4\n")  # fmt: skip
    algo = convert("verl", script).recipe["algo"]
    assert (algo["adv_estimator"], algo["policy_loss"]) == ("gpg", "reinforce")
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov "
                      "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.002 "
                      "actor_rollout_ref.actor.policy_loss.ppo_kl_coef=1\n")  # fmt: skip
    algo = convert("verl", script).recipe["algo"]
    assert algo["policy_loss"] == "kl_cov" and algo["loss_kwargs"] == {"kl_cov_ratio": 0.002, "kl_coef": 1.0}


def test_values_scripts_and_bad_input():
    assert [parse_value(x) for x in ("1e-6", "3", "True", "null", "['a','b']", "x.parquet")] == [
        1e-06, 3, True, None, ["a", "b"], "x.parquet"
    ]  # fmt: skip
    o = verl_overrides(
        "lr=1e-6\nbs=$((4 * (2 + 1)))\npython3 -m verl.trainer.main_ppo a.b=$bs c.d=${lr} e.f=${nope:-7}\n"
    )
    assert o == {"a.b": 12, "c.d": 1e-06, "e.f": 7}
    assert verl_overrides("x=$((9 ** 9 ** 9))\nrun a.b=$x\n")["a.b"].startswith("$((9")  # never evaluated
    with pytest.raises(InputError, match="no verl overrides"):
        from reasonrl.config.from_verl import convert_verl

        convert_verl("echo hello\n")
    with pytest.raises(InputError, match="not a number .* a variable it does not set"):
        convert_verl(
            "python3 -m verl.trainer.main_ppo data.train_batch_size=$BS actor_rollout_ref.rollout.n=8\n"
        )
    kl = convert_verl(
        "run actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k3+\n"
    )
    assert kl.recipe["algo"]["kl"] == {"coef": 0.001} and "reasonrl's default k3 is used" in "\n".join(
        kl.notes
    )
    with pytest.raises(InputError, match="no such file"):
        convert("verl", "/nonexistent/run.sh")
    with pytest.raises(InputError, match="unknown source 'nemo'"):
        convert("nemo", "x")


def test_overrides_kept_in_variables_across_lines_and_commands_with_an_environment():
    # verl's larger examples build the command from multi-line quoted variables that append to themselves,
    # and run it with a variable set in front; a value naming itself must not expand forever
    script = """
ACTOR="
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=4"
EXTRA=""
if [[ $backend == "megatron" ]]; then
    ACTOR="$ACTOR actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"
else
    ACTOR="$ACTOR actor_rollout_ref.actor.fsdp_config.param_offload=True"
fi
PYTHONPATH=/opt/verl python3 -m verl.trainer.main_ppo data.train_batch_size=8 $ACTOR $EXTRA
"""
    o = verl_overrides(script)
    assert o == {"data.train_batch_size": 8, "actor_rollout_ref.actor.optim.lr": 1e-06,
                 "actor_rollout_ref.actor.ppo_mini_batch_size": 4,
                 "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 2,  # both branches are read
                 "actor_rollout_ref.actor.fsdp_config.param_offload": True}  # fmt: skip


def test_trl_lora_fields(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text("use_peft: true\nlora_r: 32\nlora_alpha: 64\ntop_k: null\n")
    out = convert("trl", path)
    assert out.recipe["model"]["lora"] == {"rank": 32, "alpha": 64.0}
    assert not any("top_k" in note for note in out.notes)  # null: TRL's default, nothing to say
    path.write_text("use_peft: true\n")
    assert convert("trl", path).recipe["model"]["lora"] == {"rank": 16}  # TRL's ModelConfig default
    path.write_text("lora_r: 32\n")  # without use_peft TRL ignores it
    out = convert("trl", path)
    assert "lora" not in out.recipe["model"] and "without use_peft=true" in "\n".join(out.notes)


def test_a_trl_file_that_is_not_a_mapping(tmp_path):
    bad = tmp_path / "grpo.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="not a YAML / JSON mapping of GRPOConfig fields"):
        convert("trl", bad)
    bad.write_text("per_device_train_batch_size: eight\n")
    with pytest.raises(InputError, match="a field is not a number where TRL expects one"):
        convert("trl", bad)


def test_verl_multi_turn_tools_other_engines_and_options_of_another_estimator(tmp_path):
    """verl's multi-turn tool calls turn on reasonrl's code tool; SGLang / TensorRT-LLM recipes get the vLLM
    engine; options the recipe's own estimator / loss / engine does not take (verl sets gamma beside GRPO,
    clip_ratio_c beside GSPO) are left out with a note, so the recipe loads; `${1:-d}` and `${X:+a}` expand
    as the shell would; use_kl_in_reward=False beside a KL loss is read, not reported as left out."""
    script = tmp_path / "run.sh"
    script.write_text(
        'ENGINE=${1:-sglang}\nNAME=run${SUFFIX:+"-x"}\n'
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo algorithm.gamma=1.0 "
        "actor_rollout_ref.actor.policy_loss.loss_mode=gspo actor_rollout_ref.actor.clip_ratio_c=10.0 "
        "actor_rollout_ref.rollout.name=$ENGINE actor_rollout_ref.rollout.n=4 trainer.experiment_name=$NAME "
        "actor_rollout_ref.actor.use_kl_loss=True algorithm.use_kl_in_reward=False "
        "actor_rollout_ref.rollout.multi_turn.enable=True actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5 "
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=100 "
        "actor_rollout_ref.rollout.multi_turn.tool_config_path=tools.yaml\n"
    )
    out = convert("verl", script)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["rollout"]["tools"] == {
        "enabled": True,
        "format": "hermes",
        "turn": "chat_template",  # verl renders a tool message with the model's chat template
        "max_calls": 4,
        "max_output_chars": 400,
    }
    assert r["rollout"]["engine"] == "vllm" and r["name"] == "run" and r["algo"]["policy_loss"] == "gspo"
    assert "adv_kwargs" not in r["algo"] and "loss_kwargs" not in r["algo"]
    assert "algo.adv_kwargs.gamma=1.0: not an option of grpo, left out" in notes
    assert "algo.loss_kwargs.clip_c=10.0: not an option of gspo, left out" in notes
    assert (
        "rollout.name=sglang -> rollout.engine=vllm" in notes
        and "the tools of tools.yaml are not read" in notes
    )
    assert "use_kl_in_reward" not in notes
    cfg_file = tmp_path / "r.yaml"
    cfg_file.write_text(yaml.safe_dump({k: v for k, v in r.items() if k != "model"}))
    cfg = load_config(cfg_file, ["rollout.engine=hf"])
    assert cfg.rollout.tools.enabled and cfg.rollout.tools.max_calls == 4


def test_a_shell_variable_left_in_a_recipe_is_a_config_error_naming_its_key(tmp_path):
    from reasonrl.config import ConfigError

    bad = tmp_path / "r.yaml"
    bad.write_text("model:\n  path: ${MODEL_HOME}/qwen\n")
    with pytest.raises(ConfigError, match="model.path: Interpolation key 'MODEL_HOME' not found"):
        load_config(bad)


def test_verl_micro_batches_deprecated_and_dynamic(tmp_path):
    script = tmp_path / "run.sh"
    base = ("python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
            "actor_rollout_ref.rollout.n=5 trainer.n_gpus_per_node=4 ")  # fmt: skip
    # the deprecated global micro-batch is over every GPU; reasonrl's is per rank
    script.write_text(base + "actor_rollout_ref.actor.ppo_micro_batch_size=40 actor_rollout_ref.actor.use_kl_loss=True "
                      "algorithm.kl_ctrl.kl_coef=0.001 critic.ppo_micro_batch_size_per_gpu=4\n")  # fmt: skip
    out = convert("verl", script)
    notes = "\n".join(out.notes)
    assert "kl_ctrl" not in notes  # the in-reward KL's coefficient, unused beside the KL loss (as in verl)
    assert (
        "critic.ppo_micro_batch_size_per_gpu: not needed (the critic's forwards use train.micro_batch"
        in notes
    )
    assert (out.recipe["train"]["mini_batch"], out.recipe["train"]["micro_batch"]) == (80, 10)
    assert "ppo_micro_batch_size=40 over 4 GPU(s) -> train.micro_batch=10" in "\n".join(out.notes)
    # with use_dynamic_bsz verl ignores the micro-batch size: the token budget cuts micro-batches
    script.write_text(base + "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3 "
                      "actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192\n")  # fmt: skip
    train = convert("verl", script).recipe["train"]
    assert (train["micro_batch"], train["micro_tokens"], train["mini_batch"]) == (80, 8192, 80)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(convert("verl", script).recipe))
    assert load_config(recipe, ["rollout.engine=hf"]).train.micro_batch == 80  # loads (3 does not divide 80)
    script.write_text(base + "trainer.balance_batch=False actor_rollout_ref.nccl_timeout=900 "
                      "actor_rollout_ref.actor.use_torch_compile=True actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096\n")  # fmt: skip
    out = convert("verl", script)
    train, model = out.recipe["train"], out.recipe["model"]
    assert (train["balance_tokens"], train["dist_timeout_s"], model["compile"]) == (False, 900.0, True)
    assert "micro_tokens" not in train and "ppo_max_token_len" not in "\n".join(
        out.notes
    )  # unused, as in verl


def test_verl_vllm_scheduler_limits_reach_the_engine_and_engine_modes_need_nothing(tmp_path):
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    script = tmp_path / "run.sh"
    rollout = "actor_rollout_ref.rollout."
    script.write_text(
        f"python3 -m verl.trainer.main_ppo {rollout}name=vllm {rollout}n=4 {rollout}max_num_seqs=1024 "
        f"{rollout}max_num_batched_tokens=16384 {rollout}enable_chunked_prefill=False {rollout}mode=async "
        f"{rollout}free_cache_engine=True {rollout}load_format=safetensors {rollout}layered_summon=True "
        "data.return_raw_chat=True critic.model.enable_gradient_checkpointing=True\n"
    )
    out = convert("verl", script)
    kwargs = out.recipe["rollout"]["engine_kwargs"]
    assert kwargs == {"max_num_seqs": 1024, "max_num_batched_tokens": 16384, "enable_chunked_prefill": False}
    ROLLOUT_ENGINES.check_kwargs("vllm", kwargs, where="rollout.engine_kwargs")  # the vLLM builder takes them
    notes = "\n".join(out.notes)
    assert "no reasonrl equivalent" not in notes
    for key in ("rollout.mode", "free_cache_engine", "load_format", "layered_summon", "return_raw_chat",
                "critic.model.enable_gradient_checkpointing"):  # fmt: skip
        assert f"{key}: not needed" in notes, key
