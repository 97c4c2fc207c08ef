"""verl's multi-turn interaction example (`examples/sglang_multiturn/run_qwen2.5-0.5b_gsm8k_multiturn_w_interaction.sh`)
converted in verl's repository layout: the Hydra config file the script names (`--config-path
$PROJECT_DIR/... --config-name NAME`) is read under the script's overrides, the interaction configuration
found by its path's tail, Gsm8kInteraction becomes rollout.interaction with verl's turn limits, and the
recipe loads."""

from __future__ import annotations

from _convert import load_recipe

from reasonrl.config.foreign import convert

# verl's examples/sglang_multiturn/config/gsm8k_multiturn_grpo_w_interaction.yaml
CONFIG = """hydra:
  searchpath:
    - file://verl/trainer/config

defaults:
  - ppo_trainer
  - _self_

data:
  max_prompt_length: 1024
  max_response_length: 1024
  train_batch_size: 256
  return_raw_chat: True

actor_rollout_ref:
  hybrid_engine: True
  rollout:
    name: sglang
    multi_turn:
      enable: True
      max_user_turns: 5
"""
INTERACTION = """interaction:
  - name: "gsm8k"
    class_name: "verl.interactions.gsm8k_interaction.Gsm8kInteraction"
    config: {}
"""
# the script, trimmed to the settings that matter here
SCRIPT = """set -x
PROJECT_DIR="$(pwd)"
CONFIG_PATH="$PROJECT_DIR/examples/sglang_multiturn/config"
python3 -m verl.trainer.main_ppo \\
    --config-path="$CONFIG_PATH" \\
    --config-name='gsm8k_multiturn_grpo_w_interaction' \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=512 \\
    data.max_response_length=$((1024 * 3)) \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
    actor_rollout_ref.rollout.n=8 {extra}\\
    actor_rollout_ref.rollout.multi_turn.interaction_config_path="$PROJECT_DIR/examples/sglang_multiturn/config/interaction_config/gsm8k_interaction_config.yaml"
"""


def _layout(tmp_path, extra: str = "", config: str | None = CONFIG, interaction: str | None = INTERACTION):
    """verl's repository: the script in examples/sglang_multiturn, its configs under config/."""
    here = tmp_path / "verl" / "examples" / "sglang_multiturn"
    (here / "config" / "interaction_config").mkdir(parents=True)
    if config is not None:
        (here / "config" / "gsm8k_multiturn_grpo_w_interaction.yaml").write_text(config)
    if interaction is not None:
        (here / "config" / "interaction_config" / "gsm8k_interaction_config.yaml").write_text(interaction)
    script = here / "run_qwen2.5-0.5b_gsm8k_multiturn_w_interaction.sh"
    script.write_text(SCRIPT.format(extra=extra))
    return convert("verl", script)


def test_the_interaction_example_converts_with_its_config_file(tmp_path):
    out = _layout(tmp_path)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["rollout"]["interaction"] == {"enabled": True, "max_turns": 6}  # 5 user turns: 6 attempts
    assert "tools" not in r["rollout"]  # the turns are the interaction's, not a tool's
    # the file's settings under the script's: its max_response_length 1024 lost to the script's 3072, its
    # train_batch_size 256 to 512; its max_prompt_length kept
    assert r["rollout"]["max_new_tokens"] == 3072 and r["train"]["global_batch"] == 512 * 8
    assert r["data"]["max_prompt_tokens"] == 1024
    assert "read verl's config file gsm8k_multiturn_grpo_w_interaction.yaml" in notes
    assert "decay=0.5 per retry (1.0: verl's)" in notes and "has no reasonrl equivalent" not in notes
    cfg = load_recipe(tmp_path, {k: v for k, v in r.items() if k not in ("model", "data")})
    assert cfg.rollout.interaction.enabled and cfg.rollout.interaction.max_turns == 6
    assert not cfg.rollout.tools.enabled


def test_turn_limits_and_what_is_not_here_are_noted(tmp_path):
    out = _layout(tmp_path / "a", extra="actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3 ")
    assert out.recipe["rollout"]["interaction"]["max_turns"] == 3  # the fewer of 3 and 5 + 1
    out = _layout(tmp_path / "b", config=None, interaction=None)
    notes = "\n".join(out.notes)
    assert "verl's config file gsm8k_multiturn_grpo_w_interaction.yaml is not here" in notes
    assert (
        "interaction_config_path=" in notes and "not here; rollout.interaction gives the verifier's" in notes
    )
    assert out.recipe["rollout"]["interaction"]["max_turns"] == 4  # no limit read: 4, noted
    assert "max_user_turns unset" in notes
    other = INTERACTION.replace(
        "gsm8k_interaction.Gsm8kInteraction", "weather_interaction.WeatherInteraction"
    )
    out = _layout(tmp_path / "c", interaction=other)  # another class: run as it is
    assert "interaction WeatherInteraction runs as it is (rollout.interaction.verl_config" in "\n".join(
        out.notes
    )
    assert out.recipe["rollout"]["interaction"]["verl_config"].endswith("gsm8k_interaction_config.yaml")


def test_verls_own_trainer_configs_are_its_defaults_and_qwen_is_hermes(tmp_path):
    """`--config-name=ppo_megatron_trainer.yaml` is verl's own (no note); a config file's multi_turn
    `format: qwen` (verl's earlier name for Qwen's <tool_call>s, in its search example) is hermes."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-path=config --config-name=ppo_megatron_trainer.yaml "
                      "algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4\n")  # fmt: skip
    assert not any("config file" in n for n in convert("verl", script).notes)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "search.yaml").write_text(
        "actor_rollout_ref:\n  rollout:\n    multi_turn: {enable: True, max_assistant_turns: 2, format: qwen}\n"
    )
    script.write_text("python3 -m verl.trainer.main_ppo --config-path=config --config-name=search "
                      "algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=4\n")  # fmt: skip
    tools = convert("verl", script).recipe["rollout"]["tools"]
    assert tools["format"] == "hermes" and tools["max_calls"] == 1
