"""A step's rollouts with 2 real gloo ranks (trainer/sampling.py). DAPO dynamic sampling: each rank
generates its share of every round, both see the whole round, take the same keep / refill decisions
(same rounds, same metrics) and train on complementary shares of exactly the groups one process
would keep. Without it: each rank trains on its own share of the round as drawn, and the sampler
(the curriculum's record) of every rank sees the whole round in rank order."""

from __future__ import annotations

from types import SimpleNamespace
from unittest.mock import patch

import pytest
from gloo_ranks import run_ranks

from reasonrl.config import AlgoConfig
from reasonrl.data.sampler import PromptSampler
from reasonrl.rollout.base import SamplingParams
from reasonrl.types import Completion, Problem, RolloutGroup

PROMPTS, N = 4, 3  # prompts per step, completions per prompt


def _problems() -> list[Problem]:
    return [Problem(prompt=[{"role": "user", "content": f"q{i}"}], ground_truth=str(i), data_source="test", uid=f"p{i}")
            for i in range(40)]  # fmt: skip


def _fake_rollouts(run, problems, params, demonstrations=None):
    """Scores that depend only on the problem and the round's seed: a third of the groups vary."""
    groups = []
    for p in problems:
        i = int(p.uid[1:])
        varied = (i + params.seed) % 3 == 0
        rewards = [1.0, 0.0, 1.0] if varied else [0.0] * N
        comps = [
            Completion(text=f"{p.uid}/{k}", token_ids=[i, k], sampler_logprobs=[-0.1, -0.2]) for k in range(N)
        ]
        groups.append(RolloutGroup(p, [1, 2], comps, rewards=rewards))
    return groups, {"reward/mean": sum(sum(g.rewards) for g in groups) / (N * len(groups))}


class _Recording(PromptSampler):
    def __init__(self):
        super().__init__(_problems(), PROMPTS, seed=0)
        self.seen: list[tuple[str, list[float]]] = []

    def observe(self, groups) -> None:
        self.seen += [(g.problem.uid, list(g.rewards)) for g in groups]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "seen": self.seen}


def _collect(dynamic: bool = True) -> tuple[list[str], dict, dict]:
    import reasonrl.trainer.sampling as sampling

    run = SimpleNamespace(sampler=_Recording())
    algo = AlgoConfig()
    algo.dynamic_sampling.enabled, algo.dynamic_sampling.max_rounds = dynamic, 6
    # patched for this call only: the single-process reference runs in pytest's own process, where a
    # lasting patch made every later training test in it sample from these fakes
    with patch.object(sampling, "collect_rollouts", _fake_rollouts):
        groups, metrics = sampling.collect_step(run, SamplingParams(n=N, seed=1), algo)
    return [g.problem.uid for g in groups], metrics, run.sampler.state_dict()


def _rank(r: int, port: int, out, dynamic: bool = True):
    import torch

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    try:
        out.put((r, *_collect(dynamic)))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(120)
def test_two_ranks_keep_the_groups_one_process_keeps_and_split_them():
    single_uids, single_metrics, single_state = _collect()
    assert len(single_uids) == PROMPTS and single_metrics["rollout/ds_rounds"] >= 2  # refills happened
    (_, uids0, m0, state0), (_, uids1, m1, state1) = run_ranks(_rank, 2)
    assert uids0 + uids1 == single_uids  # complementary contiguous shares of the same kept groups
    assert len(uids0) == len(uids1) == PROMPTS // 2
    for k in (
        "rollout/ds_rounds",
        "rollout/ds_dropped_groups",
        "rollout/ds_padded_groups",
        "rollout/ds_fallback",
    ):
        assert m0[k] == m1[k] == single_metrics[k], k  # one decision, in lock-step
    assert state0 == state1 == single_state  # samplers drew the same rounds on every rank


@pytest.mark.timeout(120)
def test_two_ranks_without_dynamic_sampling_train_their_own_share_and_record_the_whole_round():
    single_uids, single_metrics, single_state = _collect(dynamic=False)
    assert len(single_uids) == PROMPTS and len(single_state["seen"]) == PROMPTS
    assert "rollout/ds_rounds" not in single_metrics
    (_, uids0, m0, state0), (_, uids1, m1, state1) = run_ranks(_rank, 2, False)
    assert uids0 == single_uids[:2] and uids1 == single_uids[2:]  # each its own half, no more
    assert state0 == state1 == single_state  # both recorded all four groups and their rewards, in order
