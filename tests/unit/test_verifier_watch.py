"""A verifier failing on most of its calls: a warning on the first step, a stop after `patience` in a row."""

from __future__ import annotations

import pytest

from reasonrl.errors import InputError
from reasonrl.trainer.verifier_watch import VerifierFailing, VerifierWatch
from reasonrl.types import RewardResult


class _Group:
    def __init__(self, *reasons):
        self.results = [RewardResult(0.0, {"extracted": None, "reason": r}) for r in reasons]


def _failing(rate=1.0, name="judge"):
    return {f"verifier/{name}/error_rate": rate, "verifier/error_rate": rate, f"verifier/{name}/count": 8.0}


REFUSED = "error: connection: [Errno 111] Connection refused"


def test_a_streak_warns_once_then_stops_on_its_patience_th_step():
    logs = []
    watch = VerifierWatch(0.5, 3, logs.append)
    groups = [_Group(REFUSED, REFUSED, "wrong"), _Group("error: worker died (exit code -9)")]
    watch.check(4, _failing(), groups)
    watch.check(5, _failing(0.75), groups)
    assert len(logs) == 1 and logs[0].startswith(
        "warning: step 4: verifier 'judge' failed on 100% of its calls"
    )
    assert f"(e.g. {REFUSED!r})" in logs[0]  # the most common error reason
    assert "reward.error_patience=3: the run stops when this lasts that many steps in a row" in logs[0]
    with pytest.raises(VerifierFailing) as e:
        watch.check(6, _failing(0.6), groups)
    msg = str(e.value)
    assert msg.startswith("verifier 'judge' failed on 60% of its calls (e.g. 'error: connection")
    assert (
        "above reward.max_error_rate=0.5 for 3 steps in a row (steps 4-6); stopped before step 6's update"
        in msg
    )
    assert "\n" not in msg and isinstance(e.value, InputError)  # the CLI's one-line error, exit status 2
    assert len(logs) == 1


def test_a_healthy_step_ends_the_streak():
    logs = []
    watch = VerifierWatch(0.5, 2, logs.append)
    for step, rate in enumerate([1.0, 0.0, 1.0, 0.2, 1.0], start=1):
        watch.check(step, _failing(rate), [])
    # three streaks of one step each: warned each time, never stopped
    assert [x.split(":")[0] for x in logs] == ["warning", "warning", "warning"]
    assert [x.split(":")[1] for x in logs] == [" step 1", " step 3", " step 5"]
    with pytest.raises(VerifierFailing, match=r"for 2 steps in a row \(steps 5-6\)"):
        watch.check(6, _failing(), [])


def test_what_counts_as_failing():
    logs = []
    watch = VerifierWatch(0.5, 1, logs.append)
    watch.check(1, _failing(0.5), [])  # at the limit: not above it
    timeouts = {"verifier/code/timeout_rate": 1.0, "verifier/timeout_rate": 1.0}
    watch.check(2, timeouts, [])  # timeouts are scores
    watch.check(
        3, {"verifier/error_rate": 1.0}, []
    )  # the overall rate names no verifier: per-name rates only
    watch.check(4, {"verifier/math/error_rate": 0.0, "reward/mean": 1.0}, [])
    assert logs == []
    both = {**_failing(0.9), "verifier/code/error_rate": 0.51}
    with pytest.raises(VerifierFailing) as e:
        watch.check(5, both, [])
    # every failing verifier named; with patience 1 the warning and the stop come on the same step
    assert str(e.value).startswith(
        "verifier 'code' failed on 51% of its calls; verifier 'judge' failed on 90%"
    )
    assert "above reward.max_error_rate=0.5 at step 5; stopped before step 5's update" in str(e.value)
    assert len(logs) == 1 and "reward.error_patience=1: the run stops when this lasts" in logs[0]


def test_patience_zero_warns_and_trains_on():
    logs = []
    watch = VerifierWatch(0.0, 0, logs.append)
    for step in range(1, 20):
        watch.check(step, _failing(0.01), [])
    assert len(logs) == 1 and "reward.error_patience=0: the run goes on" in logs[0]
    assert "(e.g." not in logs[0]  # no error reason in hand: none made up


def test_the_example_reason_is_cut_for_one_line():
    logs = []
    VerifierWatch(0.5, 0, logs.append).check(1, _failing(), [_Group("error: " + "x" * 500)])
    assert f"(e.g. {'error: ' + 'x' * 153!r})" in logs[0]  # 160 characters of the reason


@pytest.mark.parametrize(
    "override, message",
    [
        ("reward.max_error_rate=1", r"reward.max_error_rate must be in \[0, 1\)"),
        ("reward.max_error_rate=-0.1", r"reward.max_error_rate must be in \[0, 1\)"),
        ("reward.error_patience=-1", r"reward.error_patience must be >= 0, got -1"),
    ],
)
def test_bad_settings_are_refused(override, message):
    from reasonrl.config import load_config

    with pytest.raises(InputError, match=message):
        load_config(None, [override])
