"""TTRL's keys in a verl launch script (test-time reinforcement learning, Zuo et al. 2025, arXiv:2504.16084;
PRIME-RL/TTRL, a verl fork) as `reward.pseudo_label` (docs/rewards.md, "Rewards without labels").

Owns: `ttrl_keys(o, take, out)`, called by `config.from_verl` for every verl script. TTRL has said the same
thing three ways: `reward_model.reward_manager=ttrl` with `reward_model.reward_kwargs.n_votes_per_prompt /
n_samples_per_prompt` (and `actor_rollout_ref.rollout.do_vote / n_vote`), the later `ttrl.enable /
ttrl.n_votes_per_prompt / ttrl.n_samples_per_prompt`, and `unsupervised_reward.enable` with
`type=ensemble, estimator=majority_voting`. Each becomes reward.pseudo_label.enabled with votes =
n_votes_per_prompt and rollout.n = n_samples_per_prompt (TTRL generates n_votes and trains the first
n_samples; its batch sizes count the trained ones); its certainty estimators become reward.confidence.
TTRL's own math grader (a `custom_reward_function.path`
under `ttrl_math`, or the reward manager's) becomes the routed verifiers: its data sources route
(MATH-TTT, AIME-TTT, AMC-TTT to math, GPQA-TTT to choice; `rewards.routing`). Its "probability" and
self-verification estimators are not built: a note says so and the recipe keeps the rows' labels.
Does not own: the rest of the script (`config.from_verl`) or TTRL's data files (`reasonrl data prepare ttrl`).
"""

from __future__ import annotations

from reasonrl.config.foreign import Converted

A = "actor_rollout_ref."
KW = "reward_model.reward_kwargs."
# TTRL's certainty estimators -> reward.confidence.measure (its "probability", exp of the summed log-prob, and
# "self_verify", the policy grading itself, are not built)
CERTAINTY = {"self_certainty": "self_certainty", "token_level_entropy": "neg_entropy",
             "trajectory_level_entropy": "logprob"}  # fmt: skip
# TTRL's settings with nothing to carry: the reward manager's train / eval mode, its process count, its
# other estimators' switches (their notes come from the estimator itself)
QUIET = (KW + "mode", KW + "eval_n_samples", "ttrl.majority_vote_num_processes", A + "rollout.do_vote",
         A + "rollout.n_vote", "unsupervised_reward.type")  # fmt: skip


def ttrl_keys(o, take, out: Converted) -> int | None:
    """Map the TTRL keys of verl overrides `o` (read with `take`) into `out`. Returns the samples trained per
    prompt where TTRL is on (the batch sizes' unit), else None."""
    manager = str(o.get("reward_model.reward_manager", "")) == "ttrl"
    on = manager or bool(take("ttrl.enable", False))
    votes = take(KW + "n_votes_per_prompt") if manager else take("ttrl.n_votes_per_prompt")
    samples = take(KW + "n_samples_per_prompt") if manager else take("ttrl.n_samples_per_prompt")
    if take("unsupervised_reward.enable", False):
        estimator = str(take("unsupervised_reward.estimator", "self_certainty"))
        ensemble = str(o.get("unsupervised_reward.type", "ensemble")) == "ensemble"
        if estimator == "majority_voting" and ensemble:
            on = True
        elif estimator in CERTAINTY:
            out.set("reward.confidence.measure", CERTAINTY[estimator])
            out.notes.append(f"unsupervised_reward.estimator={estimator} -> reward.confidence.measure="
                             f"{CERTAINTY[estimator]} (the mean over each completion's tokens)")  # fmt: skip
        else:
            out.notes.append(f"unsupervised_reward.estimator={estimator}: not built (reasonrl has majority votes and "
                             f"{', '.join(CERTAINTY)}); the recipe trains on the rows' own labels")  # fmt: skip
    for key in QUIET:
        take(key)
    path = str(out.recipe.get("reward", {}).get("options", {}).get("verl_function", {}).get("path", ""))
    if (
        "reward_score/ttrl" in path
    ):  # TTRL's graders (ttrl_math, ...): the verifiers its data sources route to
        out.recipe["reward"].pop("verifier", None)
        out.recipe["reward"]["options"].pop("verl_function")
        if not out.recipe["reward"]["options"]:
            out.recipe["reward"].pop("options")
        out.notes.append(f"custom_reward_function.path={path}: TTRL's own grader -> the verifiers the rows' "
                         "data_source routes to (MATH-TTT, AIME-TTT, AMC-TTT: math; GPQA-TTT: choice)")  # fmt: skip
    if not on:
        return None
    if manager:
        take("reward_model.reward_manager")
    n = int(o.get(A + "rollout.n", 1))
    samples = int(samples) if samples is not None else n
    votes = int(votes) if votes is not None else int(o.get(A + "rollout.n_vote", samples))
    out.set("reward.pseudo_label.enabled", True)
    out.set("reward.pseudo_label.votes", max(votes, samples))
    out.set("rollout.n", samples)
    out.notes.append(f"TTRL: {votes} samples per prompt vote its label (reward.pseudo_label.votes), the first "
                     f"{samples} train (rollout.n); rows whose ground truth is '' have no label of their own")  # fmt: skip
    return samples
