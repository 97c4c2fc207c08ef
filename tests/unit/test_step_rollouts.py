"""What one step generates, in one process (trainer/sampling.py): `collect_step` with dynamic sampling
off (the round as drawn, every group kept) and on (only varied groups, refilled, round metrics
averaged), the ReMax greedy baseline (first greedy completion of each prompt, scored, shaped,
repeated over its group's rows) and `step_rollouts` (the step's own seed, sampler metrics and state,
the baseline only when the estimator needs it). Two ranks: test_dynamic_sampling_ranks.py."""

from __future__ import annotations

from types import SimpleNamespace
from unittest.mock import patch

import pytest
import torch

import reasonrl.trainer.sampling as sampling
from reasonrl.config import AlgoConfig, RunConfig
from reasonrl.data.sampler import PromptSampler
from reasonrl.rollout.base import SamplingParams
from reasonrl.trainer.setup import step_seed
from reasonrl.types import Completion, Problem, RolloutGroup

PROMPTS, N = 4, 2


def _problems(k: int = 12) -> list[Problem]:
    return [Problem(prompt=[{"role": "user", "content": f"q{i}"}], ground_truth=str(i), data_source="test", uid=f"p{i}")
            for i in range(k)]  # fmt: skip


class _Sampler(PromptSampler):
    """A plain sampler that records what it was shown and reports one metric."""

    def __init__(self, problems):
        super().__init__(problems, PROMPTS, seed=0, shuffle=False)
        self.seen: list[list[str]] = []

    def observe(self, groups) -> None:
        self.seen.append([g.problem.uid for g in groups])

    def metrics(self) -> dict[str, float]:
        return {"curriculum/level": 3.0}


def _fake_rollouts(calls: list):
    """Problem p<i> varies (rewards [1, 0]) in round r when (i + seed) is even; else [0, 0]."""

    def collect(run, problems, params, demonstrations=None):
        calls.append(params)
        groups = []
        for p in problems:
            i = int(p.uid[1:])
            rewards = [1.0, 0.0] if (i + params.seed) % 2 == 0 else [0.0, 0.0]
            comps = [
                Completion(text=f"{p.uid}/{k}", token_ids=[i, k], sampler_logprobs=None) for k in range(N)
            ]
            groups.append(RolloutGroup(p, [7, i], comps, rewards=rewards))
        return groups, {"reward/mean": float(params.seed)}

    return collect


def _run(problems=None) -> SimpleNamespace:
    return SimpleNamespace(sampler=_Sampler(problems or _problems()))


def test_without_dynamic_sampling_the_round_is_trained_as_drawn():
    run, calls = _run(), []
    with patch.object(sampling, "collect_rollouts", _fake_rollouts(calls)):
        groups, metrics = sampling.collect_step(run, SamplingParams(n=N, seed=1), AlgoConfig())
    # every drawn group, the all-zero ones included (p0, p2 do not vary at seed 1)
    assert [g.problem.uid for g in groups] == ["p0", "p1", "p2", "p3"]
    assert [c.seed for c in calls] == [1]  # one round, with the step's own seed
    assert run.sampler.seen == [["p0", "p1", "p2", "p3"]]  # the curriculum saw it
    assert metrics == {"reward/mean": 1.0}  # no dynamic-sampling metrics when it is off


def test_dynamic_sampling_keeps_varied_groups_over_rounds_and_averages_their_metrics():
    run, calls = _run(), []
    algo = AlgoConfig()
    algo.dynamic_sampling.enabled, algo.dynamic_sampling.max_rounds = True, 3
    with patch.object(sampling, "collect_rollouts", _fake_rollouts(calls)):
        groups, metrics = sampling.collect_step(run, SamplingParams(n=N, seed=1), algo)
    # seed 1 keeps the odd problems of round 0 (p1, p3); seed 2 keeps the even ones of round 1 (p4, p6)
    assert [g.problem.uid for g in groups] == ["p1", "p3", "p4", "p6"]
    assert [c.seed for c in calls] == [1, 2]
    assert run.sampler.seen == [["p0", "p1", "p2", "p3"], ["p4", "p5", "p6", "p7"]]
    assert metrics == {
        "reward/mean": 1.5,  # the mean over both rounds
        "rollout/ds_rounds": 2.0,
        "rollout/ds_dropped_groups": 4.0,
        "rollout/ds_padded_groups": 0.0,
        "rollout/ds_fallback": 0.0,
    }


def test_an_empty_round_keeps_no_groups():
    assert sampling.varied_groups([]) == []


class _Greedy:
    """An engine that answers each prompt with `params.n` completions; the first is `right` for even
    prompts and 5 tokens long, the others `wrong`."""

    def __init__(self):
        self.params: list[SamplingParams] = []

    def generate(self, prompt_ids, params):
        self.params.append(params)
        out = []
        for ids in prompt_ids:
            first = "right" if ids[-1] % 2 == 0 else "wrong"
            out.append([Completion(text=first, token_ids=[1] * 5, sampler_logprobs=None)] +
                       [Completion(text="wrong", token_ids=[1], sampler_logprobs=None) for _ in range(params.n - 1)])  # fmt: skip
        return out


class _Scorer:
    def score(self, texts, problems):
        assert len(texts) == len(problems)
        return [SimpleNamespace(score=1.0 if t == "right" else 0.0) for t in texts], {}


def _groups(sizes: list[int]) -> list[RolloutGroup]:
    return [RolloutGroup(p, [7, int(p.uid[1:])], [Completion(text="x", token_ids=[1], sampler_logprobs=None)] * n, rewards=[0.0] * n)
            for p, n in zip(_problems(len(sizes)), sizes)]  # fmt: skip


def test_greedy_baseline_scores_each_prompts_greedy_completion_once_per_row():
    run = SimpleNamespace(rollout_engine=_Greedy(), scorer=_Scorer())
    base = sampling.greedy_baseline(run, _groups([2, 3, 1]), AlgoConfig(), max_new_tokens=8)
    torch.testing.assert_close(base, torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0]))
    (p,) = run.rollout_engine.params
    assert (p.n, p.temperature, p.max_new_tokens) == (1, 0.0, 8)


def test_greedy_baseline_is_shaped_like_the_rewards():
    run = SimpleNamespace(rollout_engine=_Greedy(), scorer=_Scorer())
    algo = AlgoConfig()
    algo.shaping.reward_map = [-1.0, 1.0]
    algo.shaping.overlong_buffer, algo.shaping.overlong_penalty = 4, 2.0
    # 5 tokens of 8 with a buffer of 4: one token into the buffer, penalty 2 * 1/4
    base = sampling.greedy_baseline(run, _groups([1, 2]), algo, max_new_tokens=8)
    torch.testing.assert_close(base, torch.tensor([0.5, -1.5, -1.5]))


@pytest.mark.parametrize(
    "needs, has_baseline", [(frozenset(), False), (frozenset({"baseline_rewards"}), True)]
)
@pytest.mark.parametrize("step", [0, 5])
def test_step_rollouts_seed_metrics_state_and_baseline(step, needs, has_baseline):
    cfg = RunConfig()
    cfg.train.seed, cfg.rollout.n, cfg.rollout.max_new_tokens = 11, N, 8
    run, calls = _run(), []
    run.rollout_engine, run.scorer = _Greedy(), _Scorer()
    for _ in range(step):  # earlier steps moved the sampler on
        run.sampler.next()
    with patch.object(sampling, "collect_rollouts", _fake_rollouts(calls)):
        out = sampling.step_rollouts(run, cfg, step, needs, version=step + 2)
    (params,) = calls
    assert params.seed == step_seed(11, step) and (params.n, params.max_new_tokens) == (N, 8)
    assert [g.problem.uid for g in out.groups] == [f"p{(4 * step + i) % 12}" for i in range(PROMPTS)]
    assert out.metrics == {"reward/mean": float(params.seed), "curriculum/level": 3.0}
    assert out.version == step + 2 and 0 < out.seconds < 600
    drawn = PROMPTS * (step + 1)  # prompts drawn so far; an epoch rolls over at its next draw
    epoch = (drawn - 1) // 12
    assert out.sampler_state == run.sampler.state_dict() == {"epoch": epoch, "index": drawn - 12 * epoch}
    if has_baseline:  # even problems' greedy answers are right: one value per row
        want = [1.0 if (4 * step + i) % 12 % 2 == 0 else 0.0 for i in range(PROMPTS) for _ in range(N)]
        assert out.baseline.tolist() == want
    else:
        assert out.baseline is None and run.rollout_engine.params == []  # no greedy pass at all


def test_solved_fractions_count_correctness_not_the_shaped_reward(monkeypatch):
    import reasonrl.trainer.rollouts as rollouts
    from reasonrl.types import RewardResult

    def group(i, correct):
        # solved answers under a length penalty score 0.8, unsolved ones with a format bonus 0.2
        results = [
            RewardResult(0.8 if c else 0.2, {"correctness": float(c), "extracted": "x"}) for c in correct
        ]
        comps = [Completion(text="x", token_ids=[1], sampler_logprobs=[0.0]) for _ in correct]
        return RolloutGroup(_problems(3)[i], [7], comps, rewards=[r.score for r in results], results=results)

    groups = [group(0, [1, 1]), group(1, [0, 0]), group(2, [1, 0])]
    monkeypatch.setattr(rollouts, "generate_and_score", lambda *a: (groups, {}))
    run = SimpleNamespace(rollout_engine=None, tokenizer=None, scorer=None, max_prompt_tokens=None, think_from_prompt=True)  # fmt: skip
    _, m = rollouts.collect_rollouts(run, [], SamplingParams())
    assert m["reward/solved_all_frac"] == pytest.approx(1 / 3) and m[
        "reward/solved_none_frac"
    ] == pytest.approx(1 / 3)
    assert m["reward/accuracy"] == 0.5 and m["reward/mean"] == pytest.approx(0.5)  # (0.8 * 3 + 0.2 * 3) / 6
