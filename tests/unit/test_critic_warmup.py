"""algo.critic.warmup_steps: its config checks, and verl's trainer.critic_warmup / OpenRLHF's
critic.freezing_steps converted with each trainer's own step counting (the training itself:
tests/e2e/test_critic_warmup_train.py)."""

from __future__ import annotations

import pytest
import yaml

from reasonrl.config import ConfigError, load_config
from reasonrl.config.foreign import convert

VERL = ("python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
        "actor_rollout_ref.rollout.n=4 ")  # fmt: skip
ORL = "python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m "


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["algo.adv_estimator=gae", "algo.critic.warmup_steps=-1"], "algo.critic.warmup_steps must be >= 0"),
        (["algo.critic.warmup_steps=3"], "algo.critic.warmup_steps is only used by estimators with a critic"),
    ],
)
def test_bad_warmup_settings_name_the_key(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)


def test_warmup_loads_with_a_critic():
    assert (
        load_config(None, ["algo.adv_estimator=gae", "algo.critic.warmup_steps=3"]).algo.critic.warmup_steps
        == 3
    )
    assert load_config(None, ["algo.adv_estimator=gae"]).algo.critic.warmup_steps == 0


def _convert(tmp_path, source: str, text: str):
    script = tmp_path / "run.sh"
    script.write_text(text + "\n")
    return convert(source, script)


@pytest.mark.parametrize("warmup,frozen", [(0, None), (1, None), (2, 1), (10, 9)])
def test_verl_critic_warmup_counts_from_step_one(tmp_path, warmup, frozen):
    """verl updates the actor once global_steps (1 at the first step) >= critic_warmup."""
    out = _convert(tmp_path, "verl", VERL + f"algorithm.adv_estimator=gae trainer.critic_warmup={warmup}")
    assert out.recipe["algo"].get("critic", {}).get("warmup_steps") == frozen
    notes = "\n".join(out.notes)
    assert ("critic_warmup" in notes) == (frozen is not None)  # read, and noted only where it acts
    if frozen:
        assert (
            f"trainer.critic_warmup={warmup}: the policy is not updated in the first {frozen} step(s)"
            in notes
        )
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
        assert load_config(path, ["rollout.engine=hf"]).algo.critic.warmup_steps == frozen


def test_verl_critic_warmup_without_a_critic_is_noted_not_set(tmp_path):
    out = _convert(tmp_path, "verl", VERL + "algorithm.adv_estimator=grpo trainer.critic_warmup=3")
    assert "critic" not in out.recipe["algo"]
    assert (
        "trainer.critic_warmup=3: the first 2 step(s) update nothing there (no critic with grpo); left out"
        in (out.notes)
    )


@pytest.mark.parametrize("flag,frozen", [("", None), ("--critic.freezing_steps -1", None),
                                         ("--critic.freezing_steps 0", 1), ("--critic.freezing_steps 4", 5),
                                         ("--freezing_actor_steps 4", 5)])  # fmt: skip
def test_openrlhf_freezing_steps_count_from_step_zero(tmp_path, flag, frozen):
    """OpenRLHF trains the actor once global_step (0 at the first step) > freezing_steps (default -1)."""
    out = _convert(tmp_path, "openrlhf", ORL + flag)  # (gae: OpenRLHF's default estimator)
    assert out.recipe["algo"]["adv_estimator"] == "gae"
    assert out.recipe["algo"].get("critic", {}).get("warmup_steps") == frozen
    assert not any("freezing" in n and "no reasonrl equivalent" in n for n in out.notes)


def test_openrlhf_freezing_steps_with_group_norm_is_noted(tmp_path):
    out = _convert(
        tmp_path, "openrlhf", ORL + "--algo.advantage.estimator group_norm --critic.freezing_steps 2"
    )
    assert "critic" not in out.recipe["algo"]
    assert any(
        n.startswith("critic.freezing_steps=2: the first 3 step(s) update nothing there") for n in out.notes
    )
