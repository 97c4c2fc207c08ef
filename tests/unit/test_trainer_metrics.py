"""trainer.metrics: how a step's updates (and a round's micro-batches) reduce to one row (`mean_metrics`);
what a resumed run's MetricsLog keeps of the files a kill left."""

from __future__ import annotations

import json

import pytest

from reasonrl.trainer.metrics import MetricsLog, mean_metrics
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
    out = mean_metrics([{"a": 1.0, "b_max": 2.0}, {"b_max": -1.0, "a": 3.0, "c": 5.0}])
    assert out == {"a": 2.0, "b_max": 2.0, "c": 5.0}  # a maximum does not end its item's keys


def _steps(path) -> list:
    return [json.loads(x)["step"] for x in path.read_text().splitlines()]


def test_a_resumed_log_keeps_the_complete_rows_up_to_the_resumed_step_and_drops_the_rest(tmp_path):
    """After a kill: rows of steps past the checkpoint, a torn last line (no closing brace) and a
    complete row the kill left without its newline are all dropped; both files; history re-read."""
    rows = "".join(json.dumps({"step": s, "reward/mean": s / 10}) + "\n" for s in range(4))
    rows = rows.replace("\n", "\n\n", 1)  # a blank line does not end the file
    (tmp_path / "metrics.jsonl").write_text(rows + '{"step": 4, "rew')
    (tmp_path / "rollouts.jsonl").write_text(rows + json.dumps({"step": 1, "text": "late"}))
    log = MetricsLog(tmp_path, tensorboard=False, resume_step=1)
    assert _steps(tmp_path / "metrics.jsonl") == [0, 1]
    assert _steps(tmp_path / "rollouts.jsonl") == [0, 1]  # the unterminated step-1 row went too
    assert [(r["step"], r["reward/mean"]) for r in log.history] == [(0, 0.0), (1, 0.1)]
    log.log(2, {"reward/mean": 0.5})
    log.rollouts(2, [{"text": "a"}, {"text": "b"}])
    assert _steps(tmp_path / "metrics.jsonl") == [0, 1, 2]
    assert _steps(tmp_path / "rollouts.jsonl") == [0, 1, 2, 2]
    log.close()


def test_a_fresh_log_starts_empty_files_and_a_resume_without_files_creates_none(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    (tmp_path / "rollouts.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    assert MetricsLog(tmp_path, tensorboard=False).history == []
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "rollouts.jsonl").exists()
    assert MetricsLog(tmp_path / "r", tensorboard=False, resume_step=3).history == []
    assert not (tmp_path / "r" / "metrics.jsonl").exists()
    MetricsLog(tmp_path / "new" / "run", tensorboard=False).log(0, {"a": 1.0})  # its directory is made
    assert _steps(tmp_path / "new" / "run" / "metrics.jsonl") == [0]


def test_a_rank_that_does_not_write_keeps_its_history_in_memory_and_touches_no_file(tmp_path):
    log = MetricsLog(tmp_path / "r", write=False)
    log.log(0, {"reward/mean": 0.25})
    log.rollouts(0, [{"text": "x"}])
    log.close()
    assert log.history == [{"step": 0, "reward/mean": 0.25}]
    assert not (tmp_path / "r").exists()


def test_a_non_finite_value_is_null_in_the_file_and_a_resume_purges_tensorboard_after_its_step(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path)
    for s in range(3):
        log.log(s, {"loss": float(s), "kl": float("nan") if s == 1 else 0.5})
    log.close()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["kl"] for r in rows] == [0.5, None, 0.5] and [r["loss"] for r in rows] == [0.0, 1.0, 2.0]
    log = MetricsLog(tmp_path, resume_step=1)  # steps 0 and 1 stay; step 2 is redone
    log.log(2, {"loss": 20.0, "kl": 0.5})
    log.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(0, 0.0), (1, 1.0), (2, 20.0)]
    assert _steps(tmp_path / "metrics.jsonl") == [0, 1, 2]
