"""verl's bypass mode (algo.off_policy.bypass): the loss with the sampler's log-probs as the old ones (the
importance weights then come from the current policy), the config checks, and verl's settings converted
(the training itself: tests/e2e/test_bypass_train.py)."""

from __future__ import annotations

import pytest
import torch
import yaml
from test_algo_correction import _loss, _loss_batch

from reasonrl.config import AlgoConfig, ConfigError, OffPolicyConfig, load_config
from reasonrl.config.foreign import convert

T = torch.tensor


def _bypass_batch():
    """Current log-probs -1 everywhere; the sampler's below them by log w, w = [[2, 2], [1.5, 4]]; the
    old log-probs are the sampler's, as the trainer sets them in bypass mode. A = [+1, -1] by row."""
    b = _loss_batch()
    b.sampler_logprobs = b.old_logprobs - torch.log(T([[2.0, 2.0], [1.5, 4.0]]))
    current = b.old_logprobs.clone()
    b.old_logprobs = b.sampler_logprobs.clone()
    return b, current


def test_bypass_weights_a_ratio_free_loss_by_current_over_sampler():
    b, current = _bypass_batch()
    op = OffPolicyConfig(tis_cap=3.0, bypass=True)
    loss, metrics, lp = _loss(AlgoConfig(policy_loss="reinforce", off_policy=op), b, current)
    # reinforce: -A * logprob = +1 on row 0, -1 on row 1; weights [[2, 2], [1.5, 3 (capped)]]
    assert loss.item() == pytest.approx((2 + 2 - 1.5 - 3) / 4, rel=1e-6)
    loss.backward()  # d/d logprob of -A w logprob / 4 (the weights are detached)
    assert torch.allclose(lp.grad, T([[-0.5, -0.5], [0.375, 0.75]]), atol=1e-6)
    assert metrics["actor/is_capped_frac"].item() == pytest.approx(0.25)
    # decoupled, with these old log-probs: the weights are old / sampler = 1, the loss the plain one
    decoupled, _, _ = _loss(
        AlgoConfig(policy_loss="reinforce", off_policy=OffPolicyConfig(tis_cap=3.0)), b, current
    )
    assert decoupled.item() == pytest.approx(0.0, abs=1e-7)


def test_bypass_ppo_clip_ratio_is_to_the_sampler():
    b, current = _bypass_batch()
    loss, metrics, _ = _loss(AlgoConfig(off_policy=OffPolicyConfig(bypass=True)), b, current)
    # r = w: row 0 (A > 0) clipped at 1.2 -> -1.2 each; row 1 (A < 0): -min(-r, -clip(r)) = max(r, clip r)
    # = 1.5 and 4 (the lower clip does not bind for r > 1)
    assert loss.item() == pytest.approx((-1.2 - 1.2 + 1.5 + 4.0) / 4, rel=1e-6)
    assert metrics["actor/ratio_max"].item() == pytest.approx(4.0, rel=1e-6)
    assert metrics["actor/clipfrac_high"].item() == pytest.approx(0.5)


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["algo.off_policy.bypass=true", "rollout.top_p=0.9"], "with rollout.top_p < 1"),
        (["algo.off_policy.bypass=true", "rollout.top_k=1"], "with rollout.top_p < 1"),
        (["algo.off_policy.bypass=true", "rollout.min_p=0.05"], "with rollout.top_p < 1"),
        (["algo.off_policy.bypass=true", "algo.off_policy.tis_cap=2"], "ppo_clip's ratio is already"),
        (
            ["algo.off_policy.bypass=true", "algo.policy_loss=gspo", "algo.off_policy.tis_cap=2"],
            "gspo's ratio",
        ),
        (["rollout.max_staleness=1"], "or algo.off_policy.bypass=true"),
    ],
)
def test_bad_bypass_settings_name_the_key(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)


def test_bypass_settings_that_load():
    cfg = load_config(None, ["algo.off_policy.bypass=true", "rollout.max_staleness=2"])  # the ratio corrects
    assert cfg.algo.off_policy.bypass and cfg.algo.off_policy.tis_cap == 0
    pg = load_config(
        None, ["algo.off_policy.bypass=true", "algo.policy_loss=reinforce", "algo.off_policy.tis_cap=2"]
    )
    assert pg.algo.policy_loss == "reinforce" and pg.algo.off_policy.tis_cap == 2.0


VERL = ("python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
        "actor_rollout_ref.rollout.n=4 algorithm.adv_estimator=grpo ")  # fmt: skip
RC = "algorithm.rollout_correction."


def _verl(tmp_path, text: str):
    script = tmp_path / "run.sh"
    script.write_text(VERL + text + "\n")
    out = convert("verl", script)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    return out, load_config(recipe, ["rollout.engine=hf"])


def test_verl_bypass_presets_convert(tmp_path):
    # bypass_ppo_clip_geo_rs: PPO-clip against the sampler, a geometric-mean rejection, no weights
    out, cfg = _verl(tmp_path, f"{RC}bypass_mode=True {RC}rollout_is=null {RC}rollout_rs=seq_mean_k1 "
                               f"{RC}rollout_rs_threshold=0.999_1.001")  # fmt: skip
    op = cfg.algo.off_policy
    assert (op.bypass, op.tis_cap, cfg.algo.policy_loss) == (True, 0.0, "ppo_clip")
    assert [dict(c) for c in op.reject] == [{"mode": "seq_mean_k1", "high": 1.001, "low": 0.999}]
    assert not any("bypass" in n or "loss_type" in n for n in out.notes)
    # bypass_pg_is: REINFORCE with sequence weights current / sampler, truncated at 2
    out, cfg = _verl(tmp_path, f"{RC}bypass_mode=True {RC}loss_type=reinforce {RC}rollout_is=sequence")
    op = cfg.algo.off_policy
    assert (cfg.algo.policy_loss, op.bypass, op.tis_mode, op.tis_cap) == (
        "reinforce",
        True,
        "sequence_truncate",
        2.0,
    )
    # PPO-clip with rollout_is set: verl computes the weights for its metrics only
    out, cfg = _verl(tmp_path, f"{RC}bypass_mode=True {RC}rollout_is=token {RC}rollout_is_threshold=3.0")
    assert cfg.algo.off_policy.tis_cap == 0.0 and cfg.algo.off_policy.bypass
    assert any("rollout_is=token with bypass_mode and loss_type=ppo_clip" in n for n in out.notes)
    # bypass replaces the script's loss mode by its own two
    out, cfg = _verl(tmp_path, f"actor_rollout_ref.actor.policy_loss.loss_mode=gspo {RC}bypass_mode=True")
    assert cfg.algo.policy_loss == "ppo_clip"
    assert any("replaces actor_rollout_ref.actor.policy_loss.loss_mode=gspo" in n for n in out.notes)
    out, cfg = _verl(tmp_path, f"actor_rollout_ref.actor.policy_loss.loss_mode=vanilla {RC}bypass_mode=True "
                               f"{RC}loss_type=gpg")  # fmt: skip
    assert cfg.algo.policy_loss == "ppo_clip" and not any(
        "replaces" in n for n in out.notes
    )  # vanilla = ppo_clip
    assert f"{RC}loss_type='gpg' (verl knows ppo_clip and reinforce): ppo_clip used" in out.notes
    out, cfg = _verl(
        tmp_path, f"{RC}rollout_is=token {RC}rollout_is_threshold=3.0"
    )  # decoupled: the weights stay
    assert (cfg.algo.off_policy.tis_mode, cfg.algo.off_policy.tis_cap, cfg.algo.off_policy.bypass) == (
        "token_truncate", 3.0, False)  # fmt: skip
    out, _ = _verl(tmp_path, f"{RC}bypass_mode=False {RC}loss_type=reinforce")  # decoupled: loss_type unused
    assert (
        "bypass" not in out.recipe["algo"].get("off_policy", {})
        and out.recipe["algo"].get("policy_loss") != "reinforce"
    )
