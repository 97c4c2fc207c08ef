"""Filters and shaping: DAPO dynamic-sampling mask, soft overlong penalty, truncated-completion mask,
RLinf mini-batch early stop. Table-driven with adversarial rows."""

from __future__ import annotations

import pytest
import torch
from _tolerance import close

from reasonrl.algorithms.filters import (
    dynamic_sampling_mask,
    mask_truncated,
    minibatch_early_stop,
    overlong_penalty,
)

T = torch.tensor


def test_dynamic_sampling_mask():
    # interleaved groups: 4 -> [1, 0] keep ; 2 -> [1, 1] drop ; 9 singleton drop ;
    # 6 -> [.5, .501] keep at eps 0, drop at eps .01 ; 3 -> [0, 0, 1] keep
    r = T([1.0, 1.0, 0.0, 1.0, 7.0, 0.5, 0.501, 0.0, 0.0, 1.0])
    g = T([4, 2, 4, 2, 9, 6, 6, 3, 3, 3])
    keep = dynamic_sampling_mask(r, g)
    assert keep.tolist() == [True, False, True, False, False, True, True, True, True, True]
    keep = dynamic_sampling_mask(r, g, eps=0.01)
    assert keep.tolist() == [True, False, True, False, False, False, False, True, True, True]
    assert dynamic_sampling_mask(torch.zeros(0), torch.zeros(0, dtype=torch.long)).shape == (0,)


# max_len 20, buffer 5 -> penalty-free up to 15, linear to -1 at 20, -1 beyond
# L: 10 -> 0 ; 15 -> 0 ; 16 -> (15-16)/5 = -.2 ; 18 -> -.6 ; 20 -> -1 ; 25 -> -1 (clamped)
OVERLONG = [
    (1.0, [0.0, 0.0, -0.2, -0.6, -1.0, -1.0]),
    (0.5, [0.0, 0.0, -0.1, -0.3, -0.5, -0.5]),
]


@pytest.mark.parametrize("factor,expected", OVERLONG)
def test_overlong_penalty(factor, expected):
    out = overlong_penalty(T([10, 15, 16, 18, 20, 25]), max_len=20, buffer=5, penalty_factor=factor)
    close(out, expected)


@pytest.mark.parametrize("buffer,max_len", [(0, 20), (21, 20), (-1, 20)])
def test_overlong_penalty_bad_args(buffer, max_len):
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(T([1]), max_len=max_len, buffer=buffer)


def test_overlong_penalty_buffer_equals_max_len():
    # buffer = max_len: the penalty ramps from length 0: L=5 of 20 -> -5/20
    close(overlong_penalty(T([0, 5, 20]), max_len=20, buffer=20), [0.0, -0.25, -1.0])


def test_mask_truncated():
    mask = T([[1, 1, 0], [1, 1, 1], [1, 0, 0]]).bool()
    out = mask_truncated(mask, T([False, True, False]))
    assert out.tolist() == [[True, True, False], [False, False, False], [True, False, False]]
    assert mask_truncated(mask, T([0, 0, 1])).tolist()[2] == [False, False, False]


EARLY = [
    # ratio_mean, approx_kl, max_ratio, max_kl, stop
    (1.02, 0.01, None, None, False),
    (5.5, 0.01, 5.0, None, True),
    (5.0, 0.01, 5.0, None, False),  # strictly greater, like RLinf
    (1.0, 0.25, None, 0.25, False),  # the KL too
    (1.0, 0.2, 5.0, 0.1, True),
    (1.0, 0.05, 5.0, 0.1, False),
    (9.0, 0.5, None, None, False),  # no thresholds: never stop
]


@pytest.mark.parametrize("ratio,kl,max_ratio,max_kl,stop", EARLY)
def test_minibatch_early_stop(ratio, kl, max_ratio, max_kl, stop):
    out = minibatch_early_stop(T(ratio), T(kl), max_ratio=max_ratio, max_kl=max_kl)
    assert out.dtype == torch.bool and out.dim() == 0
    assert bool(out) is stop


def test_minibatch_early_stop_checks_only_the_limits_given():
    # a limit left out is no limit, whatever the other statistic's value (ratio far above 1, kl large)
    assert not bool(minibatch_early_stop(T(50.0), T(0.01), max_kl=0.1))
    assert not bool(minibatch_early_stop(T(1.01), T(50.0), max_ratio=2.0))
    assert bool(minibatch_early_stop(T(1.01), T(0.5), max_kl=0.1))
    assert not bool(minibatch_early_stop(T(50.0), T(50.0)))


def test_overlong_penalty_with_a_one_token_buffer():
    # max_len 4, buffer 1: no penalty up to 3 tokens, the full factor at 4 (the buffer's one token) and past
    close(overlong_penalty(T([3, 4, 5]), max_len=4, buffer=1, penalty_factor=0.5), [0.0, -0.5, -0.5])
