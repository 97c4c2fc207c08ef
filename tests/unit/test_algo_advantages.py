"""Advantage estimators: hand-computed examples (intermediate values in comments), adversarial rows
(singleton groups, constant groups, interleaved / non-contiguous group ids), and the registry API."""

from __future__ import annotations

import pytest
import torch
from _tolerance import close

from reasonrl.algorithms import ADVANTAGES
from reasonrl.algorithms.advantages import gae, group_stats
from reasonrl.algorithms.kl import fold_kl_into_rewards
from reasonrl.registry import RegistryError

T = torch.tensor


def test_group_stats_interleaved_ids():
    # groups 7: [2, 1] mean 1.5, var ((.5)^2+(.5)^2)/1 = .5, std .707107 ; 3: [0, 4, 2] mean 2,
    # var (4+4+0)/2 = 4, std 2 ; 9: [5] singleton, std 0
    r = T([2.0, 0.0, 1.0, 4.0, 2.0, 5.0])
    g = T([7, 3, 7, 3, 3, 9])
    mean, std, count = group_stats(r, g)
    close(mean, [1.5, 2.0, 1.5, 2.0, 2.0, 5.0])
    close(std, [0.707107, 2.0, 0.707107, 2.0, 2.0, 0.0])
    close(count, [2.0, 3.0, 2.0, 3.0, 3.0, 1.0])


# rows: (name, options, rewards, group_ids, expected)
CASES = [
    # grpo, group 0 = [1,0,0,1]: mean .5, unbiased var (4 * .25)/3 = 1/3, std .577350 -> +-.5/.577350
    # group 1 = [1,1]: std 0 -> 0/(0+eps) = 0 ; group 2 singleton -> 0
    (
        "grpo",
        {},
        [1, 0, 0, 1, 1, 1, 0.5],
        [0, 0, 0, 0, 1, 1, 2],
        [0.866025, -0.866025, -0.866025, 0.866025, 0, 0, 0],
    ),
    # grpo on a pair [0, 1]: mean .5, var (.25 + .25)/1 = .5, std .707107 -> +-.707107 ; with eps=1:
    # +-.5/1.707107 = +-.292893 ; rewards 1e-7 apart: std 7.0711e-8 is below the default eps 1e-6, so
    # the advantage stays small (+-5e-8/1.070711e-6 = +-.046698) instead of blowing up to +-.707107
    ("grpo", {}, [0, 1], [3, 3], [-0.707107, 0.707107]),
    ("grpo", {"eps": 1.0}, [0, 1], [3, 3], [-0.292893, 0.292893]),
    ("grpo", {}, [0, 1e-7], [3, 3], [-0.046698, 0.046698]),
    # grpo asymmetric group [2, 0, 1]: mean 1, deviations [1, -1, 0], var 2/2 = 1 -> [1, -1, 0]
    ("grpo", {}, [2, 0, 1], [5, 5, 5], [1.0, -1.0, 0.0]),
    # Dr.GRPO: no std scaling, just r - mean_g: [.5, -.5, -.5, .5], [0, 0], singleton 0
    (
        "grpo",
        {"scale_by_std": False},
        [1, 0, 0, 1, 1, 1, 0.5],
        [0, 0, 0, 0, 1, 1, 2],
        [0.5, -0.5, -0.5, 0.5, 0, 0, 0],
    ),
    # Dr.GRPO on [3, 0, 0] (ids interleaved with [1, 1]): mean 1 -> [2, -1, -1]; [1, 1] -> 0
    ("grpo", {"scale_by_std": False}, [3, 1, 0, 1, 0], [4, 2, 4, 2, 4], [2.0, 0.0, -1.0, 0.0, -1.0]),
    # grpo std_scope=batch on [1, 0 | .2, .4]: group means .5, .3 -> [.5, -.5, -.1, .1]; the std of all four
    # rewards (mean .4, sum sq .36 + .16 + .04 + 0 = .56, var .56/3, std .432049) scales every group, so
    # the low-spread group stays small (group std would give it +-.707107 too)
    (
        "grpo",
        {"std_scope": "batch"},
        [1, 0, 0.2, 0.4],
        [0, 0, 1, 1],
        [1.157275, -1.157275, -0.231455, 0.231455],
    ),
    ("grpo", {"std_scope": "batch"}, [1, 0], [0, 0], [0.707106, -0.707106]),  # two rows: the group's std
    # rloo [2, 0, 1]: 2 - (0+1)/2 = 1.5 ; 0 - (2+1)/2 = -1.5 ; 1 - (2+0)/2 = 0 ; [1, 0]: 1 - 0, 0 - 1
    ("rloo", {}, [2, 0, 1, 1, 0, 7], [0, 0, 0, 1, 1, 2], [1.5, -1.5, 0.0, 1.0, -1.0, 0.0]),
    # reinforce_pp: groups ignored. [3, 1, 2, 2]: mean 2, deviations [1, -1, 0, 0], var 2/3,
    # std .816497 -> [1.224745, -1.224745, 0, 0]
    ("reinforce_pp", {}, [3, 1, 2, 2], [0, 0, 1, 1], [1.224745, -1.224745, 0.0, 0.0]),
    # reinforce_pp_baseline: [3, 0] -> centred [1.5, -1.5]; [1, 1, 4] mean 2 -> [-1, -1, 2];
    # singleton [9] excluded (0). Batch over 5 real rows: mean 0, sum sq 2.25*2 + 1 + 1 + 4 = 10.5,
    # var 10.5/4 = 2.625, std 1.620185 -> [.925820, -.925820, -.617213, -.617213, 1.234427]
    (
        "reinforce_pp_baseline",
        {},
        [3, 0, 1, 1, 4, 9],
        [0, 0, 1, 1, 1, 2],
        [0.925820, -0.925820, -0.617213, -0.617213, 1.234427, 0.0],
    ),
    # remax: r - greedy baseline: [1 - .5, 0 - .5, 1 - 1]
    ("remax", {"baseline_rewards": T([0.5, 0.5, 1.0])}, [1, 0, 1], [0, 0, 1], [0.5, -0.5, 0.0]),
]


@pytest.mark.parametrize("name,opts,rewards,gids,expected", CASES)
def test_sequence_estimators_hand_computed(name, opts, rewards, gids, expected):
    adv = ADVANTAGES.get(name)(T(rewards, dtype=torch.float32), T(gids), **opts)
    assert adv.shape == (len(rewards),)
    close(adv, expected)


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"])
def test_all_equal_rewards_give_zero(name):
    adv = ADVANTAGES.get(name)(torch.full((6,), 0.7), T([0, 0, 0, 1, 1, 1]))
    close(adv, torch.zeros(6))
    assert torch.isfinite(adv).all()


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_pp_baseline"])
def test_better_reward_gets_larger_advantage(name):
    # sign check: within a group the highest reward must get a positive advantage, the lowest negative
    adv = ADVANTAGES.get(name)(T([0.0, 1.0, 0.2, 5.0, -1.0]), T([0, 0, 0, 1, 1]))
    assert adv[1] > 0 > adv[0] and adv[3] > 0 > adv[4]


def test_api_example_and_dtypes():
    rewards, group_ids = T([1.0, 0.0, 0.0, 0.0]), T([0, 0, 1, 1])
    adv = ADVANTAGES.get("grpo")(rewards, group_ids, scale_by_std=True)
    # group 0: mean .5, std .707107 -> +-.707106 ; group 1: all zero
    close(adv, [0.707106, -0.707106, 0.0, 0.0])
    adv64 = ADVANTAGES.get("grpo")(rewards.double(), group_ids)
    assert adv64.dtype == torch.float64


# gdpo, two groups of 3, two terms with weights (1, .5). Per-term GRPO (std unbiased, 1/sqrt(3) = .577350):
#   group 0: term0 [1, 0, 0] -> [1.154701, -.577350, -.577350]; term1 [0, 1, 1] -> [-1.154701, .577350, .577350]
#   group 1: term0 [1, 1, 0] -> [.577350, .577350, -1.154701]; term1 [1, 0, 0] -> [1.154701, -.577350, -.577350]
# a = term0 + .5 term1 = [.577350, -.288675, -.288675, 1.154701, .288675, -1.443376]: mean 0, var 4/5,
# std .894427 -> [.645497, -.322749, -.322749, 1.290994, .322749, -1.613743]
GDPO_TERMS = [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]


def test_gdpo_hand_computed_and_unlike_grpo_on_the_sum():
    ids = T([0, 0, 0, 1, 1, 1])
    terms = T(GDPO_TERMS)
    summed = terms[:, 0] + 0.5 * terms[:, 1]
    adv = ADVANTAGES.get("gdpo")(summed, ids, term_rewards=terms, term_weights=(1.0, 0.5))
    close(adv, [0.645497, -0.322749, -0.322749, 1.290994, 0.322749, -1.613743], atol=2e-6)
    # grpo on the weighted sum [1, .5, .5 | 1.5, 1, 0]: group 0 -> [1.154701, -.577350, -.577350], not the above
    assert not torch.allclose(ADVANTAGES.get("grpo")(summed, ids), adv, atol=1e-2)
    # a singleton group's row gets 0 and stays out of the batch statistics
    one = ADVANTAGES.get("gdpo")(T([1.0, 0.0, 5.0]), T([0, 0, 1]), term_rewards=T([[1.0], [0.0], [5.0]]),
                                 term_weights=(1.0,))  # fmt: skip
    close(one, [0.707106, -0.707106, 0.0], atol=2e-6)  # [.707107, -.707107] whitened: itself


def test_gdpo_needs_its_terms():
    for given in ({}, {"term_rewards": torch.zeros(2, 1)}, {"term_weights": (1.0,)}):
        with pytest.raises(ValueError, match="^gdpo needs term_rewards"):
            ADVANTAGES.get("gdpo")(T([1.0, 0.0]), T([0, 0]), **given)
    from reasonrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="compares each sample with the others of its group"):
        load_config(None, ["algo.adv_estimator=gdpo", "rollout.n=1"])
    with pytest.raises(ValueError, match="does not fit 1 weights"):
        ADVANTAGES.get("gdpo")(T([1.0, 0.0]), T([0, 0]), term_rewards=torch.zeros(2, 2), term_weights=(1.0,))


def test_grpo_std_scope_is_checked():
    with pytest.raises(ValueError, match="std_scope must be 'group' or 'batch'"):
        ADVANTAGES.get("grpo")(T([1.0, 0.0]), T([0, 0]), std_scope="global")


def test_empty_batch():
    for name in ["grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"]:
        adv = ADVANTAGES.get(name)(torch.zeros(0), torch.zeros(0, dtype=torch.long))
        assert adv.shape == (0,)


def test_registry_errors():
    with pytest.raises(RegistryError, match="known: .*gae.*grpo.*reinforce_pp.*rloo"):
        ADVANTAGES.get("grpoo")
    ADVANTAGES.check_kwargs("grpo", ["scale_by_std", "eps"])
    with pytest.raises(RegistryError, match="scale_by_sd"):
        ADVANTAGES.check_kwargs("grpo", ["scale_by_sd"])
    ADVANTAGES.check_kwargs("gae", ["gamma", "lam", "whiten"])
    with pytest.raises(ValueError, match="baseline_rewards"):
        ADVANTAGES.get("remax")(T([1.0]), T([0]))
    with pytest.raises(ValueError, match="shape"):
        ADVANTAGES.get("remax")(T([1.0, 0.0]), T([0, 0]), baseline_rewards=T([1.0]))


# ---- GAE ---------------------------------------------------------------------------------------


def test_gae_hand_computed():
    # one row, 3 trainable tokens then padding; reward 1 on the last trainable token (t=2)
    # gamma .9, lam .8 (gamma*lam = .72), V = [.5, .4, .2, pad 9.0]
    # t=2: delta = 1 + .9*0 - .2 = .8                ; A2 = .8
    # t=1: delta = 0 + .9*.2 - .4 = -.22             ; A1 = -.22 + .72*.8 = .356
    # t=0: delta = 0 + .9*.4 - .5 = -.14             ; A0 = -.14 + .72*.356 = .11632
    # returns = A + V = [.61632, .756, 1.0], padding 0
    values = T([[0.5, 0.4, 0.2, 9.0]])
    mask = T([[True, True, True, False]])
    adv, ret = gae(T([1.0]), T([0]), values=values, mask=mask, gamma=0.9, lam=0.8, whiten=False)
    close(adv, [[0.11632, 0.356, 0.8, 0.0]])
    close(ret, [[0.61632, 0.756, 1.0, 0.0]])


def test_gae_skips_interior_masked_positions():
    # same row with an untrainable position (e.g. tool output) at t=1 holding garbage value 7:
    # it is skipped, so the trainable positions get the values above and t=1 gets 0
    values = T([[0.5, 7.0, 0.4, 0.2]])
    mask = T([[True, False, True, True]])
    adv, ret = gae(T([1.0]), T([0]), values=values, mask=mask, gamma=0.9, lam=0.8, whiten=False)
    close(adv, [[0.11632, 0.0, 0.356, 0.8]])
    close(ret, [[0.61632, 0.0, 0.756, 1.0]])


def test_gae_with_zero_values_is_return_to_go_of_kl_shaped_rewards():
    # REINFORCE++ token advantages: gamma = lam = 1, V = 0 -> A_t = sum_{s>=t} r_s
    # token rewards from fold_kl: kl coef .1, kl = [.1, .2, .3] -> [-.01, -.02, -.03 + 1] = [-.01, -.02, .97]
    # return-to-go: [.94, .95, .97]
    mask = T([[True, True, True]])
    tr = fold_kl_into_rewards(T([1.0]), T([[0.1, 0.2, 0.3]]), mask, kl_coef=0.1)
    adv, ret = gae(T([123.0]), T([0]), values=torch.zeros(1, 3), mask=mask, token_rewards=tr, whiten=False)
    close(adv, [[0.94, 0.95, 0.97]])
    close(ret, [[0.94, 0.95, 0.97]])


def test_gae_whiten_and_empty_row():
    g = torch.Generator().manual_seed(0)
    values = torch.rand(3, 5, generator=g)
    mask = T([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]).bool()
    adv, ret = gae(T([1.0, 0.0, 1.0]), T([0, 0, 1]), values=values, mask=mask, gamma=1.0, lam=0.95)
    m = adv[mask]
    close(m.mean(), 0.0, atol=1e-6)
    close(m.std(), 1.0, rtol=1e-4)  # whitened with (std + 1e-8)
    assert (adv[~mask] == 0).all() and (ret[~mask] == 0).all()
    assert adv.shape == ret.shape == (3, 5)


def test_gae_needs_values_and_mask():
    with pytest.raises(ValueError, match="values"):
        gae(T([1.0]), T([0]))
    with pytest.raises(ValueError, match="values"):
        gae(T([1.0]), T([0]), values=torch.zeros(1, 2))  # the mask missing alone is refused too
    with pytest.raises(ValueError, match="values"):
        gae(T([1.0]), T([0]), mask=torch.ones(1, 2, dtype=torch.bool))


@pytest.mark.parametrize(
    "name, needs, token_level, group_relative",
    [
        ("grpo", set(), False, True),
        ("rloo", set(), False, True),
        ("reinforce_pp", set(), False, False),  # batch whitening: one completion per prompt is fine
        ("reinforce_pp_baseline", set(), False, True),
        ("remax", {"baseline_rewards"}, False, False),
        ("gpg", set(), False, True),
        ("gae", {"values", "mask", "token_rewards"}, True, False),
    ],
)
def test_each_estimator_declares_what_the_trainer_reads(name, needs, token_level, group_relative):
    fn = ADVANTAGES.get(name)
    assert (set(fn.needs), fn.token_level, fn.group_relative) == (needs, token_level, group_relative)


def test_declare_returns_the_function_and_refuses_unknown_inputs():
    from reasonrl.algorithms.advantages import declare

    def est(rewards, group_ids):
        return rewards

    assert declare(est, needs=("mask",)) is est and est.needs == frozenset({"mask"})
    with pytest.raises(ValueError, match=r"est: unknown trainer inputs \['critic'\]"):
        declare(est, needs=("critic",))


def test_gpg_scales_the_centred_rewards_by_the_share_of_rewarded_samples():
    gpg = ADVANTAGES.get("gpg")
    rewards, groups = T([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]), T([0, 0, 0, 0, 1, 1, 1, 1])
    # 8 samples, 4 rewarded: alpha = 2; group means 0.25 and 0.75; no std division
    expected = [1.5, -0.5, -0.5, -0.5, 0.5, 0.5, -1.5, 0.5]
    assert gpg(rewards, groups).tolist() == expected
    assert gpg(rewards, groups, f_norm=4.0).tolist() == [x / 4 for x in expected]
    # one rewarded sample in 8: alpha = 8; nothing rewarded: alpha = 8 / 1 on all-zero advantages
    assert gpg(T([1.0] + [0.0] * 7), T([0] * 4 + [1] * 4)).tolist()[:2] == [6.0, -2.0]
    assert gpg(torch.zeros(4), T([0, 0, 1, 1])).tolist() == [0.0] * 4
    assert gpg(T([2.0, 1.0, 3.0]), T([0, 1, 1])).tolist() == [2.0, -1.0, 1.0]  # a singleton keeps alpha r
    with pytest.raises(ValueError, match="gpg: f_norm must be > 0"):
        gpg(rewards, groups, f_norm=0.0)
