"""`train.stop_when` in a run: a rule met ends the run after that step, with a checkpoint of it and the reason
in the result; a resumed run counts afresh and stops again when the rule is met again."""

from __future__ import annotations

from test_train_loop import _cfg

from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.trainer.loop import train


def test_a_rule_met_ends_the_run_with_a_checkpoint_and_a_resume_counts_afresh(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    rule = "train.stop_when=[{metric: reward/mean, above: -1.0, patience: 2}]"  # met at every step
    cfg = _cfg(tiny_model_dir, run, 6, "checkpoint.every=0", rule)
    out = train(cfg, log=lambda *a: None)
    assert [r["step"] for r in out["history"]] == [0, 1, 2]  # validation before training, then two steps
    assert out["stopped"].startswith("train.stop_when: reward/mean above -1 (2 logged values in a row;")
    assert [c.name for c in list_checkpoints(run)] == [
        "step_000002"
    ]  # the step it stopped at, not due otherwise
    again = train(cfg, resume=True, log=lambda *a: None)
    assert [r["step"] for r in again["history"] if r["step"] > 2] == [3, 4]
    assert "stopped" in again and [c.name for c in list_checkpoints(run)][-1] == "step_000004"
    done = train(_cfg(tiny_model_dir, tmp_path / "plain", 2, "checkpoint.every=0"), log=lambda *a: None)
    assert "stopped" not in done and [r["step"] for r in done["history"]] == [0, 1, 2]
