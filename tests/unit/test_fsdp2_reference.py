"""`sync_reference` on FSDP2 (2 gloo ranks): each rank moves its own shards of the reference toward the
policy's, the gathered reference is alpha * policy + (1 - alpha) * initial exactly, and the full state
saved for a checkpoint loads back into the shards."""

from __future__ import annotations

import copy

import pytest
import torch
from gloo_ranks import run_ranks
from test_fsdp2 import _full, _model, _train


def _rank(r: int, port: int, out):
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine

        model = _model()
        engine = FSDP2Engine(model, lr=1e-2, ref_model=copy.deepcopy(model).requires_grad_(False))
        _train(engine, slice(0, 3) if r == 0 else slice(3, 6))  # the policy moves
        engine.sync_reference(0.6)
        mixed, policy = _full(engine.ref_model), _full(model)
        saved = engine.state_dict(optimizer=False)["reference"]  # gathered in full on every rank
        engine.sync_reference(1.0)
        copied = _full(engine.ref_model)
        engine.load_reference(saved)
        restored = _full(engine.ref_model)
        as_np = lambda d: {n: t.numpy() for n, t in d.items()}  # noqa: E731 - sent by value
        out.put((r, [as_np(x) for x in (mixed, policy, copied, restored, saved)]))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(180)
def test_a_sharded_reference_syncs_saves_and_loads():
    initial = _full(_model())
    for _, (mixed, policy, copied, restored, saved) in run_ranks(_rank, 2):
        assert set(mixed) == set(initial)
        moved = 0
        for name, first in initial.items():
            want = 0.6 * torch.from_numpy(policy[name]) + 0.4 * first
            assert torch.allclose(torch.from_numpy(mixed[name]), want, atol=1e-6), name
            assert torch.equal(torch.from_numpy(copied[name]), torch.from_numpy(policy[name])), name
            assert torch.equal(torch.from_numpy(restored[name]), torch.from_numpy(mixed[name])), name
            assert torch.equal(torch.from_numpy(saved[name]), torch.from_numpy(mixed[name])), name
            moved += not torch.equal(torch.from_numpy(policy[name]), first)
        assert moved > 5  # the policy did move, so the checks above compare different tensors
