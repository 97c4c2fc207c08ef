"""What a step generates beyond one plain round of rollouts: DAPO dynamic sampling with refill, and
the ReMax greedy baseline.

Owns: `step_rollouts` (everything one step generates: its groups, reward metrics and the ReMax
baseline, tagged with the policy version that sampled them), `collect_step` (one round of scored groups, or, with `algo.dynamic_sampling.enabled`, rounds of new
prompts until the batch holds only groups whose rewards differ), `fill_groups` (the refill / cap
policy, pure Python so it is unit-tested without a model) and `greedy_baseline` (reward of the
temperature-0 completion of each prompt, repeated over its group's rows). Does not own: generation
and scoring themselves (`trainer.rollouts`), the keep test (`algorithms.filters.dynamic_sampling_mask`)
or reward shaping (`trainer.shaping`, applied to the baseline too so both are on the same scale).

Dynamic sampling (DAPO, arXiv:2503.14476). The keep test uses the verifier scores (before
`algo.shaping.reward_map` / overlong shaping), like DAPO's accuracy filter. Each round draws a full step of
new prompts (`sampler.next()`, so resume stays exact) with seed `step_seed + round`; kept groups are
appended in order until the step's prompt count is reached (extra kept groups are discarded). After
`dynamic_sampling_max_rounds` extra rounds (the cap):
  - some groups kept: the batch is filled by repeating the kept groups in order (each copy is its
    own group id, with the same advantages), so global_batch and mini-batch divisibility hold;
    logged as `rollout/ds_padded_groups`;
  - no group kept at all: the last round is used as drawn (`rollout/ds_fallback` = 1). Its groups
    have zero spread, so group-baseline advantages are 0 and only KL / entropy terms move the policy.
Logged every step with dynamic sampling on: `rollout/ds_rounds` (generation rounds used),
`rollout/ds_dropped_groups`, `rollout/ds_padded_groups`, `rollout/ds_fallback`. Reward metrics are
the mean over all rounds (they describe the policy, not the filtered batch).
With several ranks each rank generates its share of every round, the scored groups are all-gathered,
and every rank runs the same keep / refill decisions on the whole round (so all take the same number
of rounds, in lock-step); each then trains on its contiguous share of the kept groups.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from reasonrl import distributed as dist
from reasonrl.algorithms.filters import dynamic_sampling_mask
from reasonrl.config import AlgoConfig, RunConfig
from reasonrl.rollout.base import SamplingParams
from reasonrl.trainer.metrics import mean_metrics
from reasonrl.trainer.rollouts import collect_rollouts
from reasonrl.trainer.shaping import shape_rewards
from reasonrl.types import RolloutGroup

Draw = Callable[[int], tuple[list[RolloutGroup], dict]]


def varied_groups(groups: list[RolloutGroup]) -> list[RolloutGroup]:
    """The groups whose completions did not all get the same verifier score."""
    if not groups:
        return []
    rewards = torch.tensor([float(x) for g in groups for x in g.rewards])
    gid = torch.tensor([i for i, g in enumerate(groups) for _ in g.rewards], dtype=torch.long)
    keep_row = dynamic_sampling_mask(rewards, gid)
    keep = torch.zeros(len(groups), dtype=torch.bool).index_put_((gid,), keep_row)
    return [g for g, k in zip(groups, keep.tolist()) if k]


def fill_groups(
    draw: Draw, need: int, max_rounds: int
) -> tuple[list[RolloutGroup], list[dict], dict[str, float]]:
    """Call `draw(round)` until `need` varied groups are kept or `max_rounds` extra rounds are spent.

    Returns (groups, the rounds' reward metrics, dynamic-sampling metrics); see the module docstring
    for what happens at the cap. `len(groups) == need` unless a round returned fewer than `need`.
    """
    kept: list[RolloutGroup] = []
    round_metrics: list[dict] = []
    dropped = 0
    last: list[RolloutGroup] = []
    rounds = 0
    for rnd in range(max_rounds + 1):
        last, metrics = draw(rnd)
        round_metrics.append(metrics)
        rounds = rnd + 1
        varied = varied_groups(last)
        dropped += len(last) - len(varied)
        kept.extend(varied)
        if len(kept) >= need:
            break
    padded, fallback = 0, 0
    if len(kept) >= need:
        out = kept[:need]
    elif kept:
        padded = need - len(kept)
        out = kept + [kept[i % len(kept)] for i in range(padded)]
    else:
        out, fallback = last, 1
    stats = {
        "rollout/ds_rounds": float(rounds),
        "rollout/ds_dropped_groups": float(dropped),
        "rollout/ds_padded_groups": float(padded),
        "rollout/ds_fallback": float(fallback),
    }
    return out, round_metrics, stats


def round_params(params: SamplingParams, rnd: int) -> SamplingParams:
    """Round 0 samples exactly like a step without dynamic sampling; later rounds shift the seed."""
    if rnd == 0 or params.seed is None:
        return params
    return replace(params, seed=params.seed + rnd)


def collect_step(run, params: SamplingParams, algo: AlgoConfig,
                 demonstrations: str | None = None) -> tuple[list[RolloutGroup], dict]:  # fmt: skip
    """The step's scored groups and reward metrics (one round, or dynamic sampling with refill).
    `demonstrations`: the response key of `algo.guidance` (`trainer.guidance`); the curriculum's pass rates
    see the samples alone, the keep test of dynamic sampling the whole group."""
    from reasonrl.trainer.guidance import sampled_only

    several = dist.world_size() > 1
    dynamic = algo.dynamic_sampling.enabled

    def draw(rnd: int) -> tuple[list[RolloutGroup], dict]:
        # every rank draws the whole step (so samplers stay identical) and generates its own share
        problems = dist.shard(run.sampler.next())
        groups, metrics = collect_rollouts(run, problems, round_params(params, rnd), demonstrations)
        if not several:
            run.sampler.observe(sampled_only(groups))
            return groups, metrics
        if dynamic:  # every rank sees the whole round in rank order, so all take the same decisions
            everyone = [g for part in dist.all_gather_objects(groups) for g in part]
            run.sampler.observe(sampled_only(everyone))
            return everyone, metrics
        # the curriculum's record (levels, pass rates) sees every round, of every rank, in rank order
        seen = dist.all_gather_objects([(g.problem, g.correctness) for g in sampled_only(groups)])
        run.sampler.observe([RolloutGroup(p, [], [], rewards=r) for part in seen for p, r in part])
        return groups, metrics

    if not dynamic:
        return draw(0)
    groups, round_metrics, stats = fill_groups(draw, run.sampler.batch_size, algo.dynamic_sampling.max_rounds)
    # several ranks: the kept groups of the whole step, of which each rank trains on its share
    return dist.shard(groups), {**mean_metrics(round_metrics), **stats}


def greedy_baseline(run, groups: list[RolloutGroup], algo: AlgoConfig, max_new_tokens: int) -> torch.Tensor:
    """ReMax baseline [N]: the shaped reward of each prompt's greedy completion, one per row."""
    greedy = SamplingParams.greedy(max_new_tokens)
    completions = [cs[0] for cs in run.rollout_engine.generate([g.prompt_ids for g in groups], greedy)]
    results, _ = run.scorer.score([c.answer_text for c in completions], [g.problem for g in groups])
    scores = torch.tensor([float(r.score) for r in results])
    lengths = torch.tensor([len(c.token_ids) for c in completions])
    truncated = torch.tensor([c.finish_reason == "length" for c in completions])
    baseline = shape_rewards(scores, lengths, algo, max_new_tokens, truncated)
    return baseline.repeat_interleave(torch.tensor([len(g.completions) for g in groups]))


@dataclass
class StepRollouts:
    """What one step trains on, from whichever process generated it."""

    groups: list[RolloutGroup]
    metrics: dict[str, float]  # reward / dynamic-sampling metrics
    baseline: torch.Tensor | None  # ReMax greedy rewards, one per row (None unless the estimator needs it)
    version: int  # the policy version (optimizer updates applied) the samples were drawn from
    seconds: float = 0.0  # generation + scoring time
    sampler_state: dict = field(default_factory=dict)  # the prompt sampler after this step's draws


def step_rollouts(run, cfg: RunConfig, step: int, needs: frozenset[str], version: int) -> StepRollouts:
    """Step `step`'s scored groups (and ReMax baseline), sampled with the step's own seed."""
    from reasonrl.trainer.setup import step_seed

    t0 = time.perf_counter()
    r = cfg.rollout
    params = SamplingParams.of_rollout(r, step_seed(cfg.train.seed, step))
    guided = cfg.data.response_key if cfg.algo.guidance.enabled else None  # demonstrations in the groups
    if (
        getattr(run, "scorer", None) is not None
    ):  # TRL's trainer_state for its reward functions (trl_function)
        run.scorer.trainer_state = {"global_step": step - 1, "max_steps": cfg.train.steps}
    groups, metrics = collect_step(run, params, cfg.algo, guided)
    metrics = {**metrics, **run.sampler.metrics()}  # curriculum levels, mixture shares
    baseline = (  # ReMax: rewards of greedy completions (no random numbers drawn)
        greedy_baseline(run, groups, cfg.algo, r.max_new_tokens) if "baseline_rewards" in needs else None
    )
    return StepRollouts(
        groups, metrics, baseline, version, time.perf_counter() - t0, run.sampler.state_dict()
    )
