"""Accuracy of a policy on problems: greedy accuracy and mean@n at a sampling temperature.

Owns: `evaluate` (generate with a rollout engine, score with the routed verifiers, average).
Does not own: benchmark suites and pass@k (`eval.passk`, `eval.benchmarks`).
"""

from __future__ import annotations

from reasonrl.data.prompts import encode_prompts, prompt_opens_think, scoring_text
from reasonrl.rewards import score
from reasonrl.rollout.base import SamplingParams
from reasonrl.types import Problem


def evaluate(engine, tokenizer, problems: list[Problem], params: SamplingParams, batch_size: int = 256,
             think_from_prompt: bool = True):  # fmt: skip
    """Returns (mean score over all problems x n samples, per-problem list of (texts, scores))."""
    prompts = encode_prompts(tokenizer, problems)
    per_problem = []
    total, count = 0.0, 0
    for start in range(0, len(problems), batch_size):
        chunk = prompts[start : start + batch_size]
        groups = engine.generate(chunk, params)
        for p, group in zip(problems[start : start + batch_size], groups):
            texts = [c.text for c in group]
            opens = think_from_prompt and prompt_opens_think(tokenizer, p)
            scores = [score(scoring_text(t, opens), p).score for t in texts]
            per_problem.append((texts, scores))
            total += sum(scores)
            count += len(scores)
    return total / max(count, 1), per_problem
