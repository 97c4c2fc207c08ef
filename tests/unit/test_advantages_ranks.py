"""Advantages with batch statistics over data-parallel ranks: reinforce_pp and reinforce_pp_baseline whiten
over the batch, gae over its trained tokens; with 2 real gloo ranks holding uneven shards (different
row counts, completion widths and reward levels) each rank's advantages equal one process's over the
whole batch (before, each rank whitened its own rows: different advantages, a different update).
grpo with std_scope="batch" (the std of every reward) as well. Group-local estimators (plain grpo) need
nothing gathered and stay rank-local."""

from __future__ import annotations

import pytest
import torch

from reasonrl.algorithms import ADVANTAGES
from reasonrl.algorithms.advantages import uses_batch_stats
from reasonrl.trainer.step import over_all_ranks

# label -> (estimator, its options)
ESTIMATORS = {"reinforce_pp": ("reinforce_pp", {}), "reinforce_pp_baseline": ("reinforce_pp_baseline", {}),
              "gae": ("gae", {}), "grpo": ("grpo", {}), "grpo_batch_std": ("grpo", {"std_scope": "batch"}),
              "gdpo": ("gdpo", {}), "gpg": ("gpg", {})}  # fmt: skip


def _whole():
    """5 rows in 3 groups; rank 0 holds group 0 (2 rows, width 3), rank 1 groups 0-1 of its own (3 rows, width 5)."""
    rewards = torch.tensor([1.0, 0.0, 0.2, 0.9, 0.4])
    group_ids = torch.tensor([0, 0, 1, 1, 2])
    mask = torch.tensor(
        [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]],
        dtype=torch.bool,
    )
    values = torch.arange(25, dtype=torch.float32).reshape(5, 5) / 50 * mask
    return rewards, group_ids, mask, values


def _shard(r: int):
    rewards, group_ids, mask, values = _whole()
    rows, width = (slice(0, 2), 3) if r == 0 else (slice(2, 5), 5)
    ids = group_ids[rows] - group_ids[rows].min()  # each rank numbers its own groups from 0
    return rewards[rows], ids, mask[rows, :width], values[rows, :width]


def _kwargs(label, mask, values, rewards):
    name, options = ESTIMATORS[label]
    if name == "gdpo":  # two terms per row, from the row's reward (so each rank holds its rows' terms)
        terms = torch.stack([rewards, (rewards > 0.3).float()], 1)
        return {"term_rewards": terms, "term_weights": (1.0, 0.5)}
    return {"values": values, "mask": mask, "token_rewards": None} if name == "gae" else dict(options)


def _fn(label):
    return ADVANTAGES.get(ESTIMATORS[label][0])


def _rank(r: int, port: int, out):
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    try:
        rewards, ids, mask, values = _shard(r)
        got = {}
        for name in ESTIMATORS:
            res = over_all_ranks(_fn(name), rewards, ids, _kwargs(name, mask, values, rewards))
            got[name] = [x.tolist() for x in res] if isinstance(res, tuple) else res.tolist()
        out.put((r, got))
    finally:
        torch.distributed.destroy_process_group()


def test_each_rank_gets_the_advantages_one_process_computes_over_the_whole_batch():
    from gloo_ranks import run_ranks

    results = dict(run_ranks(_rank, 2, timeout=90))
    rewards, group_ids, mask, values = _whole()
    for name in ESTIMATORS:
        whole = _fn(name)(rewards, group_ids, **_kwargs(name, mask, values, rewards))
        for r in (0, 1):
            rows, width = (slice(0, 2), 3) if r == 0 else (slice(2, 5), 5)
            if isinstance(whole, tuple):
                want = [x[rows, :width] for x in whole]
                for got, w in zip(results[r][name], want):
                    assert torch.allclose(torch.tensor(got), w, atol=1e-6), (name, r)
                # every trained token of the whole batch in place, no padding leaked into it
                assert torch.equal(torch.tensor(results[r][name][0]) != 0, mask[rows, :width]), name
            else:
                assert results[r][name] == pytest.approx(whole[rows].tolist(), abs=1e-6), (name, r)
        # the negative control: the rank-local statistics give other advantages (what was computed before)
        local = _fn(name)(*_shard(0)[:2], **_kwargs(name, *_shard(0)[2:], _shard(0)[0]))
        local = local[0] if isinstance(local, tuple) else local
        whole0 = (whole[0] if isinstance(whole, tuple) else whole)[0:2]
        whole0 = whole0[:, :3] if whole0.dim() == 2 else whole0
        same = torch.allclose(local, whole0, atol=1e-6)
        assert same is (name == "grpo"), name  # group-local: the same; batch statistics: not


def test_one_process_computes_as_before():
    rewards, group_ids, mask, values = _whole()
    for name in ESTIMATORS:
        fn = _fn(name)
        a, b = (
            over_all_ranks(fn, rewards, group_ids, _kwargs(name, mask, values, rewards)),
            fn(rewards, group_ids, **_kwargs(name, mask, values, rewards)),
        )
        if isinstance(a, tuple):
            assert all(torch.equal(x, y) for x, y in zip(a, b))
        else:
            assert torch.equal(a, b)
    assert {n for n in ADVANTAGES.names() if uses_batch_stats(ADVANTAGES.get(n), {})} == {
        "reinforce_pp",
        "reinforce_pp_baseline",
        "gae",
        "gdpo",
        "gpg",
    }
    assert uses_batch_stats(ADVANTAGES.get("grpo"), {"std_scope": "batch"})
    assert uses_batch_stats(ADVANTAGES.get("gdpo"), {})
