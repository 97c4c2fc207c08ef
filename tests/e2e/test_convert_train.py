"""A verl launch script converted by `reasonrl convert` trains as it is: the recipe it writes runs two
steps of GRPO with a KL loss on verl-format parquet files with the tiny model, and its batch sizes are
the script's in sequences."""

from __future__ import annotations

import math

from reasonrl.cli.main import main
from reasonrl.config import load_config
from reasonrl.data.schema import write_problems
from reasonrl.data.tasks import generate
from reasonrl.trainer.loop import train

SCRIPT = """
DATA={data}
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$DATA/train.parquet \\
    data.val_files=$DATA/test.parquet \\
    data.train_batch_size=4 \\
    data.max_prompt_length=256 \\
    data.max_response_length=8 \\
    actor_rollout_ref.model.path={model} \\
    actor_rollout_ref.model.enable_gradient_checkpointing=False \\
    actor_rollout_ref.model.use_remove_padding=False \\
    actor_rollout_ref.actor.optim.lr=1e-3 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=2 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.01 \\
    actor_rollout_ref.actor.policy_loss.loss_mode=gspo \\
    actor_rollout_ref.rollout.name=hf \\
    actor_rollout_ref.rollout.n=4 \\
    trainer.logger=['console'] \\
    trainer.total_training_steps=2 \\
    trainer.default_local_dir={run} \\
    trainer.save_freq=-1 \\
    trainer.test_freq=-1
"""


def test_a_converted_verl_script_trains(tiny_model_dir, tmp_path):
    write_problems(
        tmp_path / "train.parquet", generate("arithmetic", 32, seed=0, difficulty=1, split="train")
    )
    write_problems(tmp_path / "test.parquet", generate("arithmetic", 4, seed=0, difficulty=1, split="test"))
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(data=tmp_path, model=tiny_model_dir, run=tmp_path / "run"))
    recipe = tmp_path / "recipe.yaml"
    assert main(["convert", "verl", str(script), "-o", str(recipe)]) == 0
    cfg = load_config(
        recipe, ["model.device=cpu", "log.progress=false", "log.tensorboard=false", "val.size=4"]
    )
    assert (cfg.train.global_batch, cfg.train.mini_batch, cfg.train.micro_batch) == (16, 8, 4)
    assert (cfg.algo.policy_loss, cfg.algo.kl.coef, cfg.train.steps) == ("gspo", 0.01, 2)
    history = train(cfg, log=lambda *_: None)["history"]
    assert [row["step"] for row in history] == [0, 1, 2]
    for row in history[1:]:
        assert math.isfinite(row["loss/total"]) and "loss/kl" in row
        assert row["rollout/batch_size"] == 16
    assert (tmp_path / "run" / "metrics.jsonl").is_file()
