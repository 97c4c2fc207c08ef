"""Adaptive entropy control (Skywork-OR1, TRL's use_adaptive_entropy): the coefficient's walk toward the
target entropy, the gate on the bonus, the saved state, the recipe checks and TRL's fields."""

from __future__ import annotations

import pytest

from reasonrl.config import ConfigError, load_config
from reasonrl.trainer.entropy_control import EntropyControl


def _control(*extra):
    return EntropyControl(load_config(None, ["algo.entropy_control.enabled=true", *extra]).algo)


def test_the_coefficient_walks_by_delta_within_its_bounds_and_gates_the_bonus():
    c = _control("algo.entropy_coef=0.01", "algo.entropy_control.target=0.5", "algo.entropy_control.delta=0.004",
                 "algo.entropy_control.coef_max=0.02")  # fmt: skip
    assert c.applied() == 0.0  # nothing measured yet: no bonus
    seen = []
    for h in (0.4, 0.3, 0.45, 0.5, 0.7, 0.9, 0.9, 0.9, 0.9, 0.2):
        c.update(h)
        seen.append((round(c.coef, 6), round(c.applied(), 6)))
    # at or below 0.5: up by 0.004 (to at most 0.02), and applied; above: down (to at least 0), not applied
    assert [x for x, _ in seen] == [0.014, 0.018, 0.02, 0.02, 0.016, 0.012, 0.008, 0.004, 0.0, 0.004]
    assert [a for _, a in seen] == [0.014, 0.018, 0.02, 0.02, 0.0, 0.0, 0.0, 0.0, 0.0, 0.004]
    again = _control()
    again.load_state_dict(c.state_dict())
    assert (again.coef, again.last_entropy, again.applied()) == (c.coef, 0.2, 0.004)


def test_off_it_is_the_fixed_coefficient():
    c = EntropyControl(load_config(None, ["algo.entropy_coef=0.03"]).algo)
    c.update(0.0)
    assert not c.enabled and c.coef == 0.03 and c.applied() == 0.03


@pytest.mark.parametrize("bad", ["target=0", "delta=-0.1", "coef_min=0.5", "coef_min=-1"])
def test_bad_settings_name_the_section(bad):
    with pytest.raises(ConfigError, match="algo.entropy_control needs target > 0, delta > 0"):
        load_config(None, ["algo.entropy_control.enabled=true", "algo.entropy_control.coef_max=0.3",
                           f"algo.entropy_control.{bad}"])  # fmt: skip


def test_trl_adaptive_entropy_fields_convert(tmp_path):
    from reasonrl.config.foreign import convert

    path = tmp_path / "grpo.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen2.5-0.5B\nentropy_coef: 0.002\nuse_adaptive_entropy: true\n"
                    "entropy_target: 0.3\nentropy_coef_delta: 0.001\nentropy_coef_max: 0.05\n")  # fmt: skip
    algo = convert("trl", path).recipe["algo"]
    assert algo["entropy_coef"] == 0.002
    assert algo["entropy_control"] == {"enabled": True, "target": 0.3, "delta": 0.001, "coef_max": 0.05}
