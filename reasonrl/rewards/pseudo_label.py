"""Rewards without labels: each prompt's samples vote, and the answer most of them give is the label
they are all scored against (TTRL, test-time reinforcement learning, arXiv:2504.16084).

Owns: `VOTERS` (verifier name -> the answer a response gives, as that verifier reads it; a registry, so a
plugin's verifier can take part), `majority` (a group's winning answer and its share of the votes),
`relabel` (scores each group against its majority answer through the run's `RewardRunner`: the same
verifier, options, reward terms and time limits as labelled training, so `1/2` and `0.5` agree with each
other there too), `label_metrics` and the load-time checks (`check_pseudo_label`, `unlabelled`).
Does not own: generating (`rollout.scored`), the verifiers (`rewards.verifiers`) or the answer keys the
vote counts by (`eval.metrics.answer_key`, which maj@k uses too).

Votes: every sample's answer (None: it gave none, and does not vote) counts by its `answer_key` (numbers by
exact value, other answers by their cleaned, case-folded text); the key with the most votes wins, a tie going
to the one that came first; the label is the first sample's text carrying it. `majority_ratio` is the
winner's votes over all samples (TTRL's). A group in which nobody answered has no label: its samples score 0
(reason "no_majority"); so does one whose winner has fewer than `min_ratio` of the votes ("weak_majority":
no gradient from a label the samples barely agree on). With `votes` > rollout.n (TTRL's 64 votes, 32 trained) all samples vote and the
first rollout.n train. With `own_labels` a row that has a label of its own is scored against it and
does not vote (labelled and unlabelled rows in one run).

What is logged (`reward/pseudo/*`): the share of groups that voted (`voted_frac`); of the groups that voted
(`vote/*`, with their `count`), the majority ratio, the share without a label (`no_label_frac`; `weak_frac` of
them below `min_ratio`), `distinct_labels` (distinct labels over labelled groups) and `labelled_frac` (rows
with a label of their own); and of those labelled rows (`check/*`, with their `count`), how often the vote
found the label (`label_accuracy`), how often a pseudo-reward equals the reward the real label gives
(`reward_accuracy`) and the real accuracy of the trained samples (`true_accuracy`). `reward/mean` and `reward/accuracy` are against the pseudo-labels: that is what trains.

The hole in the method, kept in the tests: a policy that gives one answer to every prompt agrees with itself
and scores 1 everywhere. Nothing here can tell consensus from correctness; `distinct_labels` falling
towards 1 / groups shows the collapse, and validation (which always uses the rows' real labels) shows
whether accuracy followed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from reasonrl.registry import Registry
from reasonrl.types import Problem, RewardResult, RolloutGroup

VOTERS: Registry = Registry("voter", positional=2)  # (response, problem) -> answer text | None


def unlabelled(problem: Problem) -> bool:
    """The row has no label of its own (ground truth "" or an empty list)."""
    gt = problem.ground_truth
    return (isinstance(gt, str) and not gt.strip()) or (isinstance(gt, (list, tuple)) and not gt)


def _extracted(response: str, modes: tuple[str, ...]) -> str | None:
    from reasonrl.rewards.extract import extract

    found = extract(response, modes)
    return found.answer.strip() if found is not None else None


@VOTERS.register("math")
def _math(response: str, problem: Problem) -> str | None:
    from reasonrl.rewards.verifiers.math import MATH_MODES

    return _extracted(response, MATH_MODES)


@VOTERS.register("gsm8k")
def _gsm8k(response: str, problem: Problem) -> str | None:
    from reasonrl.rewards.verifiers.math import GSM8K_MODES

    return _extracted(response, GSM8K_MODES)


@VOTERS.register("arithmetic")
def _arithmetic(response: str, problem: Problem) -> str | None:
    from reasonrl.rewards.verifiers.procedural import answer_integer, final_answer

    value = answer_integer(final_answer(response)[0])
    return None if value is None else str(value)


@VOTERS.register("choice")
def _choice(response: str, problem: Problem) -> str | None:
    from reasonrl.rewards.verifiers.choice import chosen_letter

    return chosen_letter(response, problem)


@VOTERS.register("qa_em")
def _qa(response: str, problem: Problem) -> str | None:
    from reasonrl.rewards.extract import answer_region, answer_tag
    from reasonrl.rewards.verifiers.qa import normalize_answer

    ans = answer_tag(answer_region(response))
    return ans.strip() if ans is not None and normalize_answer(ans) else None


def vote_key(answer: str | None, verifier: str) -> str | None:
    """What a vote counts by: the answer's `answer_key`; a QA answer's Search-R1 normal form."""
    if answer is None:
        return None
    if verifier == "qa_em":
        from reasonrl.rewards.verifiers.qa import normalize_answer

        return "text:" + normalize_answer(answer)
    from reasonrl.eval.metrics import answer_key

    return answer_key(answer)


def majority(answers: list[str | None], keys: list[str | None]) -> tuple[str | None, str | None, float]:
    """(label: the first answer carrying the winning key, that key, the winner's votes / len(answers));
    (None, None, 0.0) when nobody answered. Ties go to the key seen first (`eval.metrics.majority`)."""
    from reasonrl.eval.metrics import majority as vote

    won = vote(keys)
    if won is None:
        return None, None, 0.0
    first, count = won
    return answers[first], keys[first], count / len(answers)


class Vote(NamedTuple):
    """One group's vote: its label (None: nobody answered, or the winner had too few votes), the winning
    key, every sample's key, the winner's share of the samples, and whether it fell below `min_ratio`."""

    group: RolloutGroup
    label: str | None
    key: str | None
    keys: list[str | None]
    ratio: float
    weak: bool


def relabel(groups: list[RolloutGroup], scorer, tokenizer, think_from_prompt: bool, keep: int,
            own_labels: bool = False, min_ratio: float = 0.0) -> tuple[dict, dict]:  # fmt: skip
    """Scores `groups` (generated, unscored) against their majority answers and keeps the first `keep`
    samples of each. `own_labels`: a row with a label of its own is scored against it and does not vote.
    `min_ratio`: a winner with fewer than this share of the votes is no label (the group scores 0).
    Returns (the runner's health metrics, `reward/pseudo/*`)."""
    from reasonrl.rewards.routing import verifier_name
    from reasonrl.rollout.scored import score_groups, scoring_texts

    own = {id(g) for g in groups if own_labels and not unlabelled(g.problem)}
    checked = [g for g in groups if not unlabelled(g.problem) and id(g) not in own]
    if checked:  # the rows' own labels: only to report how the votes did against them
        score_groups(checked, tokenizer, scorer.correctness_only(), think_from_prompt)
    truth = {id(g): [r.correctness for r in g.results] for g in checked}
    flat, problems, stats = [], [], []
    for g in groups:
        texts = scoring_texts(g, tokenizer, think_from_prompt)
        g.rewards, g.results = [], []
        if id(g) in own:
            flat += texts
            problems += [g.problem] * len(texts)
            continue
        name = verifier_name(g.problem)
        answers = [VOTERS.get(name)(t, g.problem) for t in texts]
        keys = [vote_key(a, name) for a in answers]
        label, key, ratio = majority(answers, keys)
        weak = label is not None and ratio < min_ratio
        stats.append(Vote(g, None if weak else label, None if weak else key, keys, ratio, weak))
        if label is not None and not weak:
            flat += texts
            problems += [replace(g.problem, ground_truth=label)] * len(texts)
    results, health = scorer.score(flat, problems) if flat else ([], {})
    it = iter(results)
    voted = {id(v.group): v for v in stats}
    for g in groups:
        for i in range(len(g.completions)):
            label = voted[id(g)].label if id(g) in voted else g.problem.ground_truth
            why = "weak_majority" if id(g) in voted and voted[id(g)].weak else "no_majority"
            res = next(it) if label is not None else RewardResult(
                0.0, {"extracted": None, "reason": why, "correctness": 0.0})  # fmt: skip
            if id(g) in voted:
                res.info["pseudo_label"] = label
            if id(g) in truth:
                res.info["label_correctness"] = truth[id(g)][i]
            g.rewards.append(res.score)
            g.results.append(res)
        del g.completions[keep:], g.rewards[keep:], g.results[keep:]
    return health, {"reward/pseudo/voted_frac": len(stats) / len(groups), **label_metrics(stats, truth)}


def label_metrics(stats: list[Vote], truth: dict) -> dict[str, float]:
    """`reward/pseudo/*` of a step (see the module docstring)."""
    if not stats:  # every row was scored against its own label (own_labels)
        return {}
    keyed = [v.key for v in stats if v.key is not None]
    checked = [(v.group, v.key, v.keys) for v in stats if id(v.group) in truth]
    # (two families with a count each: several ranks weight each rank's values by its count, and a rank whose
    # share voted nothing, or checked nothing, has none of that family's keys; `distributed.reduce_metrics`)
    out = {
        "reward/pseudo/vote/count": float(len(stats)),
        "reward/pseudo/vote/majority_ratio": sum(v.ratio for v in stats) / len(stats),
        "reward/pseudo/vote/no_label_frac": 1 - len(keyed) / len(stats),
        "reward/pseudo/vote/weak_frac": sum(v.weak for v in stats) / len(stats),
        "reward/pseudo/vote/distinct_labels": len(set(keyed)) / max(len(keyed), 1),
        "reward/pseudo/vote/labelled_frac": len(checked) / len(stats),
    }
    if not checked:
        return out
    found, agree, right, kept = 0, 0, 0.0, 0
    for g, key, keys in checked:
        true = truth[id(g)]
        # the vote found the label: a sample carrying the winning key is right by the row's own label
        found += key is not None and any(k == key and t >= 1.0 for k, t in zip(keys, true))
        for res in g.results:
            agree += (res.correctness >= 1.0) == (res.info["label_correctness"] >= 1.0)
            right += res.info["label_correctness"]
            kept += 1
    out["reward/pseudo/check/count"] = float(len(checked))
    out["reward/pseudo/check/label_accuracy"] = found / len(checked)
    out["reward/pseudo/check/reward_accuracy"] = agree / kept
    out["reward/pseudo/check/true_accuracy"] = right / kept
    return out


def check_pseudo_label(cfg) -> None:
    """ConfigError naming the first `reward.pseudo_label` setting that cannot work (before any load)."""
    from reasonrl.config import ConfigError

    p = cfg.reward.pseudo_label
    if not p.enabled:
        return
    if p.votes and p.votes < cfg.rollout.n:
        raise ConfigError(f"reward.pseudo_label.votes={p.votes} is fewer than rollout.n={cfg.rollout.n}: the "
                          "voters are the samples plus more (0: rollout.n)")  # fmt: skip
    if p.votes < 0:
        raise ConfigError(f"reward.pseudo_label.votes must be >= 0, got {p.votes}")
    if not 0 <= p.min_ratio <= 1:
        raise ConfigError(f"reward.pseudo_label.min_ratio must be in [0, 1], got {p.min_ratio}")
    from reasonrl.algorithms.advantages import ADVANTAGES

    remax = "baseline_rewards" in ADVANTAGES.get(cfg.algo.adv_estimator).needs
    refused = {  # what -> why not (when it is set)
        "algo.objective=sft": cfg.algo.objective == "sft" and "SFT samples nothing to vote",
        "algo.guidance": cfg.algo.guidance.enabled and "its demonstrations are the data's labels",
        "rollout.interaction": cfg.rollout.interaction.enabled and "its feedback reads the row's label",
        f"algo.adv_estimator={cfg.algo.adv_estimator}": remax
        and "its greedy baseline is one sample: no vote",
        "reward.weights terms besides correctness": set(cfg.reward.weights) != {"correctness"}
        and "a prompt nobody answered has no label to score its samples' terms against",
    }
    for what, why in refused.items():
        if why:
            raise ConfigError(f"reward.pseudo_label.enabled with {what}: {why}")


def check_voting(problem: Problem) -> None:
    """ValueError (the reason; the caller names the row) if `problem`'s verifier cannot vote."""
    from reasonrl.rewards.routing import verifier_name

    name = verifier_name(problem)
    if name not in VOTERS:
        raise ValueError(f"verifier {name!r} (data_source {problem.data_source!r}) gives no answer to vote on "
                         f"(reward.pseudo_label works with {', '.join(VOTERS.names())}; a plugin registers "
                         "its own in reasonrl.rewards.pseudo_label.VOTERS)")  # fmt: skip
