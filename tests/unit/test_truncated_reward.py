"""ProRL's stop-properly penalty (`algo.shaping.truncated_reward`, OpenRLHF's stop_properly_penalty_coef):
the reward of a completion cut at max_new_tokens scaled (0..1) or replaced (negative), after the reward
map and the overlong penalty; the config checks and OpenRLHF's flag converted."""

from __future__ import annotations

import copy

import pytest
import torch
from test_trainer_step import _group
from test_trainer_step import test_bad_algo_fields_name_the_key as refused

from reasonrl.config import AlgoConfig, ShapingConfig
from reasonrl.config.foreign import convert
from reasonrl.trainer.batching import build_batch
from reasonrl.trainer.shaping import shape_batch, shape_rewards

SCORES, LENGTHS, CUT = (
    torch.tensor([1.0, 1.0, 0.5]),
    torch.tensor([3, 10, 10]),
    torch.tensor([False, True, True]),
)


@pytest.mark.parametrize(
    "shaping,expected",
    [
        ({"truncated_reward": 0.0}, [1.0, 0.0, 0.0]),  # ProRL v2's setting: no reward when cut off
        ({"truncated_reward": 0.5}, [1.0, 0.5, 0.25]),
        ({"truncated_reward": -0.5}, [1.0, -0.5, -0.5]),  # a fixed reward instead
        (
            {"truncated_reward": 0.5, "reward_map": [-5.0, 5.0]},
            [5.0, 2.5, 0.0],
        ),  # after the map: 0.5 x [5, 0]
        # after the overlong penalty (buffer 4 of 10: L=10 -> -1): 0.5 x [0, -0.5]
        ({"truncated_reward": 0.5, "overlong_buffer": 4}, [1.0, 0.0, -0.25]),
        ({}, [1.0, 1.0, 0.5]),  # off
    ],
)
def test_truncated_rewards_hand_computed(shaping, expected):
    out = shape_rewards(SCORES, LENGTHS, AlgoConfig(shaping=ShapingConfig(**shaping)), 10, CUT)
    torch.testing.assert_close(out, torch.tensor(expected), rtol=0, atol=1e-6)


def test_the_batch_is_shaped_by_its_finish_reasons_and_the_flags_are_required():
    groups = [_group("a", [1.0, 1.0, 0.0], lengths=[2, 4, 3], finish=["stop", "length", "stop"])]
    batch = build_batch(copy.deepcopy(groups), pad_id=0)
    metrics = shape_batch(batch, AlgoConfig(shaping=ShapingConfig(truncated_reward=0.0)), 4)
    assert batch.rewards.tolist() == [1.0, 0.0, 0.0]  # only the cut completion lost its reward
    assert metrics["reward/truncated_frac"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="needs the truncated flags"):
        shape_rewards(SCORES, LENGTHS, AlgoConfig(shaping=ShapingConfig(truncated_reward=0.0)), 10)


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["algo.shaping.truncated_reward=1.5"], "algo.shaping.truncated_reward must be in [0, 1]"),
        (["algo.adv_estimator=gdpo", "algo.shaping.truncated_reward=0"], "algo.shaping.truncated_reward"),
    ],
)
def test_bad_settings_name_the_key(overrides, needle):
    refused(overrides, needle)


def test_openrlhfs_stop_properly_penalty_converts(tmp_path):
    script = tmp_path / "prorl.sh"
    script.write_text("python -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m "
                      "--reward.stop_properly_penalty_coef 0.0\n")  # fmt: skip
    out = convert("openrlhf", script)
    assert out.recipe["algo"]["shaping"] == {"truncated_reward": 0.0}
    assert not any("stop_properly" in n for n in out.notes)
