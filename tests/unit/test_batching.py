"""build_batch padding layout (hand-checked on two groups) and mini-batch splitting."""

from __future__ import annotations

import pytest
import torch

from reasonrl.trainer.batching import build_batch, minibatches
from reasonrl.types import Completion, Problem, RolloutGroup

PAD = 0
EOS = 2


def _groups() -> list[RolloutGroup]:
    prob = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="1", data_source="t")
    g0 = RolloutGroup(
        problem=prob,
        prompt_ids=[11, 12],
        completions=[
            Completion([21, 22, EOS], "ab", [-0.1, -0.2, -0.3], "stop"),
            Completion([23], "c", [-0.4], "length"),
        ],
        rewards=[1.0, 0.0],
    )
    g1 = RolloutGroup(
        problem=prob,
        prompt_ids=[13, 14, 15],
        completions=[
            Completion([24, 25], "de", [-0.5, -0.6], "stop"),
            Completion([], "", [], "length"),
        ],
        rewards=[0.5, 0.25],
    )
    return [g0, g1]


def test_build_batch_layout_by_hand():
    b = build_batch(_groups(), pad_id=PAD)
    # P = 3 (longest prompt), T = 3 (longest completion); prompts left-padded, completions right-padded
    assert b.prompt_len == 3
    assert b.input_ids.tolist() == [
        [PAD, 11, 12, 21, 22, EOS],
        [PAD, 11, 12, 23, PAD, PAD],
        [13, 14, 15, 24, 25, PAD],
        [13, 14, 15, PAD, PAD, PAD],
    ]
    assert b.attention_mask.tolist() == [
        [0, 1, 1, 1, 1, 1],
        [0, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 0, 0, 0],
    ]
    assert b.mask.dtype == torch.bool
    assert b.mask.tolist() == [
        [True, True, True],
        [True, False, False],
        [True, True, False],
        [False, False, False],
    ]
    torch.testing.assert_close(
        b.sampler_logprobs,
        torch.tensor([[-0.1, -0.2, -0.3], [-0.4, 0.0, 0.0], [-0.5, -0.6, 0.0], [0.0, 0.0, 0.0]]),
        rtol=0,
        atol=0,
    )
    assert b.rewards.tolist() == [1.0, 0.0, 0.5, 0.25]
    assert b.group_ids.tolist() == [0, 0, 1, 1]
    assert b.truncated.tolist() == [False, True, False, True]
    assert b.lengths.tolist() == [3, 1, 2, 0]
    assert (b.input_ids.dtype, b.attention_mask.dtype, b.rewards.dtype) == (
        torch.long,
        torch.long,
        torch.float32,
    )
    assert b.size == 4
    assert b.advantages is None and b.old_logprobs is None and b.ref_logprobs is None


def test_unscored_groups_get_zero_rewards_and_empty_completions_keep_one_column():
    groups = _groups()
    for g in groups:
        g.rewards = []
        g.completions = [Completion([], "", [], "length")]
    b = build_batch(groups, pad_id=7)
    assert b.prompt_len == 3
    assert b.input_ids.tolist() == [[7, 11, 12, 7], [13, 14, 15, 7]]
    assert b.mask.tolist() == [[False], [False]]
    assert b.rewards.tolist() == [0.0, 0.0]


def test_select_picks_rows_of_every_field():
    b = build_batch(_groups(), pad_id=PAD)
    s = b.select(torch.tensor([2, 0]))
    assert s.input_ids.tolist() == [b.input_ids[2].tolist(), b.input_ids[0].tolist()]
    assert s.group_ids.tolist() == [1, 0]
    assert s.rewards.tolist() == [0.5, 1.0]
    assert s.lengths.tolist() == [2, 3]
    assert s.prompt_len == 3


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("shuffle", [False, True])
def test_minibatches_cover_every_row_once(size, shuffle):
    b = build_batch(_groups(), pad_id=PAD)
    # rewards are distinct, so they identify rows after shuffling
    gen = torch.Generator().manual_seed(3) if shuffle else None
    parts = minibatches(b, size, generator=gen)
    assert [p.size for p in parts] == [min(size, 4 - s) for s in range(0, 4, size)]
    seen = torch.cat([p.rewards for p in parts]).tolist()
    assert sorted(seen) == [0.0, 0.25, 0.5, 1.0]
    if not shuffle:
        assert seen == [1.0, 0.0, 0.5, 0.25]
    # every field of a row travels together
    for p in parts:
        for i in range(p.size):
            j = b.rewards.tolist().index(p.rewards[i].item())
            assert torch.equal(p.input_ids[i], b.input_ids[j])
            assert torch.equal(p.mask[i], b.mask[j])
            assert p.lengths[i] == b.lengths[j]


def test_shuffled_minibatches_follow_the_generator():
    b = build_batch(_groups(), pad_id=PAD)
    order_a = torch.cat([p.rewards for p in minibatches(b, 1, torch.Generator().manual_seed(0))])
    order_b = torch.cat([p.rewards for p in minibatches(b, 1, torch.Generator().manual_seed(0))])
    expected = b.rewards[torch.randperm(4, generator=torch.Generator().manual_seed(0))]
    assert torch.equal(order_a, order_b)
    assert torch.equal(order_a, expected)
