"""`sync_reference` on FSDP2 (2 gloo ranks): each rank moves its own shards of the reference toward the
policy's, the gathered reference is alpha * policy + (1 - alpha) * initial exactly, and the full state
saved for a checkpoint loads back into the shards; `reset_optimizer` zeroes the sharded optimizer state."""

from __future__ import annotations

import copy

import pytest
import torch
from gloo_ranks import run_ranks
from test_fsdp2 import STEPS, _full, _model, _train


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
        # ProRL's optimizer restart on the shards: every rank's state is all zeros, with the same keys, and
        # so is the full state gathered for a checkpoint (on rank 0: cpu_offload leaves the others empty)
        keys = {id(p) for p in engine.optimizer.state}  # (parameters: compared by identity)
        engine.reset_optimizer()
        local = [
            v.to_local() if hasattr(v, "to_local") else v
            for s in engine.optimizer.state.values()
            for v in s.values()
        ]
        gathered = engine.state_dict()["optimizer"].get("state", {})
        zero = {id(p) for p in engine.optimizer.state} == keys and all(
            float(v.abs().sum()) == 0 for v in local
        )
        zero = zero and all(float(v.abs().sum()) == 0 for s in gathered.values() for v in s.values())
        _train(engine, slice(0, 3) if r == 0 else slice(3, 6))  # and training goes on from it
        steps = {float(s["step"]) for s in engine.optimizer.state.values()}
        as_np = lambda d: {n: t.numpy() for n, t in d.items()}  # noqa: E731 - sent by value
        out.put((r, [as_np(x) for x in (mixed, policy, copied, restored, saved)], (len(keys), zero, steps)))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(180)
def test_a_sharded_reference_syncs_saves_and_loads():
    initial = _full(_model())
    for _, (mixed, policy, copied, restored, saved), (n_keys, zero, steps) in run_ranks(_rank, 2):
        assert n_keys > 5 and zero and steps == {float(STEPS)}  # counted from 0 again, not 2 * STEPS
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
