"""`train.stop_when` (trainer.stop_rules): a rule's streak counts the logged values of its metric that cross
its bound in a row, a value on the right side starts it over, a step without the metric leaves it alone,
and the first rule whose streak reaches its patience gives the reason the run stops; rules that cannot
work are named when the recipe loads."""

from __future__ import annotations

import pytest

from reasonrl.config import ConfigError, load_config
from reasonrl.trainer.stop_rules import StopRules


def test_a_rule_stops_after_patience_values_in_a_row_past_its_bound():
    rules = StopRules([{"metric": "reward/pseudo/vote/distinct_labels", "below": 0.2, "patience": 3}])
    seen = [0.5, 0.1, 0.15, 0.3, 0.1, None, 0.05, float("nan"), 0.19]  # None / NaN: not logged this step
    got = []
    for step, v in enumerate(seen, 1):
        got.append(rules.check(step, {} if v is None else {"reward/pseudo/vote/distinct_labels": v}))
    assert got[:8] == [None] * 8  # 0.3 at step 4 started the streak over; steps 6 and 8 left it as it was
    assert got[8] == ("train.stop_when: reward/pseudo/vote/distinct_labels below 0.2 (3 logged values in a row; "
                      "0.19 at step 9): the run stops here, with a checkpoint of this step")  # fmt: skip


def test_above_bounds_a_patience_of_one_and_the_first_rule_met_wins():
    rules = StopRules([{"metric": "rollout/truncated_frac", "above": 0.5},
                       {"metric": "eval/accuracy", "below": 0.3, "patience": 2}])  # fmt: skip
    assert rules.check(1, {"rollout/truncated_frac": 0.5, "eval/accuracy": 0.2}) is None  # 0.5 is not above
    assert rules.check(2, {"rollout/truncated_frac": 0.4}) is None
    reason = rules.check(3, {"rollout/truncated_frac": 0.6, "eval/accuracy": 0.1})
    assert reason.startswith("train.stop_when: rollout/truncated_frac above 0.5 (at step 3; 0.6 at step 3)")
    assert StopRules([]).check(1, {"eval/accuracy": 0.0}) is None


@pytest.mark.parametrize(
    "rule, message",
    [
        ("{metric: x}", "needs one bound, below or above, got none"),
        ("{metric: x, below: 1, above: 2}", "needs one bound, below or above, got ['below', 'above']"),
        ("{metric: x, below: 1, patience: 0}", "patience must be a whole number >= 1"),
        ("{metric: x, below: 1, patience: 1.5}", "patience must be a whole number >= 1"),
        ("{metric: x, below: yes}", "below must be a finite number"),
        ("{metric: x, below: 1, after: 3}", "unknown key(s) ['after']"),
        ("{below: 1}", "metric must name a logged metric"),
        ("3", "must be a mapping"),
    ],
)
def test_a_rule_that_cannot_work_is_named_when_the_recipe_loads(rule, message):
    with pytest.raises(ConfigError, match=r"train\.stop_when\[0\]") as e:
        load_config(None, [f"train.stop_when=[{rule}]"])
    assert message in str(e.value)
