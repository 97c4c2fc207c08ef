"""Accuracy of a policy on problems: greedy accuracy and mean@n at a sampling temperature.

Owns: `evaluate` (generate with a rollout engine, score with the routed verifiers through a
`RewardRunner` (the same runner, options, time limits and think-block policy as training), average).
Does not own: benchmark statistics (`eval.metrics`: pass@k, maj@k, intervals) or benchmark suites.
"""

from __future__ import annotations

from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.scored import generate_and_score
from reasonrl.types import Problem


def evaluate(engine, tokenizer, problems: list[Problem], params: SamplingParams, batch_size: int = 256,
             think_from_prompt: bool = True, scorer=None):  # fmt: skip
    """Returns (mean score over all problems x n samples, per-problem list of (texts, scores)).

    `scorer`: a `RewardRunner` (training passes its own); None builds a default one for this call."""
    if scorer is None:
        from reasonrl.rewards.runner import RewardRunner

        with RewardRunner() as runner:
            return evaluate(engine, tokenizer, problems, params, batch_size, think_from_prompt, runner)
    per_problem = []
    total, count = 0.0, 0
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        groups, _ = generate_and_score(engine, tokenizer, scorer, chunk, params, None, think_from_prompt)
        for g in groups:
            per_problem.append(([c.text for c in g.completions], list(g.rewards)))
            total += sum(g.rewards)
            count += len(g.rewards)
    return total / max(count, 1), per_problem
