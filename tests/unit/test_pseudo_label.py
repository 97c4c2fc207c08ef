"""reward.pseudo_label (TTRL): each group's majority answer is the label its samples are scored against.

Groups are built from hand-written completions and scored by the real RewardRunner and verifiers, so the
votes, the relabelled rewards and the metrics against the rows' own labels are checked value by value.
"""

from __future__ import annotations

import pytest

from reasonrl.config import ConfigError, load_config
from reasonrl.errors import InputError
from reasonrl.rewards.pseudo_label import check_pseudo_label, majority, relabel, unlabelled, vote_key
from reasonrl.rewards.routing import check_routable
from reasonrl.rewards.runner import RewardRunner
from reasonrl.types import Completion, Problem, RolloutGroup


@pytest.fixture(scope="module")
def runner():
    with RewardRunner(workers=1, timeout_s=30) as r:
        yield r


def _group(texts, truth="3", source="math", **extra):
    problem = Problem([{"role": "user", "content": "1+2?"}], truth, source, extra_info=extra)
    return RolloutGroup(problem, [1], [Completion([1, 2], t, [0.0, 0.0]) for t in texts])


def _relabel(runner, groups, keep=None):
    keep = keep or max(len(g.completions) for g in groups)
    return relabel(groups, runner, tokenizer=None, think_from_prompt=False, keep=keep)


def test_the_majority_answer_is_the_label_and_equal_values_vote_together(runner):
    # 1/2, 0.5 and \frac{1}{2} are one answer (three votes) against 3 (two votes); the label is the first
    # sample's text carrying the winner, and every sample is scored against it by the math verifier
    g = _group(
        [r"\boxed{3}", r"\boxed{1/2}", r"\boxed{0.5}", r"\boxed{3}", r"\boxed{\frac{1}{2}}"], truth="3"
    )
    _, metrics = _relabel(runner, [g])
    assert g.rewards == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert {r.info["pseudo_label"] for r in g.results} == {"1/2"}
    assert [r.info["label_correctness"] for r in g.results] == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert metrics["reward/pseudo/vote/majority_ratio"] == pytest.approx(3 / 5)
    assert metrics["reward/pseudo/check/label_accuracy"] == 0.0  # the vote missed the row's own label
    assert metrics["reward/pseudo/check/reward_accuracy"] == 0.0  # every pseudo-reward is the opposite
    assert metrics["reward/pseudo/check/true_accuracy"] == pytest.approx(2 / 5)


def test_a_right_majority_rewards_the_right_samples_and_the_metrics_say_so(runner):
    g = _group([r"\boxed{3}", r"\boxed{4}", r"\boxed{3}", "no answer here", r"\boxed{3.0}"], truth="3")
    _, metrics = _relabel(runner, [g])
    assert g.rewards == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert metrics["reward/pseudo/vote/majority_ratio"] == pytest.approx(3 / 5)  # the silent sample counts
    assert metrics["reward/pseudo/check/label_accuracy"] == 1.0
    assert metrics["reward/pseudo/check/reward_accuracy"] == 1.0
    assert metrics["reward/pseudo/check/true_accuracy"] == pytest.approx(3 / 5)


def test_a_tie_goes_to_the_answer_given_first():
    answers = ["7", "5", "5", "7"]
    assert majority(answers, [vote_key(a, "math") for a in answers]) == ("7", "num:7", 0.5)
    answers = ["5", "7", "7", "5"]
    assert majority(answers, [vote_key(a, "math") for a in answers])[0] == "5"
    assert majority([None, None], [None, None]) == (None, None, 0.0)


def test_a_group_where_nobody_answered_has_no_label_and_scores_nothing(runner):
    groups = [_group(["no idea", "still no idea"]), _group([r"\boxed{3}", r"\boxed{3}"])]
    _, metrics = _relabel(runner, groups)
    assert groups[0].rewards == [0.0, 0.0] and groups[0].results[0].reason == "no_majority"
    assert groups[1].rewards == [1.0, 1.0]
    assert metrics["reward/pseudo/vote/no_label_frac"] == 0.5
    assert metrics["reward/pseudo/vote/majority_ratio"] == 0.5  # (0 + 1) / 2


def test_more_voters_than_trained_samples_keeps_the_first_ones(runner):
    # the first two alone would tie (4 first, so 4); all six vote 3 (four votes to two), and the first two train
    g = _group(
        [r"\boxed{4}", r"\boxed{3}", r"\boxed{3}", r"\boxed{3}", r"\boxed{4}", r"\boxed{3}"], truth="4"
    )
    _, metrics = _relabel(runner, [g], keep=2)
    assert len(g.completions) == len(g.rewards) == len(g.results) == 2
    assert [c.text for c in g.completions] == [r"\boxed{4}", r"\boxed{3}"]
    assert g.rewards == [0.0, 1.0] and g.results[0].info["pseudo_label"] == "3"
    assert metrics["reward/pseudo/vote/majority_ratio"] == pytest.approx(4 / 6)
    assert metrics["reward/pseudo/check/label_accuracy"] == 0.0
    assert metrics["reward/pseudo/check/true_accuracy"] == 0.5  # of the two kept


def test_rows_without_labels_train_and_report_no_label_metrics(runner):
    g = _group([r"\boxed{12}", r"\boxed{12}", r"\boxed{13}"], truth="")
    assert unlabelled(g.problem) and not unlabelled(_group([], truth="0").problem)
    _, metrics = _relabel(runner, [g])
    assert g.rewards == [1.0, 1.0, 0.0]
    assert "label_correctness" not in g.results[0].info
    assert (
        "reward/pseudo/check/label_accuracy" not in metrics
        and metrics["reward/pseudo/vote/distinct_labels"] == 1.0
    )


@pytest.mark.parametrize(("source", "texts", "rewards"), [
    # the arithmetic verifier: an integer in the final <answer>; "+5" and "5" are one answer
    ("reasonrl/arithmetic", ["<answer>5</answer>", "<answer>+5</answer>", "<answer>6</answer>"], [1.0, 1.0, 0.0]),
    # multiple choice: the letter the response picks, however written
    ("stem__gpqa", ["The answer is (B)", r"\boxed{B}", "Answer: C"], [1.0, 1.0, 0.0]),
    # Search-R1 QA: exact match after normalisation ("The Paris" and "paris" agree)
    ("searchR1_nq", ["<answer>The Paris</answer>", "<answer>paris</answer>", "<answer>Lyon</answer>"],
     [1.0, 1.0, 0.0]),
])  # fmt: skip
def test_every_voting_verifier_reads_its_own_answers(runner, source, texts, rewards):
    truth = {"stem__gpqa": "A", "searchR1_nq": {"target": ["Lyon"]}}.get(source, "9")
    g = _group(texts, truth=truth, source=source)
    _relabel(runner, [g])
    assert g.rewards == rewards


def test_one_answer_to_every_prompt_scores_everything_and_distinct_labels_shows_it(runner):
    """The adversary of majority voting: a policy that answers 0 whatever it is asked agrees with itself.
    It earns full reward (nothing here can tell consensus from correctness); the collapse shows in
    distinct_labels (1 / groups) and in the real labels' metrics."""
    groups = [_group([r"\boxed{0}"] * 4, truth=str(t)) for t in (3, 5, 7, 9)]
    _, metrics = _relabel(runner, groups)
    assert all(g.rewards == [1.0] * 4 for g in groups)
    assert metrics["reward/pseudo/vote/distinct_labels"] == 0.25
    assert (
        metrics["reward/pseudo/check/true_accuracy"] == 0.0
        and metrics["reward/pseudo/check/reward_accuracy"] == 0.0
    )
    honest = [_group([rf"\boxed{{{t}}}"] * 4, truth=str(t)) for t in (3, 5, 7, 9)]
    _, metrics = _relabel(runner, honest)
    assert (
        metrics["reward/pseudo/vote/distinct_labels"] == 1.0
        and metrics["reward/pseudo/check/true_accuracy"] == 1.0
    )


def test_loading_refuses_rows_that_cannot_vote_and_lets_unlabelled_ones_through():
    code = Problem([{"role": "user", "content": "x"}], '{"inputs": [], "outputs": []}', "codegen__x")
    with pytest.raises(InputError, match=r"train row 1: verifier 'code' .* gives no answer to vote on"):
        check_routable([_group([], truth="1").problem, code], "train", vote=True)
    unlabelled_row = _group([], truth="").problem
    check_routable([unlabelled_row], "train", vote=True)
    with pytest.raises(
        InputError, match="empty ground truth"
    ):  # without votes it has nothing to be scored by
        check_routable([unlabelled_row], "train")


@pytest.mark.parametrize(("override", "match"), [
    ("reward.pseudo_label.votes=4", "votes=4 is fewer than rollout.n=8"),
    ("algo.guidance.enabled=true", "with algo.guidance"),
    ("rollout.interaction.enabled=true", "with rollout.interaction"),
    ("algo.adv_estimator=remax", "with algo.adv_estimator=remax"),
    ("algo.objective=sft", "with algo.objective=sft"),
    ("reward.pseudo_label.min_ratio=1.5", r"min_ratio must be in \[0, 1\], got 1.5"),
    ("reward.weights.format_think_answer=0.1", "with reward.weights terms besides correctness"),
])  # fmt: skip
def test_settings_that_cannot_work_are_refused(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config("demo", ["reward.pseudo_label.enabled=true", override])
    check_pseudo_label(
        load_config("demo", ["reward.pseudo_label.enabled=true", "reward.pseudo_label.votes=16"])
    )


def test_own_labels_score_labelled_rows_against_them_and_only_the_rest_vote(runner):
    # the labelled row's majority (4) is wrong by its label (3): with own_labels its label decides
    labelled = _group([r"\boxed{4}", r"\boxed{4}", r"\boxed{3}"], truth="3")
    unlabelled_row = _group([r"\boxed{9}", r"\boxed{9}", r"\boxed{8}"], truth="")
    _, metrics = relabel([labelled, unlabelled_row], runner, None, False, keep=3, own_labels=True)
    assert labelled.rewards == [0.0, 0.0, 1.0] and "pseudo_label" not in labelled.results[0].info
    assert unlabelled_row.rewards == [1.0, 1.0, 0.0] and unlabelled_row.results[0].info["pseudo_label"] == "9"
    assert metrics["reward/pseudo/voted_frac"] == 0.5
    assert "reward/pseudo/check/label_accuracy" not in metrics  # the one voting row has no label to check
    again = _group([r"\boxed{4}", r"\boxed{4}", r"\boxed{3}"], truth="3")
    _, metrics = _relabel(runner, [again])  # without own_labels the vote decides, and is checked
    assert again.rewards == [1.0, 1.0, 0.0] and metrics["reward/pseudo/check/label_accuracy"] == 0.0
    assert metrics["reward/pseudo/voted_frac"] == 1.0
    only = _group([r"\boxed{3}"], truth="3")
    _, metrics = relabel([only], runner, None, False, keep=1, own_labels=True)
    assert only.rewards == [1.0] and metrics == {"reward/pseudo/voted_frac": 0.0}


def test_a_majority_below_min_ratio_is_no_label(runner):
    strong = _group([r"\boxed{3}", r"\boxed{3}", r"\boxed{3}", r"\boxed{4}", r"\boxed{5}"], truth="3")  # 3/5
    weak = _group([r"\boxed{3}", r"\boxed{3}", r"\boxed{4}", r"\boxed{5}", r"\boxed{6}"], truth="3")  # 2/5
    _, metrics = relabel([strong, weak], runner, None, False, keep=5, min_ratio=0.5)
    assert strong.rewards == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert weak.rewards == [0.0] * 5 and {r.reason for r in weak.results} == {"weak_majority"}
    assert weak.results[0].info["pseudo_label"] is None
    assert (
        metrics["reward/pseudo/vote/weak_frac"] == 0.5 and metrics["reward/pseudo/vote/no_label_frac"] == 0.5
    )
    assert metrics["reward/pseudo/vote/majority_ratio"] == pytest.approx(
        (3 / 5 + 2 / 5) / 2
    )  # the weak one counts
    assert (
        metrics["reward/pseudo/check/label_accuracy"] == 0.5
    )  # the weak vote gave no label, so not the right one
    _, metrics = relabel([_group([r"\boxed{3}", r"\boxed{4}"])], runner, None, False, keep=2, min_ratio=0.5)
    assert metrics["reward/pseudo/vote/weak_frac"] == 0.0  # exactly min_ratio is enough


def test_ranks_whose_shares_differ_reduce_to_one_step_of_metrics(runner, monkeypatch):
    """Several ranks: one rank's share has labelled rows, the other's none (no `check/*` keys there), and a
    third voted nothing (own_labels): the families' counts weight each rank, nothing is refused as a gap."""
    import reasonrl.distributed as dist

    _, checked = _relabel(runner, [_group([r"\boxed{3}", r"\boxed{3}", r"\boxed{4}"], truth="3")])
    _, unchecked = _relabel(runner, [_group([r"\boxed{5}", r"\boxed{6}", r"\boxed{7}"], truth="")])
    _, none_voted = relabel(
        [_group([r"\boxed{3}"] * 3, truth="3")], runner, None, False, keep=3, own_labels=True
    )
    monkeypatch.setattr(dist, "active", lambda: True)
    monkeypatch.setattr(dist, "all_gather_objects", lambda m: [checked, unchecked, none_voted])
    out = dist.reduce_metrics(checked)
    assert out["reward/pseudo/voted_frac"] == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3 ranks
    assert out["reward/pseudo/vote/count"] == 2.0 and out["reward/pseudo/check/count"] == 1.0
    assert out["reward/pseudo/vote/majority_ratio"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert out["reward/pseudo/check/label_accuracy"] == 1.0  # the one rank that could check
    assert out["reward/pseudo/vote/labelled_frac"] == 0.5
