"""Micro-batch and data-parallel invariance of every policy loss under every aggregation mode.

A tiny linear "model" (logits = X @ W) scores a batch of 8 rows with ragged lengths (one row empty).
The whole-batch loss and dW are compared with (a) the sum over 3 uneven micro-batches, each padded only
to its own longest row, accumulating into one W, and (b) 2 simulated data-parallel ranks (5 and 3 rows,
their own copy of W, micro-batches inside), whose losses and gradients are summed (the all-reduce).
Every piece gets the global `normalisers` (summed over ranks) and norm_len = T. fp32, rtol 1e-5.
Negative controls show that local normalisers or a default norm_len break the equality.
clip_cov / kl_cov get the tokens chosen once over the whole batch (as the trainer passes them); choosing
inside each piece instead (verl's way) breaks the equality, which a negative control shows.
"""

from __future__ import annotations

import pytest
import torch

from reasonrl.algorithms import POLICY_LOSSES
from reasonrl.algorithms.correction import tis_weights
from reasonrl.algorithms.covariance import select_options, token_covariance
from reasonrl.algorithms.kl import kl_penalty
from reasonrl.algorithms.logprobs import entropy_from_logits, token_logprobs
from reasonrl.algorithms.masked import AGG_MODES, aggregate, normalisers
from reasonrl.algorithms.value import value_loss

B, TT, D, V = 8, 7, 5, 11
LENGTHS = [7, 3, 0, 5, 1, 7, 2, 4]
MICRO = [(0, 3), (3, 4), (4, 8)]
RANKS = [[(0, 2), (2, 5)], [(5, 8)]]
RTOL, ATOL = 1e-5, 1e-7


def make_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, TT, D, generator=g)
    w = torch.randn(D, V, generator=g)
    w_old = w + 0.4 * torch.randn(D, V, generator=g)
    w_ref = w + 0.4 * torch.randn(D, V, generator=g)
    targets = torch.randint(0, V, (B, TT), generator=g)
    mask = torch.arange(TT).expand(B, TT) < torch.tensor(LENGTHS).unsqueeze(-1)
    old = token_logprobs(x @ w_old, targets)
    return {
        "x": x,
        "w": w,
        "wv": torch.randn(D, generator=g),
        "targets": targets,
        "mask": mask,
        "old": old,
        "ref": token_logprobs(x @ w_ref, targets),
        "sampler": old + 0.3 * torch.randn(B, TT, generator=g),
        "adv": torch.randn(B, 1, generator=g).expand(B, TT).contiguous(),
        "old_values": torch.randn(B, TT, generator=g),
        "returns": torch.randn(B, TT, generator=g),
    }


def piece_loss(b, rows, w, wv, loss_name, mode, norms, norm_len, composite):
    """Aggregated loss of rows [lo, hi), padded only to the longest row of the piece."""
    lo, hi = rows
    cols = max(1, max(LENGTHS[lo:hi]))
    sl = (slice(lo, hi), slice(0, cols))
    mask = b["mask"][sl]
    logits = b["x"][sl] @ w
    lp = token_logprobs(logits, b["targets"][sl])
    fn = POLICY_LOSSES.get(loss_name)
    extra = dict(COV_OPTIONS.get(loss_name, {}))
    if hasattr(fn, "select") and b.get("selected") is not None:
        extra["selected"] = b["selected"][sl]
    per_tok, _ = fn(lp, b["old"][sl], b["adv"][sl], mask, clip_low=0.2, clip_high=0.28, **extra)
    if composite:
        weights, _ = tis_weights(b["old"][sl], b["sampler"][sl], mask, cap=1.5)
        per_tok = per_tok * weights + 0.1 * kl_penalty(lp, b["ref"][sl], "k3")
        per_tok = per_tok - 0.01 * entropy_from_logits(logits, chunk_rows=3)
        vl, _ = value_loss(b["x"][sl] @ wv, b["old_values"][sl], b["returns"][sl], mask, clip_range=0.2)
        per_tok = per_tok + 0.5 * vl
    return aggregate(per_tok, mask, mode, **norms, norm_len=norm_len)


def run(b, pieces_per_rank, loss_name, mode, composite, global_norms=True, norm_len=TT):
    """Sum of piece losses and summed gradients over simulated ranks (each with its own W copy)."""
    if global_norms:  # each rank counts its own rows, then the counts are all-reduced (summed)
        per_rank = [normalisers(b["mask"][p[0][0] : p[-1][1]]) for p in pieces_per_rank]
        norms = {k: sum(n[k] for n in per_rank) for k in per_rank[0]}
    total, gw, gv = torch.zeros(()), torch.zeros_like(b["w"]), torch.zeros_like(b["wv"])
    for pieces in pieces_per_rank:
        w = b["w"].clone().requires_grad_(True)
        wv = b["wv"].clone().requires_grad_(True)
        for rows in pieces:
            if not global_norms:
                norms = normalisers(b["mask"][rows[0] : rows[1]])
            loss = piece_loss(b, rows, w, wv, loss_name, mode, norms, norm_len, composite)
            loss.backward()  # gradient accumulation: grads add up in w.grad
            total = total + loss.detach()
        gw += w.grad
        gv += wv.grad if wv.grad is not None else 0.0
    return total, gw, gv


SPLITS = {"micro": [MICRO], "dp": RANKS}
LOSSES = ["ppo_clip", "gspo", "gmpo", "cispo", "sapo", "reinforce", "vespo", "clip_cov", "kl_cov"]
# wide enough that several of the 29 tokens are chosen
COV_OPTIONS = {"clip_cov": {"clip_cov_ratio": 0.2, "clip_cov_lb": 0.0, "clip_cov_ub": 100.0},
               "kl_cov": {"kl_cov_ratio": 0.2, "kl_coef": 0.5}}  # fmt: skip


def with_selection(b, loss_name):
    """The tokens clip_cov / kl_cov act on, chosen over the whole batch (trainer.step's pass)."""
    fn = POLICY_LOSSES.get(loss_name)
    if hasattr(fn, "select"):
        cov = token_covariance(b["adv"][b["mask"]], b["old"][b["mask"]])
        b["selected"] = torch.zeros_like(b["mask"])
        opts = select_options(fn, COV_OPTIONS[loss_name])
        b["selected"][b["mask"]] = fn.select(cov, torch.Generator().manual_seed(1), **opts)
        assert 3 <= int(b["selected"].sum()) < int(b["mask"].sum())
    return b


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("loss_name", LOSSES)
def test_split_matches_whole_batch(loss_name, mode, split):
    b = with_selection(make_batch(), loss_name)
    full = run(b, [[(0, B)]], loss_name, mode, composite=False)
    got = run(b, SPLITS[split], loss_name, mode, composite=False)
    assert full[1].abs().sum() > 1e-3  # not vacuous
    torch.testing.assert_close(got[0], full[0], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(got[1], full[1], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("mode", AGG_MODES)
def test_composite_objective_split_matches(mode, split):
    # ppo_clip * TIS weights + k3 KL term - entropy bonus + clipped value loss (second parameter)
    b = make_batch(seed=3)
    full = run(b, [[(0, B)]], "ppo_clip", mode, composite=True)
    got = run(b, SPLITS[split], "ppo_clip", mode, composite=True)
    assert full[2].abs().sum() > 1e-3
    for a, e in zip(got, full):
        torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL)


def test_the_batch_exercises_clipping():
    # the invariance above covers clipped and unclipped tokens on both sides
    b = make_batch()
    lp = token_logprobs(b["x"] @ b["w"], b["targets"])
    _, m = POLICY_LOSSES.get("ppo_clip")(lp, b["old"], b["adv"], b["mask"], clip_low=0.2, clip_high=0.28)
    assert m["clipfrac_low"] > 0 and m["clipfrac_high"] > 0


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean"])
def test_local_normalisers_break_invariance(mode):
    b = make_batch()
    full = run(b, [[(0, B)]], "ppo_clip", mode, composite=False)
    got = run(b, SPLITS["micro"], "ppo_clip", mode, composite=False, global_norms=False)
    assert not torch.allclose(got[0], full[0], rtol=1e-3)


def test_default_norm_len_breaks_invariance_with_ragged_padding():
    b = make_batch()
    full = run(b, [[(0, B)]], "ppo_clip", "seq_mean_token_sum_norm", composite=False, norm_len=None)
    got = run(b, SPLITS["micro"], "ppo_clip", "seq_mean_token_sum_norm", composite=False, norm_len=None)
    assert not torch.allclose(got[0], full[0], rtol=1e-3)


@pytest.mark.parametrize("loss_name", ["clip_cov", "kl_cov"])
def test_choosing_cov_tokens_per_piece_breaks_invariance(loss_name):
    b = make_batch()  # no batch-wide selection: each micro-batch chooses from its own tokens
    full = run(b, [[(0, B)]], loss_name, "token_mean", composite=False)
    got = run(b, SPLITS["micro"], loss_name, "token_mean", composite=False)
    assert not torch.allclose(got[1], full[1], rtol=1e-3)
