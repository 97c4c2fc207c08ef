"""Each policy loss owns its clip defaults: `algo.policy_loss=gspo` alone trains with gspo's bounds,
not ppo_clip's 0.2 / 0.2; a recipe that sets algo.clip_* still wins."""

from __future__ import annotations

import inspect

import pytest

from reasonrl.algorithms import POLICY_LOSSES
from reasonrl.config import load_config
from reasonrl.trainer.step import loss_options


@pytest.mark.parametrize("loss", POLICY_LOSSES.names())
def test_the_loss_defaults_reach_it(loss):
    cfg = load_config(None, [f"algo.policy_loss={loss}"])
    opts = loss_options(cfg.algo)
    assert "clip_low" not in opts and "clip_high" not in opts  # so the function's defaults apply
    sig = inspect.signature(POLICY_LOSSES.get(loss)).parameters
    expected = {
        "ppo_clip": (0.2, 0.2),
        "gspo": (3e-4, 4e-4),
        "cispo": (1.0, 0.28),
        "gmpo": (0.4, 0.4),
        "sapo": (0.2, 0.2),
        "reinforce": (0.2, 0.2),
        "vespo": (0.2, 0.2),  # ignored: no clip
        "clip_cov": (0.2, 0.2),
        "kl_cov": (0.2, 0.2),  # ignored: unclipped surrogate
    }
    assert (sig["clip_low"].default, sig["clip_high"].default) == expected[loss]


def test_recipe_values_win():
    cfg = load_config(None, ["algo.policy_loss=gspo", "algo.clip_high=5e-4"])
    assert loss_options(cfg.algo) == {"clip_high": 5e-4}
