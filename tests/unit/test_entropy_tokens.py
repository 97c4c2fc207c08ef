"""High-entropy token training (Wang et al. 2025, "Beyond the 80/20 rule", `algo.top_entropy_quantile`): the
policy-gradient term trains only the top share of a step's tokens by entropy, chosen with one threshold
over the whole step (every rank's tokens) before its updates; the normalisers, the KL and the entropy
terms keep every token."""

from __future__ import annotations

import math

import pytest
import torch

from reasonrl.algorithms.filters import entropy_threshold
from reasonrl.config import AlgoConfig, ConfigError, load_config
from reasonrl.trainer.step import attach_entropy_mask, make_loss_fn
from reasonrl.types import TrainBatch

T = torch.tensor


@pytest.mark.parametrize(
    "values, quantile, threshold",
    [
        ([0.1 * i for i in range(1, 11)], 0.2, 0.9),  # 10 tokens, the top 2: 1.0 and 0.9
        ([0.1 * i for i in range(1, 11)], 1.0, 0.1),  # all of them
        ([0.1 * i for i in range(1, 11)], 0.05, 1.0),  # ceil(0.5) = 1 token, never none
        ([0.1 * i for i in range(1, 11)], 0.25, 0.8),  # ceil(2.5) = 3 tokens
        ([5.0, 1.0, 3.0], 0.5, 3.0),  # order does not matter: ceil(1.5) = 2 -> 5 and 3
        ([2.0, 2.0, 2.0, 0.5], 0.25, 2.0),  # a tie at the threshold: all three are kept
    ],
)
def test_the_threshold_keeps_the_top_share(values, quantile, threshold):
    assert float(entropy_threshold(T(values), quantile)) == pytest.approx(threshold, abs=1e-6)
    kept = int((T(values) >= entropy_threshold(T(values), quantile)).sum())
    assert kept >= math.ceil(quantile * len(values) - 1e-9)  # at least ceil(q n) (more only on ties)


def test_the_threshold_of_no_tokens_and_bad_shares():
    assert float(entropy_threshold(T([]), 0.2)) == float("-inf")
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="top_entropy_quantile must be in"):
            entropy_threshold(T([1.0]), bad)


def _batch(mask) -> TrainBatch:
    mask = T(mask, dtype=torch.bool)
    B, N = mask.shape
    return TrainBatch(input_ids=torch.zeros(B, N + 1, dtype=torch.long), attention_mask=torch.ones(B, N + 1, dtype=torch.long),
                      mask=mask, prompt_len=1, rewards=torch.zeros(B), group_ids=torch.zeros(B, dtype=torch.long))  # fmt: skip


def test_the_mask_picks_the_highest_entropy_trained_tokens_of_the_whole_batch():
    b = _batch([[1, 1, 1, 0], [1, 1, 0, 0]])
    entropy = T([[0.2, 3.0, 0.5, 99.0], [2.0, 0.1, 50.0, 50.0]])  # padding's entropies never count
    metrics = attach_entropy_mask(b, entropy, 0.4)  # 5 trained tokens: the top ceil(2.0) = 2
    assert b.pg_mask.tolist() == [[False, True, False, False], [True, False, False, False]]
    assert metrics == {
        "actor/entropy_threshold": pytest.approx(2.0),
        "actor/pg_token_frac": pytest.approx(0.4),
    }
    # rows go on to micro-batches with their share of the mask (the threshold is the whole step's)
    assert b.select(slice(1, 2)).pg_mask.tolist() == [[True, False, False, False]]
    none = _batch([[0, 0], [0, 0]])  # no trained token (all truncated and masked): nothing picked, no NaN
    assert attach_entropy_mask(none, T([[1.0, 2.0], [3.0, 4.0]]), 0.2) == {
        "actor/entropy_threshold": 0.0, "actor/pg_token_frac": 0.0}  # fmt: skip
    assert not none.pg_mask.any()
    one = _batch([[0, 1]])  # one trained token: it is the top share whatever the share
    assert attach_entropy_mask(one, T([[9.0, 0.5]]), 0.2) == {
        "actor/entropy_threshold": 0.5,
        "actor/pg_token_frac": 1.0,
    }


def test_the_policy_gradient_trains_only_the_picked_tokens_and_the_normalisers_keep_every_token():
    b = _batch([[1, 1], [1, 0]])
    b.advantages = T([[1.0, 1.0], [-1.0, 0.0]])
    logprobs = torch.full((2, 2), -1.0, requires_grad=True)  # ratio 1: per-token loss = -A
    plain, _ = make_loss_fn(AlgoConfig(), b.mask.sum(), 2, 2)(b, logprobs, None)
    assert plain.item() == pytest.approx(-1.0 / 3, rel=1e-6)  # (-1 - 1 + 1) / 3
    b.pg_mask = T([[False, True], [True, False]])
    loss, metrics = make_loss_fn(AlgoConfig(), b.mask.sum(), 2, 2)(b, logprobs, None)
    assert loss.item() == pytest.approx((-1.0 + 1.0) / 3, abs=1e-7)  # the two picked tokens, over all 3
    (grad,) = torch.autograd.grad(loss, logprobs)
    assert grad[0, 0] == 0 and grad[1, 1] == 0 and grad[0, 1] != 0 and grad[1, 0] != 0
    assert metrics["loss/policy"].item() == pytest.approx(0.0, abs=1e-7)
    entropy = T([[0.3, 0.6], [0.9, 50.0]])  # the entropy bonus still counts every trained token
    bonus, _ = make_loss_fn(AlgoConfig(entropy_coef=0.5), b.mask.sum(), 2, 2)(b, logprobs, entropy)
    assert bonus.item() == pytest.approx(0.0 - 0.5 * 0.6, rel=1e-6)


def test_the_setting_defaults_off_and_is_checked():
    assert load_config(None, []).algo.top_entropy_quantile == 1.0
    assert load_config(None, ["algo.top_entropy_quantile=0.2"]).algo.top_entropy_quantile == 0.2
    for bad in ("0", "1.5", "-0.2"):
        with pytest.raises(ConfigError, match=r"algo.top_entropy_quantile must be in \(0, 1\]"):
            load_config(None, [f"algo.top_entropy_quantile={bad}"])


def _rank(r: int, port: int, out):
    from reasonrl import distributed as dist

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    try:
        whole, entropy = _two_rank_batch()
        rows = slice(0, 1) if r == 0 else slice(1, 3)  # uneven shards
        mine = whole.select(rows)
        metrics = attach_entropy_mask(mine, entropy[rows], 0.25)
        out.put((r, dist.world_size(), mine.pg_mask.tolist(), metrics))
    finally:
        torch.distributed.destroy_process_group()


def _two_rank_batch():
    b = _batch([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]])
    # rank 0 holds the low-entropy row: a threshold of its own would pick its top token, the step's picks none
    entropy = T([[0.1, 0.2, 0.3, 0.4], [5.0, 1.0, 6.0, 1.5], [2.0, 7.0, 0.5, 0.6]])
    return b, entropy


def test_two_ranks_pick_by_one_threshold_over_every_ranks_tokens():
    from gloo_ranks import run_ranks

    results = run_ranks(_rank, 2, timeout=90)
    one, entropy = _two_rank_batch()
    expected = attach_entropy_mask(one, entropy, 0.25)  # 12 tokens, the top 3: 7.0, 6.0, 5.0
    assert one.pg_mask.tolist() == [[False] * 4, [True, False, True, False], [False, True, False, False]]
    assert [x[1] for x in results] == [2, 2]
    assert results[0][2] + results[1][2] == one.pg_mask.tolist()  # rank 0 picks none of its own
    assert results[0][3] == results[1][3] == expected == {
        "actor/entropy_threshold": pytest.approx(5.0), "actor/pg_token_frac": pytest.approx(0.25)}  # fmt: skip
