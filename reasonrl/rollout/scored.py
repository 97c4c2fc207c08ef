"""One generate-and-score path: problems -> prompts -> completions -> verifier scores, as RolloutGroups.

Owns: `generate_and_score`, used by training (`trainer.rollouts`), validation and `reasonrl eval`
(`eval.accuracy`), so all of them encode prompts, generate, apply the think-block policy and score
through the same `RewardRunner` (time limits, reward options, health metrics). Does not own: the
engines (`rollout.hf`), the verifiers or the runner (`rewards`), or any metric beyond the runner's
health metrics (`trainer.rollouts`).
"""

from __future__ import annotations

from reasonrl.data.prompts import encode_prompts, prompt_opens_think, scoring_text
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.environments import given_results, scored_problem
from reasonrl.types import Problem, RolloutGroup


def generate_and_score(engine, tokenizer, scorer, problems: list[Problem], params: SamplingParams,
                       max_prompt_tokens: int | None = None, think_from_prompt: bool = True,
                       interaction=None):  # fmt: skip
    """Returns (groups: one RolloutGroup per problem with its completions, rewards and verifier results,
    health: the runner's `verifier/` metrics for this batch). `interaction`: a `rollout.interaction.
    Interaction`, whose feedback and further attempts follow each wrong first one (the last attempt scored)."""
    groups = generate_groups(
        engine, tokenizer, problems, params, max_prompt_tokens, (scorer, think_from_prompt)
    )
    if interaction is not None:
        interaction.run(engine, scorer, groups, params, think_from_prompt)
    return groups, score_groups(groups, tokenizer, scorer, think_from_prompt)


def generate_groups(engine, tokenizer, problems: list[Problem], params: SamplingParams,
                    max_prompt_tokens: int | None = None, scoring=None) -> list[RolloutGroup]:  # fmt: skip
    """The generation half: one unscored RolloutGroup per problem (an episode each, with
    rollout.tools.environment or rollout.agent: the engine starts them from the rows). `scoring`: (the
    reward runner, its think-block policy), whose TRL reward functions taking `environments=` an episode
    calls beside its instance."""
    if getattr(engine, "episodic", False):
        return engine.generate_groups(problems, params, max_prompt_tokens, scoring)
    prompt_ids = encode_prompts(tokenizer, problems, max_prompt_tokens)
    completions = engine.generate(prompt_ids, params)
    return [RolloutGroup(p, ids, cs) for p, ids, cs in zip(problems, prompt_ids, completions)]


def score_groups(groups: list[RolloutGroup], tokenizer, scorer, think_from_prompt: bool = True) -> dict:
    """The scoring half: fills each group's rewards and results (think-block policy applied); returns the
    runner's health metrics. Callers may run it beside the next generation (the eval runner does)."""
    from reasonrl.trainer.watchdog import phase

    with phase("reward"):
        return _score_groups(groups, tokenizer, scorer, think_from_prompt)


def scoring_texts(group: RolloutGroup, tokenizer, think_from_prompt: bool = True) -> list[str]:
    """What the verifiers read of each completion of `group`: the model's own text (tool outputs left out),
    with the think-block policy of a prompt that opens one."""
    opens = think_from_prompt and prompt_opens_think(tokenizer, group.problem)
    return [scoring_text(c.answer_text, opens) for c in group.completions]


def _score_groups(groups, tokenizer, scorer, think_from_prompt: bool) -> dict:
    texts = [t for g in groups for t in scoring_texts(g, tokenizer, think_from_prompt)]
    given = given_results([c for g in groups for c in g.completions])  # an environment's rewards
    problems = [
        scored_problem(g.problem, c) for g in groups for c in g.completions
    ]  # (tool_rewards, env_functions)
    results, health = scorer.score(texts, problems, **({"given": given} if any(given) else {}))
    it = iter(results)
    for g in groups:
        for _ in g.completions:
            res = next(it)
            g.rewards.append(res.score)
            g.results.append(res)
    return health
