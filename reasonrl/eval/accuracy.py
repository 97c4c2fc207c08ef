"""Accuracy of a policy on problems: greedy accuracy and mean@n at a sampling temperature.

Owns: `evaluate` (generate with a rollout engine, score with the routed verifiers through a
`RewardRunner` (the same runner, options, time limits and think-block policy as training), average).
What is averaged is each sample's correctness (the routed verifier's own score in [0, 1]), not the
training reward: a run whose `reward.weights` add shaping terms (a format bonus, a length penalty)
would otherwise report an "accuracy" above 1, or below the share solved. Each sample's verifier reason
comes back too, so a caller can say how many of the samples counted wrong were never measured (the
verifier failed: `rewards.health.is_error`) instead of passing them off as the model's.
Does not own: benchmark statistics (`eval.metrics`: pass@k, maj@k, intervals) or benchmark suites.
"""

from __future__ import annotations

from typing import NamedTuple

from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.scored import generate_and_score
from reasonrl.types import Problem


class Evaluation(NamedTuple):
    accuracy: float  # mean correctness over all problems x n samples
    per_problem: list[tuple[list[str], list[float]]]  # (texts, correctness) per problem
    reasons: list[str]  # every sample's verifier reason, in order ("error: ..." when it failed)


def evaluate(engine, tokenizer, problems: list[Problem], params: SamplingParams, batch_size: int = 256,
             think_from_prompt: bool = True, scorer=None, interaction=None) -> Evaluation:  # fmt: skip
    """Generates n samples per problem and scores them: an `Evaluation`.

    `scorer`: a `RewardRunner` (training passes its own); None builds a default one for this call.
    `interaction`: feedback and further attempts after a wrong first one (`rollout.interaction`); the last
    attempt is what counts."""
    if scorer is None:
        from reasonrl.rewards.runner import RewardRunner

        with RewardRunner() as runner:
            return evaluate(
                engine, tokenizer, problems, params, batch_size, think_from_prompt, runner, interaction
            )
    per_problem, reasons = [], []
    total, count = 0.0, 0
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        groups, _ = generate_and_score(
            engine, tokenizer, scorer, chunk, params, None, think_from_prompt, interaction
        )
        for g in groups:
            correct = g.correctness
            per_problem.append(([c.text for c in g.completions], correct))
            reasons += [res.reason for res in g.results]
            total += sum(correct)
            count += len(correct)
    return Evaluation(total / max(count, 1), per_problem, reasons)
