"""Reward models in recipes converted from TRL (`reward_model_name_or_path`, `reward_funcs`,
`reward_weights`), verl (`reward_model.enable`) and OpenRLHF (`--reward.model_name_or_path`,
`--reward_pretrain`): each trainer's way of combining the model with its other rewards, as reward.weights."""

from __future__ import annotations

import pytest
import yaml

from reasonrl.config import load_config
from reasonrl.config.foreign import convert
from reasonrl.errors import InputError


def _trl(tmp_path, text: str):
    path = tmp_path / "grpo.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen2.5-0.5B\n" + text)
    return convert("trl", path)


def test_trl_reward_model_first_then_its_functions_each_with_its_weight(tmp_path, user_module):
    out = _trl(
        tmp_path,
        """reward_model_name_or_path: Skywork/Skywork-Reward-V2-Qwen3-0.6B
reward_funcs: [accuracy_reward, think_format_reward, get_soft_overlong_punishment, my_lib_convert.custom]
reward_weights: [0.5, 1.0, 0.2, 0.3, 0.1]
""",
    )
    r = out.recipe
    assert r["reward"]["weights"] == {"correctness": 1.0, "reward_model": 0.5, "trl_function": 1.0}
    # the functions reasonrl has no term for: called as TRL calls them, with their own weights, token ids too
    assert r["reward"]["options"] == {
        "reward_model": {"path": "Skywork/Skywork-Reward-V2-Qwen3-0.6B"},
        "trl_function": {"functions": ["think_format_reward", "my_lib_convert.custom"], "weights": [0.2, 0.1],
                         "tokenizer": "Qwen/Qwen2.5-0.5B"},
    }  # fmt: skip
    assert r["algo"]["shaping"] == {"overlong_buffer": 256, "overlong_penalty": 0.3}
    notes = "\n".join(out.notes)
    assert "reward_funcs: think_format_reward, my_lib_convert.custom: called as TRL calls them" in notes
    assert "reward_funcs=" not in notes and "reward_weights=" not in notes  # read, not "left out"
    # the recipe loads where the run starts: the import path from there, as `trl grpo` imports it (the module's
    # name is the test's own: imports are cached per process)
    name = user_module("def custom(completions, **kwargs):\n    return [0.0]\n", "my_lib_convert")
    r["reward"]["options"]["trl_function"]["functions"][1] = f"{name}.custom"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(r))
    cfg = load_config(recipe)
    assert cfg.reward.weights == {"correctness": 1.0, "reward_model": 0.5, "trl_function": 1.0}


def test_trl_functions_without_an_accuracy_function_leave_correctness_logged_only(tmp_path):
    r = _trl(tmp_path, "reward_funcs: [think_format_reward]\n").recipe
    assert r["reward"]["weights"] == {"correctness": 0.0, "trl_function": 1.0}
    assert r["reward"]["options"]["trl_function"]["functions"] == ["think_format_reward"]
    out = _trl(
        tmp_path,
        "reward_funcs: [think_format_reward, a.b]\nmulti_objective_aggregation: normalize_then_sum\n",
    )
    assert out.recipe["algo"]["adv_estimator"] == "gdpo"  # GDPO normalises each function: said so
    assert any("GDPO normalises each reward function on its own" in n for n in out.notes)


def test_trl_reward_model_alone_is_the_reward_and_weights_default_to_one(tmp_path):
    r = _trl(tmp_path, "reward_model_name_or_path: ./rm\n").recipe
    assert r["reward"]["weights"] == {"correctness": 0.0, "reward_model": 1.0}  # correctness logged only
    r = _trl(tmp_path, "reward_funcs: [accuracy_reward, reasoning_accuracy_reward]\n").recipe
    assert r["reward"]["weights"] == {"correctness": 2.0}  # TRL adds both; both are the routed verifier
    assert "reward" not in _trl(tmp_path, "learning_rate: 1.0e-6\n").recipe


def test_trl_weights_that_do_not_match_the_functions_are_refused(tmp_path):
    with pytest.raises(InputError, match="reward_weights has 1 weights for 2 reward functions"):
        _trl(
            tmp_path,
            "reward_model_name_or_path: ./rm\nreward_funcs: [accuracy_reward]\nreward_weights: [1.0]\n",
        )


VERL = """python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct \\
    reward_model.enable={enable} \\
    reward_model.model.path=sfairXC/FsfairX-LLaMA3-RM-v0.1 \\
    reward_model.use_reward_loop=True \\
    reward_model.rollout.name=vllm \\
    reward_model.rollout.prompt_length=2048 \\
    reward_model.rollout.response_length=1024 \\
    reward_model.num_workers=8 {extra}
"""


def test_verl_reward_model_is_the_whole_reward(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(VERL.format(enable="True", extra="\\\n    reward_model.micro_batch_size_per_gpu=16"))
    out = convert("verl", path)
    r = out.recipe
    assert r["reward"]["weights"] == {"correctness": 0.0, "reward_model": 1.0}
    # its server's context (prompt + response) where max_length is not set
    assert r["reward"]["options"]["reward_model"] == {"path": "sfairXC/FsfairX-LLaMA3-RM-v0.1", "batch_size": 16,
                                                      "max_length": 3072}  # fmt: skip
    notes = "\n".join(out.notes)
    assert "reward_model.num_workers: not needed (the reward model runs in the trainer's process" in notes
    assert "no reasonrl equivalent" not in notes
    path.write_text(VERL.format(enable="True", extra="\\\n    reward_model.max_length=4096"))
    assert convert("verl", path).recipe["reward"]["options"]["reward_model"]["max_length"] == 4096
    path.write_text(VERL.format(enable="False", extra=""))
    assert "reward" not in convert("verl", path).recipe  # off: the keys are read, nothing is set
    path.write_text(VERL.format(enable="True", extra="").replace("reward_model.model.path=", "x.y="))
    with pytest.raises(InputError, match="reward_model.enable=true with no reward_model.model.path"):
        convert("verl", path)


def test_openrlhf_reward_model_rewards_alone_and_starts_gaes_critic(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B "
                    "--reward_pretrain OpenRLHF/rm-a,OpenRLHF/rm-b --advantage_estimator gae\n")  # fmt: skip
    out = convert("openrlhf", path)
    r = out.recipe
    assert r["reward"] == {"weights": {"correctness": 0.0, "reward_model": 1.0},
                           "options": {"reward_model": {"path": "OpenRLHF/rm-a", "format": "openrlhf"}}}  # fmt: skip
    assert r["algo"]["critic"]["model"] == "OpenRLHF/rm-a"  # OpenRLHF's default critic
    assert "1 more reward model(s) left out (OpenRLHF/rm-b)" in "\n".join(out.notes)
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B --reward_pretrain rm "
                    "--critic_pretrain critic --advantage_estimator gae --normalize_reward "
                    "--value_head_prefix value_head\n")  # fmt: skip
    out = convert("openrlhf", path)
    assert out.recipe["algo"]["critic"]["model"] == "critic"
    assert out.recipe["reward"]["options"]["reward_model"] == {  # scores normalised as OpenRLHF's flag asks
        "path": "rm",
        "format": "openrlhf",
        "normalize": True,
        "value_head_prefix": "value_head",
    }
    assert "normalize" not in "\n".join(out.notes) and "value_head" not in "\n".join(out.notes)
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B --reward_pretrain rm "
                    "--advantage_estimator reinforce_baseline\n")  # fmt: skip
    assert "model" not in convert("openrlhf", path).recipe["algo"].get("critic", {})
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B --reward_pretrain rm "
                    "--remote_rm_url http://rm:5000/get_reward\n")  # fmt: skip
    out = convert("openrlhf", path)  # the remote function or server scores, as in OpenRLHF
    assert "reward.model_name_or_path=rm: not used (the remote reward scores" in "\n".join(out.notes)
    assert out.recipe["reward"] == {"verifier": "openrlhf_remote",
                                    "options": {"openrlhf_remote": {"url": "http://rm:5000/get_reward"}}}  # fmt: skip
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B --remote_rm_url "
                    "/data/reward_func.py --apply_chat_template\n")  # fmt: skip
    assert convert("openrlhf", path).recipe["reward"] == {"verifier": "openrlhf_function", "options": {
        "openrlhf_function": {"path": "/data/reward_func.py", "tokenizer": "Qwen/Qwen3-4B"}}}  # fmt: skip
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B --agent_func_path agent.py\n"
    )
    out = convert("openrlhf", path)  # the agent's rewards alone (rollout.agent), as in OpenRLHF
    assert out.recipe["reward"] == {"verifier": "environment"}
    assert out.recipe["rollout"]["agent"] == {"path": "agent.py"}
