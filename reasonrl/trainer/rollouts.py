"""Collecting scored rollouts for a step, and the rollout / reward metrics.

Owns: a step's rollouts (through the shared `rollout.scored.generate_and_score`), the `reward/` and
`rollout/` metrics, and the per-group records written to rollouts.jsonl. Does not own: dynamic-sampling
refills and the ReMax baseline (`trainer.sampling`), verifier logic (`rewards`), or writing the
files (`trainer.metrics`).
"""

from __future__ import annotations

import random
from dataclasses import replace

import torch

from reasonrl.config import RunConfig
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.scored import generate_and_score, generate_groups, score_groups
from reasonrl.types import Problem, RolloutGroup, TrainBatch


def make_scorer(cfg: RunConfig, problems: list[Problem] = ()):
    """The reward runner: cheap verifiers inline, the rest in killable worker processes, which import
    what the verifiers of `problems` declare to preload when they start."""
    from reasonrl.rewards.runner import RewardRunner, preload_modules

    rc = cfg.reward
    return RewardRunner(
        workers=rc.workers,
        timeout_s=rc.timeout_s,
        weights=dict(rc.weights),
        options={k: dict(v) for k, v in rc.options.items()},
        modules=list(cfg.plugins),  # the recipe's own verifiers, registered in every worker too
        preload=preload_modules(problems),
    )


def collect_rollouts(run, problems: list[Problem], params: SamplingParams,
                     demonstrations: str | None = None) -> tuple[list[RolloutGroup], dict]:  # fmt: skip
    """The problems' scored groups and the step's reward / rollout metrics. `demonstrations`: the response
    key (`algo.guidance`): each group is params.n - 1 samples and the row's demonstration, scored with them;
    the metrics describe the samples (`trainer.guidance`)."""
    interaction = getattr(run, "interaction", None)  # (rollout.interaction; a caller's own run may have none)
    if (pseudo := getattr(run, "pseudo_label", None)) is not None:  # reward.pseudo_label: the samples vote
        from reasonrl.rewards.pseudo_label import relabel

        voters = replace(params, n=max(pseudo.votes, params.n))
        groups = generate_groups(run.rollout_engine, run.tokenizer, problems, voters, run.max_prompt_tokens,
                                 (run.scorer, run.think_from_prompt))  # fmt: skip
        health, labels = relabel(groups, run.scorer, run.tokenizer, run.think_from_prompt, params.n,
                                 pseudo.own_labels, pseudo.min_ratio)  # fmt: skip
        return groups, {**reward_metrics(run, groups), **health, **labels}
    if demonstrations is None:
        groups, health = generate_and_score(run.rollout_engine, run.tokenizer, run.scorer, problems, params,
                                            run.max_prompt_tokens, run.think_from_prompt, interaction)  # fmt: skip
        if interaction is None:
            return groups, {**reward_metrics(run, groups), **health}
        from reasonrl.rollout.interaction import discount, interaction_metrics  # (rollout.interaction)

        discount(groups, interaction.cfg.decay)
        return groups, {**reward_metrics(run, groups), **health, **interaction_metrics(groups)}
    from reasonrl.trainer.guidance import add_demonstrations, guided_metrics, sampled_only

    groups = generate_groups(run.rollout_engine, run.tokenizer, problems, replace(params, n=params.n - 1),
                             run.max_prompt_tokens)  # fmt: skip
    add_demonstrations(groups, run.tokenizer, demonstrations, params.max_new_tokens)
    health = score_groups(groups, run.tokenizer, run.scorer, run.think_from_prompt)
    return groups, {**reward_metrics(run, sampled_only(groups)), **health, **guided_metrics(groups)}


def reward_metrics(run, groups: list[RolloutGroup]) -> dict[str, float]:
    """`reward/*` and the tool metrics of scored groups."""
    scores = torch.tensor([s for g in groups for s in g.rewards])
    results = [r for g in groups for r in g.results]
    metrics = {
        "reward/mean": scores.mean().item(),
        "reward/std": scores.std().item() if len(scores) > 1 else 0.0,
        "reward/accuracy": sum(r.correctness >= 1.0 for r in results) / len(results),
        "reward/no_answer_frac": sum(r.extracted is None for r in results) / max(len(results), 1),
        "reward/solved_all_frac": sum(min(g.correctness) >= 1.0 for g in groups) / len(groups),
        "reward/solved_none_frac": sum(max(g.correctness) <= 0.0 for g in groups) / len(groups),
        **term_metrics(results),
        **function_metrics(results),
        **tool_metrics(
            [c for g in groups for c in g.completions], getattr(run.rollout_engine, "runs_tools", False)
        ),
    }
    if getattr(run.rollout_engine, "runs_agent", False):  # rollout.agent's episodes
        from reasonrl.rollout.agents import agent_metrics

        metrics.update(agent_metrics([c for g in groups for c in g.completions]))
    return metrics


def term_metrics(results) -> dict[str, float]:
    """`reward/term/<name>` (mean) and `reward/term/<name>_std` of each reward term's raw score, where
    `reward.weights` has more than correctness (a reward model's scores beside the verifier's)."""
    rows = [r.info.get("terms") for r in results]
    if not rows or any(t is None for t in rows):
        return {}
    out = {}
    for name in rows[0]:
        scores = torch.tensor([float(t[name]) for t in rows])
        out[f"reward/term/{name}"] = scores.mean().item()
        out[f"reward/term/{name}_std"] = scores.std().item() if len(scores) > 1 else 0.0
    return out


def function_metrics(results) -> dict[str, float]:
    """`reward/function/<name>/{count, mean, std}`: each TRL reward function's own scores over the samples it
    applies to (TRL's `rewards/<name>/mean`), and `reward/function_log/<name>/{count, mean}`: what the
    functions logged with `log_metric` (`rewards.verifiers.trl_function`). Families with a count: a rank
    whose share a function does not apply to has none of its keys (`distributed.reduce_metrics`)."""
    scores: dict[str, list[float]] = {}
    logged: dict[str, list[float]] = {}
    for r in results:
        for name, value in (r.info.get("functions") or {}).items():
            if value is not None:
                scores.setdefault(name, []).append(float(value))
        for name, value in (r.info.get("function_log") or {}).items():
            logged.setdefault(name, []).append(float(value))
    out = {}
    for name, xs in scores.items():
        t = torch.tensor(xs)
        out[f"reward/function/{name}/count"] = float(len(xs))
        out[f"reward/function/{name}/mean"] = t.mean().item()
        out[f"reward/function/{name}/std"] = t.std().item() if len(xs) > 1 else 0.0
    for name, xs in logged.items():
        out[f"reward/function_log/{name}/count"] = float(len(xs))
        out[f"reward/function_log/{name}/mean"] = sum(xs) / len(xs)
    return out


def tool_metrics(completions, enabled: bool) -> dict[str, float]:
    """`rollout/tool_*` when the engine runs tools (rollout.tools): calls per completion, the share of
    completions that made one, of calls that failed or timed out, and of tokens a tool wrote."""
    if not enabled:
        return {}
    calls = [s for c in completions for s in c.tool_calls]
    tokens = sum(len(c.token_ids) for c in completions)
    written = sum(sum(c.tool_mask) for c in completions if c.tool_mask is not None)
    return {
        "rollout/tool_calls_mean": len(calls) / max(len(completions), 1),
        "rollout/tool_used_frac": sum(bool(c.tool_calls) for c in completions) / max(len(completions), 1),
        "rollout/tool_error_frac": sum(s != "success" for s in calls) / max(len(calls), 1),
        "rollout/tool_timeout_frac": sum(s == "timeout" for s in calls) / max(len(calls), 1),
        "rollout/tool_token_frac": written / max(tokens, 1),
    }


def rollout_metrics(batch: TrainBatch) -> dict[str, float]:
    """The samples' lengths and truncation (not the demonstrations' of `algo.guidance`) and the batch's size."""
    sampled = slice(None) if batch.guided is None else ~batch.guided
    lengths = batch.lengths[sampled].float()
    return {
        "rollout/response_length": lengths.mean().item(),
        "rollout/response_length_max": lengths.max().item(),
        "rollout/truncated_frac": batch.truncated[sampled].float().mean().item(),
        "rollout/batch_size": float(batch.size),
    }


def sample_groups(groups: list[RolloutGroup], k: int, step: int) -> list[dict]:
    """`k` prompt groups of this step (chosen with a step-seeded RNG), each with all its completions:
    the per-group record of rollouts.jsonl (one line per group)."""
    rng = random.Random(step)
    out = []
    for g in rng.sample(groups, min(k, len(groups))):
        p, unscored = g.problem, [None] * len(g.completions)  # (SFT: the data's responses, not scored)
        first = g.results[0].info if g.results else {}
        # the label the samples voted (reward.pseudo_label)
        voted = {"pseudo_label": first["pseudo_label"]} if "pseudo_label" in first else {}
        out.append(
            {
                "uid": p.uid,
                "data_source": p.data_source,
                "prompt": p.user_text,
                "ground_truth": p.ground_truth,
                **voted,
                "rewards": list(g.rewards),
                "completions": [
                    {
                        "text": c.text,
                        "reward": r,
                        "reason": res and res.info.get("reason"),
                        "extracted": res and res.extracted,
                        "tokens": len(c.token_ids),
                        "finish_reason": c.finish_reason,
                        **({"guided": True} if c.guided else {}),  # a demonstration (algo.guidance)
                        **({"turns": c.turns} if c.turns > 1 else {}),  # attempts (rollout.interaction)
                        **(
                            {"terms": res.info["terms"]} if res and "terms" in res.info else {}
                        ),  # each term's score
                        **{k: res.info[k] for k in ("functions", "logged_extra") if res and k in res.info},
                    }
                    for c, r, res in zip(g.completions, g.rewards or unscored, g.results or unscored)
                ],  # fmt: skip
            }
        )
    return out
