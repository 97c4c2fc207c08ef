"""trainer.metrics.mean_metrics: how a step's updates (and a round's micro-batches) reduce to one row."""

from __future__ import annotations

import pytest

from reasonrl.trainer.metrics import mean_metrics
from reasonrl.types import UpdateMetrics


def _update(tokens: float, entropy: float, lr: float, clip_max: float) -> UpdateMetrics:
    values = {"actor/entropy": entropy, "lr": lr, "ratio_max": clip_max}
    return UpdateMetrics(values, token_means=frozenset({"actor/entropy"}), tokens=tokens)


def test_token_means_are_weighted_by_each_updates_tokens_the_rest_are_plain_means():
    step = mean_metrics([_update(14, 1.0, 0.1, 1.5), _update(3, 2.0, 0.3, 1.2)])
    assert step["actor/entropy"] == pytest.approx((14 * 1.0 + 3 * 2.0) / 17)  # not (1 + 2) / 2
    assert step["lr"] == pytest.approx(0.2)  # no token weight: the plain mean
    assert step["ratio_max"] == 1.5  # a maximum stays the maximum


def test_an_update_without_tokens_does_not_count_and_none_with_tokens_gives_zero():
    assert mean_metrics([_update(5, 0.5, 0.1, 1.0), _update(0, 0.0, 0.1, 1.0)])["actor/entropy"] == 0.5
    assert mean_metrics([_update(0, 0.0, 0.1, 1.0)])["actor/entropy"] == 0.0
    # a nan from a loss over no tokens must not poison the step's mean either
    assert (
        mean_metrics([_update(5, 0.5, 0.1, 1.0), _update(0, float("nan"), 0.1, 1.0)])["actor/entropy"] == 0.5
    )


def test_plain_dicts_are_plain_means_over_the_items_that_hold_each_key():
    out = mean_metrics([{"a": 1.0, "b_max": 2.0}, {"a": 3.0, "c": 5.0}, {"b_max": -1.0}])
    assert out == {"a": 2.0, "b_max": 2.0, "c": 5.0}
