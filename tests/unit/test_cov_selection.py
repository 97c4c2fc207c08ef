"""The trainer's batch-wide token choice for clip_cov / kl_cov (`trainer.step.attach_cov_selection`): one
choice per step over every rank's trained tokens, from the advantages and the pre-update log-probs, seeded
by the step; the loss then acts on exactly those tokens; recipe checks."""

from __future__ import annotations

import pytest
import torch
from test_entropy_tokens import _batch

from reasonrl.config import ConfigError, load_config
from reasonrl.trainer.step import attach_cov_selection, linear_in_advantage, make_loss_fn, selects_tokens

T = torch.tensor


def _kl_cov(ratio: float = 0.25, coef: float = 0.1):
    return load_config(
        None, ["algo.policy_loss=kl_cov", f"algo.loss_kwargs={{kl_cov_ratio: {ratio}, kl_coef: {coef}}}"]
    ).algo


def _scored_batch():
    b = _batch([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]])
    b.advantages = T([[1.0] * 4, [-1.0] * 4, [0.5] * 4])
    # the padded token (row 1, last) has the largest covariance of all: it must never be chosen
    b.old_logprobs = T([[-0.1, -3.0, -0.2, -2.5], [-4.0, -0.1, -3.5, -9.0], [-0.3, -0.2, -2.0, -0.1]])
    return b


def test_kl_cov_chooses_the_top_covariance_trained_tokens():
    b = _scored_batch()
    metrics = attach_cov_selection(b, _kl_cov(0.25), seed=7)  # 11 trained tokens: floor(2.75) = 2
    # mean A = 3/11, mean log-prob -1.45: the two largest (A - mean)(lp - mean) are row 1's -4.0 and -3.5
    assert b.cov_select.tolist() == [[False] * 4, [True, False, True, False], [False] * 4]
    assert metrics["actor/cov_selected_tokens"] == 2.0 and metrics["actor/cov_max"] > 0
    plain = _scored_batch()  # the loss's own default ratio (2e-4): at least one token, the largest
    attach_cov_selection(plain, load_config(None, ["algo.policy_loss=kl_cov"]).algo, seed=7)
    assert plain.cov_select.nonzero().tolist() == [[1, 0]]


def test_clip_cov_choice_is_seeded_by_the_step_and_stays_in_the_band():
    algo = load_config(None, ["algo.policy_loss=clip_cov",
                              "algo.loss_kwargs={clip_cov_ratio: 0.2, clip_cov_lb: 0.0, clip_cov_ub: 100}"]).algo  # fmt: skip
    picks = []
    for seed in (1, 1, 2, 3, 4):
        b = _scored_batch()
        attach_cov_selection(b, algo, seed)
        picks.append(b.cov_select.clone())
        assert int(b.cov_select.sum()) == 2 and not bool((b.cov_select & ~b.mask).any())
    assert torch.equal(picks[0], picks[1]) and any(not torch.equal(picks[0], p) for p in picks[2:])


def test_the_loss_acts_on_the_chosen_tokens_only():
    b = _scored_batch()
    algo = _kl_cov(0.25, coef=0.5)
    attach_cov_selection(b, algo, seed=0)
    logprobs = (b.old_logprobs + 0.3).requires_grad_(True)  # log r = 0.3 everywhere
    loss, _ = make_loss_fn(algo, b.mask.sum(), 3, 4)(b, logprobs, None)
    (grad,) = torch.autograd.grad(loss, logprobs)
    plain = -b.advantages * torch.exp(torch.tensor(0.3)) / 11  # token_mean of -A r
    expect = torch.where(b.mask, plain + 0.5 * b.cov_select / 11, torch.zeros_like(plain))
    torch.testing.assert_close(grad, expect)


def test_which_losses_choose_and_which_stay_linear():
    assert selects_tokens(_kl_cov()) and not linear_in_advantage(_kl_cov())
    clip = load_config(None, ["algo.policy_loss=clip_cov"]).algo
    assert selects_tokens(clip) and linear_in_advantage(clip)
    plain = load_config(None, []).algo
    assert not selects_tokens(plain) and linear_in_advantage(plain)


def test_recipe_errors_name_the_key():
    with pytest.raises(ConfigError, match="algo.loss_kwargs.selected: the trainer chooses these tokens"):
        load_config(None, ["algo.policy_loss=clip_cov", "algo.loss_kwargs={selected: 1}"])
    with pytest.raises(ConfigError, match="algo.loss_kwargs: .*clip_cov_lb must be < clip_cov_ub"):
        load_config(None, ["algo.policy_loss=clip_cov", "algo.loss_kwargs={clip_cov_lb: 5, clip_cov_ub: 1}"])
    with pytest.raises(ConfigError, match="algo.loss_kwargs: .*ratio must be > 0"):
        load_config(None, ["algo.policy_loss=kl_cov", "algo.loss_kwargs={kl_cov_ratio: 0}"])


def _rank(r: int, port: int, out):
    from reasonrl import distributed as dist

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    try:
        rows = slice(0, 1) if r == 0 else slice(1, 3)  # uneven shards
        mine = _scored_batch().select(rows)
        metrics = attach_cov_selection(mine, _kl_cov(0.25), seed=7)
        out.put((r, dist.world_size(), mine.cov_select.tolist(), metrics))
    finally:
        torch.distributed.destroy_process_group()


def test_two_ranks_choose_what_one_process_chooses():
    from gloo_ranks import run_ranks

    results = sorted(run_ranks(_rank, 2, timeout=90))
    one = _scored_batch()
    expected = attach_cov_selection(one, _kl_cov(0.25), seed=7)
    assert [x[1] for x in results] == [2, 2]
    # rank 0 alone would choose its own top token; over both ranks it holds none of the top two
    assert results[0][2] == [[False] * 4]
    assert results[0][2] + results[1][2] == one.cov_select.tolist()
    assert results[0][3] == results[1][3] == expected
