"""Accuracy of a policy on problems: greedy accuracy and mean@n at a sampling temperature.

Owns: `evaluate` (generate with a rollout engine, score with the routed verifiers through a
`RewardRunner` (the same runner, options, time limits and think-block policy as training), average).
Does not own: benchmark suites and pass@k (`eval.passk`, `eval.benchmarks`).
"""

from __future__ import annotations

from reasonrl.data.prompts import encode_prompts, prompt_opens_think, scoring_text
from reasonrl.rollout.base import SamplingParams
from reasonrl.types import Problem


def evaluate(engine, tokenizer, problems: list[Problem], params: SamplingParams, batch_size: int = 256,
             think_from_prompt: bool = True, scorer=None):  # fmt: skip
    """Returns (mean score over all problems x n samples, per-problem list of (texts, scores)).

    `scorer`: a `RewardRunner` (training passes its own); None builds a default one for this call."""
    if scorer is None:
        from reasonrl.rewards.runner import RewardRunner

        with RewardRunner() as runner:
            return evaluate(engine, tokenizer, problems, params, batch_size, think_from_prompt, runner)
    prompts = encode_prompts(tokenizer, problems)
    per_problem = []
    total, count = 0.0, 0
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        groups = engine.generate(prompts[start : start + batch_size], params)
        texts = [[c.text for c in group] for group in groups]
        opens = [think_from_prompt and prompt_opens_think(tokenizer, p) for p in chunk]
        flat = [(p, scoring_text(t, o)) for p, o, ts in zip(chunk, opens, texts) for t in ts]
        results, _ = scorer.score([t for _, t in flat], [p for p, _ in flat])
        it = iter(results)
        for ts in texts:
            scores = [next(it).score for _ in ts]
            per_problem.append((ts, scores))
            total += sum(scores)
            count += len(scores)
    return total / max(count, 1), per_problem
