"""Masked reductions and loss aggregation: hand-computed values for every mode, global normalisers,
garbage (NaN / inf) in masked-out positions, and helpers (whiten, last-token placement, counts)."""

from __future__ import annotations

import pytest
import torch
from _tolerance import close

from reasonrl.algorithms.masked import (
    AGG_MODES,
    aggregate,
    last_token_values,
    masked_mean,
    masked_sum,
    masked_whiten,
    normalisers,
)

T = torch.tensor
NAN = float("nan")


# rows: row 0 has tokens [1, 2, 3] (|M0| = 3), row 1 has [5] (|M1| = 1), row 2 has none.
# Masked-out positions hold NaN / inf / 100 and must not leak.
LOSS = T([[1.0, 2.0, 3.0, 100.0], [5.0, NAN, float("inf"), 100.0], [NAN, 7.0, 7.0, 7.0]])
MASK = T([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]).bool()

AGG_CASES = [
    # token_mean: (1+2+3+5)/4 = 2.75 ; with total_tokens=10: 11/10
    ("token_mean", {}, 2.75),
    ("token_mean", {"total_tokens": 10}, 1.1),
    # seq_mean_token_mean: (6/3 + 5/1) / 2 rows with tokens = 3.5 ; total_seqs=4: 7/4
    ("seq_mean_token_mean", {}, 3.5),
    ("seq_mean_token_mean", {"total_seqs": T(4.0)}, 1.75),
    # seq_mean_token_sum: (6 + 5) / 2 = 5.5 ; total_seqs=4: 11/4
    ("seq_mean_token_sum", {}, 5.5),
    ("seq_mean_token_sum", {"total_seqs": 4}, 2.75),
    # seq_mean_token_sum_norm: 11 / (2 * T=4) = 1.375 ; norm_len=8: 11/16 ; total_seqs=4, norm 8: 11/32
    ("seq_mean_token_sum_norm", {}, 1.375),
    ("seq_mean_token_sum_norm", {"norm_len": 8}, 0.6875),
    ("seq_mean_token_sum_norm", {"norm_len": 8, "total_seqs": 4}, 0.34375),
]


@pytest.mark.parametrize("mode,kw,expected", AGG_CASES)
def test_aggregate_hand_computed(mode, kw, expected):
    close(aggregate(LOSS, MASK, mode, **kw), expected)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_aggregate_gradient_is_finite_and_zero_off_mask(mode):
    x = LOSS.clone().requires_grad_(True)
    aggregate(x, MASK, mode).backward()
    assert torch.isfinite(x.grad).all()
    assert (x.grad[~MASK] == 0).all() and (x.grad[MASK] > 0).all()


def test_token_mean_gradient_values():
    # d/dL_it of sum(L*M)/4 = .25 on each of the 4 tokens ; seq_mean_token_mean: row 0 tokens 1/(3*2),
    # row 1 token 1/(1*2)
    x = LOSS.clone().requires_grad_(True)
    aggregate(x, MASK, "token_mean").backward()
    close(x.grad[MASK], [0.25] * 4)
    x.grad = None
    aggregate(x, MASK, "seq_mean_token_mean").backward()
    close(x.grad[MASK], [1 / 6, 1 / 6, 1 / 6, 0.5])


def test_all_masked_is_zero_not_nan():
    for mode in AGG_MODES:
        out = aggregate(LOSS, torch.zeros_like(MASK), mode)
        close(out, 0.0)


def test_unknown_mode():
    with pytest.raises(ValueError, match="known: token_mean"):
        aggregate(LOSS, MASK, "token-mean")


def test_normalisers_counts_and_additivity():
    n = normalisers(MASK)
    close(n["total_tokens"], 4.0)
    close(n["total_seqs"], 2.0)  # the empty row does not count
    a, b = normalisers(MASK[:1]), normalisers(MASK[1:])
    close(a["total_tokens"] + b["total_tokens"], 4.0)
    close(a["total_seqs"] + b["total_seqs"], 2.0)


def test_masked_sum_mean():
    close(masked_sum(LOSS, MASK), 11.0)
    close(masked_sum(LOSS, MASK, dim=-1), [6.0, 5.0, 0.0])
    close(masked_mean(LOSS, MASK, dim=-1), [2.0, 5.0, 0.0])  # empty row -> 0, not NaN
    close(masked_mean(LOSS, MASK), 2.75)


def test_masked_whiten():
    # entries [1, 2, 3, 5]: mean 2.75, deviations [-1.75, -.75, .25, 2.25],
    # sum sq 3.0625+.5625+.0625+5.0625 = 8.75, unbiased var 8.75/3 = 2.916667, std 1.707825
    # -> [-1.024695, -.439155, .146385, 1.317465], 0 elsewhere
    out = masked_whiten(LOSS, MASK, eps=0.0)
    close(out[MASK], [-1.024695, -0.439155, 0.146385, 1.317465])
    assert (out[~MASK] == 0).all()
    one = T([[True, False, False, False], [False] * 4, [False] * 4])
    close(masked_whiten(LOSS, one), torch.zeros(3, 4))  # a single entry cannot be whitened
    # the default eps is tiny (1e-8): it keeps a zero std finite without shrinking a unit std's result
    close(masked_whiten(T([1.0, 2.0, 3.0]), T([True, True, True])), [-1.0, 0.0, 1.0])


def test_last_token_values():
    # row 0 last trainable position 2, row 1 position 0 ; row 2 has none ; interior gap in row 3
    mask = torch.cat([MASK, T([[True, False, True, False]])])
    out = last_token_values(T([1.0, -2.0, 9.0, 0.5]), mask)
    close(out, [[0, 0, 1.0, 0], [-2.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0.5, 0]])


def test_smallest_counts_divide_by_themselves():
    # two entries: Bessel's n - 1 = 1, var = ((1-2)^2 + (3-2)^2) / 1 = 2 -> [-1, 1] / sqrt 2
    x, two = T([[1.0, 3.0, 9.0]]), T([[True, True, False]])
    close(masked_whiten(x, two, eps=0.0), [[-(0.5**0.5), 0.5**0.5, 0.0]])
    # one trainable token in one row: every mode's normaliser is 1 (T = 3 for the Dr.GRPO one)
    one = T([[False, True, False]])
    for mode, expected in [("token_mean", 3.0), ("seq_mean_token_mean", 3.0), ("seq_mean_token_sum", 3.0),
                           ("seq_mean_token_sum_norm", 1.0)]:  # fmt: skip
        close(aggregate(x, one, mode), expected)
    close(aggregate(x, two, "token_mean", total_tokens=1), 4.0)  # a given normaliser of 1 is used as is
    close(aggregate(x, two, "seq_mean_token_sum", total_seqs=T(1.0)), 4.0)
