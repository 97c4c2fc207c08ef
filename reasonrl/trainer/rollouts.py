"""Collecting scored rollouts for a step, and the rollout / reward metrics.

Owns: prompt encoding + generation + scoring into `RolloutGroup`s, the `reward/` and `rollout/`
metrics, and the sample of rollouts written to rollouts.jsonl. Does not own: dynamic-sampling
refills and the ReMax baseline (`trainer.sampling`), verifier logic (`rewards`), or writing the
files (`trainer.metrics`).
"""

from __future__ import annotations

import random

import torch

from reasonrl.config import RunConfig
from reasonrl.data.prompts import encode_prompts, prompt_opens_think, scoring_text
from reasonrl.rollout.base import SamplingParams
from reasonrl.types import Problem, RolloutGroup, TrainBatch


def make_scorer(cfg: RunConfig):
    """The reward runner: cheap verifiers inline, the rest in killable worker processes."""
    from reasonrl.rewards.runner import RewardRunner

    rc = cfg.reward
    return RewardRunner(
        workers=rc.workers,
        timeout_s=rc.timeout_s,
        weights=dict(rc.weights),
        options={k: dict(v) for k, v in rc.options.items()},
    )


def collect_rollouts(run, problems: list[Problem], params: SamplingParams) -> tuple[list[RolloutGroup], dict]:
    prompt_ids = encode_prompts(run.tokenizer, problems, run.max_prompt_tokens)
    completions = run.rollout_engine.generate(prompt_ids, params)
    groups = [RolloutGroup(p, ids, cs) for p, ids, cs in zip(problems, prompt_ids, completions)]
    flat = [(g, c) for g in groups for c in g.completions]
    opens = {id(g): run.think_from_prompt and prompt_opens_think(run.tokenizer, g.problem) for g in groups}
    texts = [scoring_text(c.text, opens[id(g)]) for g, c in flat]
    results, health = run.scorer.score(texts, [g.problem for g, _ in flat])
    it = iter(results)
    for g in groups:
        for _ in g.completions:
            res = next(it)
            g.rewards.append(res.score)
            g.infos.append(res.info)
    scores = torch.tensor([r.score for r in results])
    metrics = {
        "reward/mean": scores.mean().item(),
        "reward/std": scores.std().item() if len(scores) > 1 else 0.0,
        "reward/accuracy": sum(float(r.info.get("correctness", r.score)) >= 1.0 for r in results)
        / len(results),
        "reward/no_answer_frac": sum(r.info.get("extracted") is None for r in results) / max(len(results), 1),
        "reward/solved_all_frac": sum(min(g.rewards) >= 1.0 for g in groups) / len(groups),
        "reward/solved_none_frac": sum(max(g.rewards) <= 0.0 for g in groups) / len(groups),
        **health,
    }
    return groups, metrics


def rollout_metrics(batch: TrainBatch) -> dict[str, float]:
    lengths = batch.extras["lengths"].float()
    return {
        "rollout/response_length": lengths.mean().item(),
        "rollout/response_length_max": lengths.max().item(),
        "rollout/truncated_frac": batch.extras["truncated"].float().mean().item(),
        "rollout/batch_size": float(batch.size),
    }


def sample_rows(groups: list[RolloutGroup], k: int, step: int) -> list[dict]:
    rng = random.Random(step)
    flat = [(g, i) for g in groups for i in range(len(g.completions))]
    out = []
    for g, i in rng.sample(flat, min(k, len(flat))):
        out.append(
            {
                "uid": g.problem.uid,
                "prompt": g.problem.user_text,
                "completion": g.completions[i].text,
                "reward": g.rewards[i],
                "ground_truth": g.problem.ground_truth,
                "reason": g.infos[i].get("reason"),
            }
        )
    return out
