"""PromptSampler: exact resume from state_dict, epochs wrap, no repeats within an epoch."""

from __future__ import annotations

import pytest

from reasonrl.data.sampler import PromptSampler
from reasonrl.types import Problem

N = 10


def _problems(n: int = N) -> list[Problem]:
    return [
        Problem(
            prompt=[{"role": "user", "content": f"q{i}"}], ground_truth=str(i), data_source="t", uid=str(i)
        )
        for i in range(n)
    ]


def _uids(batch: list[Problem]) -> list[int]:
    return [int(p.uid) for p in batch]


def _draw(sampler: PromptSampler, steps: int) -> list[list[int]]:
    return [_uids(sampler.next()) for _ in range(steps)]


def test_batches_have_the_batch_size_and_state_advances():
    s = PromptSampler(_problems(), batch_size=4, seed=0)
    assert s.state_dict() == {"epoch": 0, "index": 0}
    assert len(s.next()) == 4
    assert s.state_dict() == {"epoch": 0, "index": 4}
    s.next()
    assert s.state_dict() == {"epoch": 0, "index": 8}
    s.next()  # 2 from epoch 0, then 2 from epoch 1
    assert s.state_dict() == {"epoch": 1, "index": 2}


@pytest.mark.parametrize("batch_size", [1, 3, 4, 10, 7])
def test_each_epoch_is_a_permutation(batch_size):
    s = PromptSampler(_problems(), batch_size=batch_size, seed=5)
    flat = [u for b in _draw(s, 60) for u in b]  # >= 6 epochs of 10
    epochs = [flat[i : i + N] for i in range(0, len(flat) - N + 1, N)]
    assert len(epochs) >= 6
    for e in epochs:
        assert sorted(e) == list(range(N))  # every problem exactly once: no repeats, none missed
    # shuffled, and differently in different epochs
    assert epochs[0] != list(range(N))
    assert len({tuple(e) for e in epochs}) > 1


def test_batch_larger_than_dataset_wraps_within_one_call():
    s = PromptSampler(_problems(3), batch_size=7, seed=1)
    b = _uids(s.next())
    assert len(b) == 7
    assert sorted(b[:3]) == [0, 1, 2] and sorted(b[3:6]) == [0, 1, 2]
    assert s.state_dict() == {"epoch": 2, "index": 1}


def test_no_shuffle_keeps_file_order():
    s = PromptSampler(_problems(5), batch_size=3, shuffle=False)
    assert _draw(s, 4) == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 0, 1]]
    assert s.metrics() == {}  # a plain sampler reports nothing (the trainer merges what samplers report)


def test_the_default_seed_is_0():
    assert _uids(PromptSampler(_problems(9), batch_size=9).next()) == _uids(
        PromptSampler(_problems(9), 9, seed=0).next()
    )


def test_seed_determines_order():
    a = _draw(PromptSampler(_problems(), 4, seed=2), 5)
    b = _draw(PromptSampler(_problems(), 4, seed=2), 5)
    c = _draw(PromptSampler(_problems(), 4, seed=3), 5)
    assert a == b
    assert a != c


@pytest.mark.parametrize("stop_after", [0, 1, 2, 3, 5, 7])
def test_resume_draws_exactly_the_same_prompts(stop_after):
    total = 9
    reference = _draw(PromptSampler(_problems(), batch_size=4, seed=11), total)

    first = PromptSampler(_problems(), batch_size=4, seed=11)
    head = _draw(first, stop_after)
    state = first.state_dict()
    # the saved state is a plain dict snapshot: drawing more does not change it
    first.next()
    resumed = PromptSampler(_problems(), batch_size=4, seed=11)
    resumed.load_state_dict(dict(state))
    tail = _draw(resumed, total - stop_after)
    assert head + tail == reference


def test_resume_at_epoch_boundary():
    s = PromptSampler(_problems(), batch_size=5, seed=4)
    reference = _draw(PromptSampler(_problems(), batch_size=5, seed=4), 6)
    s.load_state_dict({"epoch": 0, "index": 10})  # end of epoch 0, not yet wrapped
    assert _draw(s, 4) == reference[2:]


def test_empty_dataset_rejected():
    with pytest.raises(ValueError, match="the training set is empty"):
        PromptSampler([], batch_size=2)
