"""The distributed reductions with 2 real gloo ranks on CPU: each rank holds half a mini-batch; the
global normalisers, masked means and the loss summed over ranks equal one process holding all of it,
metrics agree on every rank (`_max` maxed, `loss/` summed, the rest averaged), and only rank 0 is
main. One process (no process group): every function is the identity."""

from __future__ import annotations

import pytest
import torch
from gloo_ranks import run_ranks

from reasonrl import distributed as dist
from reasonrl.algorithms.masked import masked_mean, normalisers
from reasonrl.config import AlgoConfig
from reasonrl.trainer.step import make_loss_fn
from reasonrl.types import TrainBatch


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(6, 5, generator=g) > 0.3
    mask[3] = False  # a row with no trainable token
    b = TrainBatch(input_ids=torch.zeros(6, 7, dtype=torch.long), attention_mask=torch.ones(6, 7, dtype=torch.long),
                   mask=mask, prompt_len=2, advantages=torch.randn(6, 5, generator=g),
                   old_logprobs=-torch.rand(6, 5, generator=g))  # fmt: skip
    return b, -torch.rand(6, 5, generator=g)


def _loss(batch, logprobs, counts, agg):
    algo = AlgoConfig(loss_agg=agg)
    return make_loss_fn(algo, counts["total_tokens"], counts["total_seqs"], 5)(batch, logprobs, None)[0]


def _rank(r: int, port: int, out):
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    try:
        batch, logprobs = _batch()
        rows = slice(0, 4) if r == 0 else slice(4, 6)  # uneven shards
        mine, lp = batch.select(rows), logprobs[rows]
        counts = dist.global_normalisers(mine.mask)
        losses = {agg: float(dist.all_reduce_sum(_loss(mine, lp, counts, agg))) for agg in
                  ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")}  # fmt: skip
        mean = float(dist.global_masked_mean(lp, mine.mask))
        metrics = dist.reduce_metrics({"a": float(r), "b_max": float(10 - r), "loss/x": 1.0})
        try:  # rank 1 has a key rank 0 lacks: both fail with the same clear error, nothing mixed up
            dist.reduce_metrics({"a": 1.0, **({"only_1": 2.0} if r == 1 else {})})
            mismatch = None
        except dist.RankError as e:
            mismatch = str(e)
        # verifier health: rank 1's share had no "b" problem, the counts weight the rates
        health = {"verifier/count": 4.0, "verifier/a/count": 4.0 - 2 * r, "verifier/a/error_rate": 0.5 * r}
        health = dist.reduce_metrics({**health, **({"verifier/b/count": 2.0, "verifier/b/error_rate": 1.0}
                                                   if r == 1 else {})})  # fmt: skip
        summed = dist.sum_over_ranks({"a": 1.0 + r, **({"only_1": 2.0} if r == 1 else {})})
        out.put((r, dist.rank(), dist.world_size(), dist.is_main(), {k: float(v) for k, v in counts.items()},
                 losses, mean, metrics, mismatch, health, summed))  # fmt: skip
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(120)
def test_two_gloo_ranks_equal_one_process():
    results = run_ranks(_rank, 2, timeout=90)
    batch, logprobs = _batch()
    whole = {k: float(v) for k, v in normalisers(batch.mask).items()}
    for r, rank, world, main, counts, losses, mean, metrics, mismatch, health, summed in results:
        assert summed == {"a": 3.0, "only_1": 2.0}  # each key over the ranks that hold it
        assert mismatch == f"rank {r} of 2: the ranks' metrics differ (missing: {{0: ['only_1']}})"
        assert (rank, world, main) == (r, 2, r == 0)
        assert counts == whole  # every rank divides by the whole mini-batch's counts
        for agg, loss in losses.items():
            single = float(_loss(batch, logprobs, normalisers(batch.mask), agg))
            assert loss == pytest.approx(single, rel=1e-6, abs=1e-7), agg
        assert mean == pytest.approx(float(masked_mean(logprobs, batch.mask)), rel=1e-6)
        assert metrics == {"a": 0.5, "b_max": 10.0, "loss/x": 2.0}
        # what one process scoring all 8 calls reports: 6 "a" calls of which 1 failed, 2 "b" calls, both failed
        assert health == {"verifier/count": 8.0, "verifier/a/count": 6.0, "verifier/a/error_rate": 1 / 6,
                          "verifier/b/count": 2.0, "verifier/b/error_rate": 1.0}  # fmt: skip


def test_one_process_is_the_identity():
    batch, logprobs = _batch()
    assert (dist.rank(), dist.world_size(), dist.is_main()) == (0, 1, True)
    t = torch.tensor([1.5, 2.0])
    assert dist.all_reduce_sum(t) is t
    assert dist.global_normalisers(batch.mask) == normalisers(batch.mask)
    assert torch.equal(dist.global_masked_mean(logprobs, batch.mask), masked_mean(logprobs, batch.mask))
    m = {"a": 1.0, "x_max": 2.0}
    assert dist.reduce_metrics(m) is m
    assert dist.sum_over_ranks(m) == m and dist.sum_over_ranks(m) is not m


@pytest.mark.parametrize("cuda", [False, True])
def test_a_launch_on_cuda_reduces_cpu_tensors_too(monkeypatch, cuda):
    """Under torchrun on a GPU the group must carry CPU tensors as well as CUDA ones: the normalisers and
    metrics reduced here are CPU tensors, and an NCCL-only group refused them at the first update ("No
    backend type associated with device type cpu", `torchrun --nproc-per-node 1 ... train.engine=fsdp2`
    on an H100). Each rank's device is its LOCAL_RANK."""
    calls: dict = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.setdefault("set_device", d))
    monkeypatch.setattr(torch.distributed, "init_process_group",
                        lambda backend, **kw: calls.update(backend=backend, **kw))  # fmt: skip
    assert dist.init_from_env(timeout_s=5) is True
    if cuda:
        assert set(calls["backend"].split(",")) == {"cpu:gloo", "cuda:nccl"}
        assert calls["device_id"] == torch.device("cuda", 1) == calls["set_device"]
    else:
        assert calls["backend"] == "gloo" and "device_id" not in calls and "set_device" not in calls
    assert calls["timeout"].total_seconds() == 5
