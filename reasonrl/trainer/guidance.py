"""Off-policy guidance (`algo.guidance`; LUFFY, Yan et al. 2025, arXiv:2504.14945): each group holds
rollout.n - 1 samples of the policy and the row's demonstration (its response at `data.response_key`: a
stronger model's reasoning trace), so that a prompt the policy never solves still has a right answer in its
group to learn from, while the samples keep exploring.

The demonstration is scored by the verifiers like a sample (a wrong trace gets a low advantage; nothing
assumes it is right) and the group's advantages are computed over all n (the estimator's own rule). Its
tokens are trained with `algorithms.guidance.guided_token_loss` (-A * f(p), no ratio to a sampler, which
is unknown) instead of the policy loss; the sampler corrections (TIS weights, rejection, off-policy
masking) and the sampler-vs-trainer gap metric leave them out (their sampler log-probs are taken to be the
policy's own, `with_guided_sampler`). The step's `reward/*` metrics, the curriculum's pass rates and the
verifier watch see the samples alone (`sampled_only`); `rollout/guided_reward` is the demonstrations' mean
reward and `actor/guided_prob` the policy's mean probability of their tokens (LUFFY's off_policy_prob).

Owns: the settings' check (`check_guidance`), the rows' check (`check_demonstrations`: each training row has
one text response, named before the model loads), putting the demonstrations in the groups
(`add_demonstrations`) and the views and metrics above. Does not own: the formula (`algorithms.guidance`),
the loss (`trainer.step.make_loss_fn`), the response's tokens (`trainer.sft.response_tokens`).
"""

from __future__ import annotations

import torch

from reasonrl.config import ConfigError, RunConfig
from reasonrl.errors import InputError
from reasonrl.types import Problem, RolloutGroup


def check_guidance(cfg: RunConfig) -> None:
    """ConfigError naming the first setting off-policy guidance cannot work with."""
    from reasonrl.algorithms.guidance import SHAPINGS

    g, r = cfg.algo.guidance, cfg.rollout
    if g.shaping not in SHAPINGS:
        raise ConfigError(f"algo.guidance.shaping must be one of {', '.join(SHAPINGS)}, got {g.shaping!r}")
    if not g.enabled:
        return
    if g.shaping == "regularized" and not g.gamma > 0:
        raise ConfigError(f"algo.guidance.gamma must be > 0 (p / (p + gamma)), got {g.gamma}")
    if r.n < 2:
        raise ConfigError(f"rollout.n={r.n} with algo.guidance: a group is rollout.n - 1 samples and the "
                          "demonstration; set rollout.n >= 2")  # fmt: skip
    if r.tools.enabled:
        raise ConfigError("algo.guidance with rollout.tools.enabled: a demonstration has no tool transcript")
    if cfg.algo.off_policy.bypass:
        raise ConfigError("algo.guidance with algo.off_policy.bypass: bypass takes the sampler's log-probs as the "
                          "old ones, and a demonstration has none")  # fmt: skip


def check_demonstrations(problems: list[Problem], key: str, what: str) -> None:
    """InputError naming the first row with no text response at `key` (`data.response_key`)."""
    from reasonrl.trainer.sft import check_responses, response_of

    check_responses(problems, key, what)
    for i, p in enumerate(problems):
        if not isinstance(response_of(p, key), str):
            raise InputError(f"{what}: row {i} (uid {p.uid or '-'}): the response at {key} is a conversation; "
                             "algo.guidance puts one text response in the group as a completion")  # fmt: skip


def add_demonstrations(groups: list[RolloutGroup], tokenizer, key: str, max_tokens: int) -> None:
    """Append each group's demonstration (cut at `max_tokens`, as a sample would be) as a guided completion."""
    from reasonrl.trainer.sft import response_completion, response_of

    for g in groups:
        if not isinstance(
            response_of(g.problem, key), str
        ):  # (a generated source's row: not checked at load)
            raise InputError(f"uid {g.problem.uid!r}: no text response at {key} (data.response_key), which "
                             "algo.guidance puts in its group as the demonstration")  # fmt: skip
        c = response_completion(tokenizer, g.problem, key, max_tokens)
        c.guided = True
        g.completions.append(c)


def sampled_only(groups: list[RolloutGroup]) -> list[RolloutGroup]:
    """The groups with their sampled completions alone (the same objects where none is a demonstration)."""
    out = []
    for g in groups:
        keep = [i for i, c in enumerate(g.completions) if not c.guided]
        if len(keep) == len(g.completions):
            out.append(g)
            continue
        out.append(RolloutGroup(g.problem, g.prompt_ids, [g.completions[i] for i in keep],
                                [g.rewards[i] for i in keep] if g.rewards else [],
                                [g.results[i] for i in keep] if g.results else []))  # fmt: skip
    return out


def guided_metrics(groups: list[RolloutGroup]) -> dict[str, float]:
    """`rollout/guided_reward` (the demonstrations' mean reward) and `rollout/guided_correct` (the share the
    verifier found right); {} without demonstrations."""
    scored = [(r, res) for g in groups for c, r, res in zip(g.completions, g.rewards, g.results) if c.guided]
    if not scored:
        return {}
    return {"rollout/guided_reward": sum(r for r, _ in scored) / len(scored),
            "rollout/guided_correct": sum(res.correctness >= 1.0 for _, res in scored) / len(scored)}  # fmt: skip


def with_guided_sampler(
    sampler: torch.Tensor, policy: torch.Tensor, guided: torch.Tensor | None
) -> torch.Tensor:
    """`sampler` log-probs [B, T] with the demonstrations' rows replaced by `policy`'s (their own sampler's are
    unknown): every correction against the sampler is then neutral on them (weight 1, no gap)."""
    if guided is None:
        return sampler
    return torch.where(guided[:, None].to(sampler.device), policy.to(sampler.device), sampler)


def guided_prob(engine, batch, micro_batch: int) -> dict[str, float]:
    """`actor/guided_prob`: the policy's mean probability of the demonstrations' tokens before the step's
    updates (from the old log-probs where the step has them, else one forward over those rows alone), over
    every rank's demonstration tokens."""
    from reasonrl.distributed import sum_over_ranks

    if batch.guided is None:
        return {}
    rows = batch.guided.nonzero().squeeze(-1)
    if batch.old_logprobs is not None:
        logprobs, mask = batch.old_logprobs[rows], batch.mask[rows]
    else:
        demo = batch.select(rows)
        logprobs, mask = engine.logprobs(demo, micro_batch), demo.mask
    mask = mask.cpu()
    parts = sum_over_ranks({"p": float(logprobs.exp().cpu()[mask].sum()), "n": float(mask.sum())})
    return {"actor/guided_prob": parts["p"] / max(parts["n"], 1.0)}
