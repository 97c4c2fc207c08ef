"""Accuracy of a policy on problems: greedy accuracy and mean@n at a sampling temperature.

Owns: `evaluate` (generate with a rollout engine, score with the routed verifiers through a
`RewardRunner` (the same runner, options, time limits and think-block policy as training), average).
What is averaged is each sample's correctness (the routed verifier's own score in [0, 1]), not the
training reward: a run whose `reward.weights` add shaping terms (a format bonus, a length penalty)
would otherwise report an "accuracy" above 1, or below the share solved.
Does not own: benchmark statistics (`eval.metrics`: pass@k, maj@k, intervals) or benchmark suites.
"""

from __future__ import annotations

from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.scored import generate_and_score
from reasonrl.types import Problem


def evaluate(engine, tokenizer, problems: list[Problem], params: SamplingParams, batch_size: int = 256,
             think_from_prompt: bool = True, scorer=None):  # fmt: skip
    """Returns (mean correctness over all problems x n samples, per-problem list of (texts, correctness)).

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
            correct = g.correctness
            per_problem.append(([c.text for c in g.completions], correct))
            total += sum(correct)
            count += len(correct)
    return total / max(count, 1), per_problem
