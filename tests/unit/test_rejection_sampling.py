"""verl's rollout rejection sampling (`rejection_mask`, `algo.off_policy.reject_*`): every mode against
hand-computed divergences, several modes together, padding ignored, the loss masked by it, the config
checks and verl's settings converted."""

from __future__ import annotations

import pytest
import torch
import yaml
from test_algo_correction import _loss, _loss_batch
from test_trainer_step import test_bad_algo_fields_name_the_key as refused

from reasonrl.algorithms.correction import REJECT_MODES, check_criterion, rejection_mask
from reasonrl.config import AlgoConfig, OffPolicyConfig, load_config
from reasonrl.config.foreign import convert

T = torch.tensor
MASK = T([[True, True, True], [True, True, False]])


def _ratios(r):
    """old - sampler log-probs with the given ratios r = pi_old / pi_sampler (row 1's last one is padding)."""
    sampler = torch.full((2, 3), -2.0)
    return sampler + torch.log(T(r)), sampler


@pytest.mark.parametrize(
    "modes,high,low,kept",
    [
        # k1 = -log r: row 0 [-log 2, 0, log 2], row 1 [-log 1.5] x 2; bounds [log(1/1.8), log 1.8] = +-0.588
        (["token_k1"], 1.8, None, [[False, True, False], [True, True, False]]),
        # sums: row 0 0, row 1 -0.811 < log 0.5: the whole row out
        (["seq_sum_k1"], 2.0, None, [[True, True, True], [False, False, False]]),
        # means: row 0 0, row 1 -0.405 < log(1/1.4) = -0.336 (the geometric-mean filter)
        (["seq_mean_k1"], 1.4, None, [[True, True, True], [False, False, False]]),
        # an asymmetric ratio range [0.7, 2]: row 1's -0.405 >= log 0.7 = -0.357? no: out
        (["seq_mean_k1"], 2.0, 0.7, [[True, True, True], [False, False, False]]),
        (["seq_mean_k1"], 2.0, 0.6, [[True, True, True], [True, True, False]]),
        # k2 = (log r)^2 / 2: row 0 [0.240, 0, 0.240], row 1 0.082 x 2
        (["token_k2"], 0.1, None, [[False, True, False], [True, True, False]]),
        (["seq_sum_k2"], 0.2, None, [[False, False, False], [True, True, False]]),  # 0.480 / 0.164
        (["seq_mean_k2"], 0.1, None, [[False, False, False], [True, True, False]]),  # 0.160 / 0.082
        (["seq_max_k2"], 0.2, None, [[False, False, False], [True, True, False]]),  # 0.240 / 0.082
        # k3 = r - 1 - log r: row 0 [0.307, 0, 0.193], row 1 0.095 x 2
        (["token_k3"], 0.2, None, [[False, True, True], [True, True, False]]),
        (["seq_sum_k3"], 0.25, None, [[False, False, False], [True, True, False]]),  # 0.500 / 0.189
        (["seq_mean_k3"], 0.15, None, [[False, False, False], [True, True, False]]),  # 0.167 / 0.095
        (["seq_max_k3"], 0.2, None, [[False, False, False], [True, True, False]]),  # 0.307 / 0.095
        # two modes: a token stays only if both keep it
        (["token_k3", "seq_sum_k1"], 0.2, None, [[False, False, False], [False, False, False]]),
    ],
)
def test_rejection_modes_hand_computed(modes, high, low, kept):
    old, sampler = _ratios([[2.0, 1.0, 0.5], [1.5, 1.5, 1e6]])  # the padding's huge ratio must not count
    if modes == [
        "token_k3",
        "seq_sum_k1",
    ]:  # each criterion its own bounds (seq_sum_k1: ratios in [0.01, 0.2])
        criteria = [{"mode": "token_k3", "high": 0.2}, {"mode": "seq_sum_k1", "high": 0.2, "low": 0.01}]
    else:
        criteria = [{"mode": m, "high": high, **({"low": low} if low else {})} for m in modes]
    keep, m = rejection_mask(old, sampler, MASK, criteria)
    assert (keep & MASK).tolist() == kept
    rejected = sum(not k for row, mrow in zip(kept, MASK.tolist()) for k, v in zip(row, mrow) if v)
    assert float(m["rs_masked_frac"]) == pytest.approx(rejected / 5)


def test_every_mode_is_covered_and_bad_criteria_are_refused():
    assert set(REJECT_MODES) == {f"{w}_{k}" for w in ("token", "seq_sum", "seq_mean") for k in ("k1", "k2", "k3")} | {
        "seq_max_k2", "seq_max_k3"}  # fmt: skip
    old, sampler = _ratios([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    keep, m = rejection_mask(
        old, sampler, MASK, [{"mode": "seq_mean_k1", "high": 1.001}]
    )  # on-policy: all kept
    assert bool(keep[MASK].all()) and float(m["rs_masked_frac"]) == 0.0
    assert check_criterion({"mode": "token_k1", "high": 2}) == ("token_k1", 2.0, 0.5)  # low: 1 / high
    assert check_criterion({"mode": "seq_max_k3", "high": 0.1}) == ("seq_max_k3", 0.1, None)
    for bad, match in (({"mode": "seq_max_k1", "high": 2}, "unknown mode 'seq_max_k1'"),
                       ({"mode": "token_k2", "high": 0}, "high must be a number > 0"),
                       ({"mode": "token_k2", "high": 1, "low": 0.5}, "the k1 modes only"),
                       ({"mode": "token_k1", "high": 1, "low": 2}, r"low must be in \(0, high\)"),
                       ({"mode": "token_k1", "high": 1, "upper": 2}, "unknown key"),
                       ({"mode": "token_k2", "high": True}, "high must be a number > 0"),  # not a 1
                       ({"mode": "token_k1", "high": 2, "low": True}, r"low must be in \(0, high\)"),
                       ({"mode": "token_k1", "high": 2, "low": "0.5"}, r"low must be in \(0, high\)")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            rejection_mask(old, sampler, MASK, [bad])
    with pytest.raises(ValueError, match="no criterion"):
        rejection_mask(old, sampler, MASK, [])


def test_the_loss_drops_what_the_rejection_mask_rejects():
    b = _loss_batch()  # A = [+1, -1] per row, ratio 1 to the old log-probs: per-token loss -A
    b.sampler_logprobs = b.old_logprobs - torch.log(T([[3.0, 3.0], [1.1, 1.0]]))  # row 0 drifted far
    algo = AlgoConfig(off_policy=OffPolicyConfig(reject=[{"mode": "seq_mean_k1", "high": 2.0}]))
    loss, metrics, lp = _loss(algo, b)
    # row 0 (geometric mean 3 outside [0.5, 2]) out; row 1 kept: (+1 + 1) / 4 tokens
    assert loss.item() == pytest.approx(0.5, rel=1e-6)
    assert metrics["actor/rs_masked_frac"].item() == pytest.approx(0.5)
    loss.backward()
    assert lp.grad[0].abs().max().item() == 0.0 and lp.grad[1].abs().min().item() > 0
    plain, _, _ = _loss(AlgoConfig(), b)
    assert plain.item() == pytest.approx(0.0, abs=1e-7)  # without it: (-1 - 1 + 1 + 1) / 4


BAD = [
    (["algo.off_policy.reject=[{mode: seq_avg_k1, high: 2}]"], "algo.off_policy.reject[0]: unknown mode 'seq_avg_k1'"),
    (["algo.off_policy.reject=[{mode: token_k1}]"], "algo.off_policy.reject[0]: token_k1: high must be"),
    (["algo.off_policy.reject=[{mode: token_k1, high: 2}, {mode: seq_mean_k3, high: 0.1, low: 0.05}]"],
     "algo.off_policy.reject[1]: seq_mean_k3: low bounds the ratio of the k1 modes only"),
]  # fmt: skip


@pytest.mark.parametrize("overrides,needle", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_rejection_settings_name_the_key(overrides, needle):
    refused(overrides, needle)


def test_verl_rollout_rs_converts(tmp_path):
    script = tmp_path / "run.sh"
    base = ("python3 -m verl.trainer.main_ppo data.train_batch_size=8 actor_rollout_ref.rollout.n=4 "
            "actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 ")  # fmt: skip
    rc = "algorithm.rollout_correction."
    # verl's decoupled_geo_rs preset: the geometric-mean filter within +-0.1%
    script.write_text(base + f"{rc}rollout_rs=seq_mean_k1 {rc}rollout_rs_threshold=0.999_1.001\n")
    op = convert("verl", script).recipe["algo"]["off_policy"]
    assert op == {"reject": [{"mode": "seq_mean_k1", "high": 1.001, "low": 0.999}]}
    # decoupled_seq_is_rs: sequence IS weights and a rejection beside them; one k1 bound given: low = 1/high
    script.write_text(base + f"{rc}rollout_is=sequence {rc}rollout_is_threshold=2.0 {rc}rollout_rs=seq_sum_k1 "
                      f"{rc}rollout_rs_threshold=3.0\n")  # fmt: skip
    out = convert("verl", script)
    assert out.recipe["algo"]["off_policy"] == {"tis_cap": 2.0, "tis_mode": "sequence_truncate",
                                                "reject": [{"mode": "seq_sum_k1", "high": 3.0}]}  # fmt: skip
    # two criteria with one shared k3 bound
    script.write_text(base + f"{rc}rollout_rs=token_k3,seq_max_k3 {rc}rollout_rs_threshold=0.01\n")
    out = convert("verl", script)
    assert out.recipe["algo"]["off_policy"] == {"reject": [{"mode": "token_k3", "high": 0.01},
                                                           {"mode": "seq_max_k3", "high": 0.01}]}  # fmt: skip
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({k: v for k, v in out.recipe.items() if k != "model"}))
    loaded = load_config(recipe, ["rollout.engine=hf"]).algo.off_policy.reject
    assert [dict(c) for c in loaded] == [
        {"mode": "token_k3", "high": 0.01},
        {"mode": "seq_max_k3", "high": 0.01},
    ]
    # verl's example run_with_rollout_corr_multi_rs.sh: quoted, one threshold per criterion
    script.write_text(
        base + f"{rc}rollout_rs=\\'token_k1,seq_max_k2\\' {rc}rollout_rs_threshold=\\'0.6_1.6,2.5\\'\n"
    )
    out = convert("verl", script)
    assert out.recipe["algo"]["off_policy"] == {"reject": [{"mode": "token_k1", "high": 1.6, "low": 0.6},
                                                           {"mode": "seq_max_k2", "high": 2.5}]}  # fmt: skip
    # thresholds that do not fit their criteria: noted, left out
    for bad in ("0.5_2.0,0.1,3", "0.5_0.1"):
        script.write_text(base + f"{rc}rollout_rs=token_k1,seq_mean_k3 {rc}rollout_rs_threshold={bad}\n")
        out = convert("verl", script)
        assert "off_policy" not in out.recipe.get("algo", {}) and any(
            "rollout_rs_threshold" in n for n in out.notes
        )
    # the older API's token / sequence rejection is the *_mask TIS mode, as before
    script.write_text(base + f"{rc}rollout_rs=token {rc}rollout_rs_threshold=2.0\n")
    assert convert("verl", script).recipe["algo"]["off_policy"] == {"tis_cap": 2.0, "tis_mode": "token_mask"}
