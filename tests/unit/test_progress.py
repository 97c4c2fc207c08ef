"""Progress output: plain lines (step, reward, accuracy, step time, ETA) when stdout is not a terminal."""

from __future__ import annotations

import io

from reasonrl.trainer.progress import Progress


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    p = Progress(10, start=0, enabled=True, stream=out, every_s=3600)
    for step in range(1, 11):
        metrics = {"reward/mean": step / 10, "perf/step_seconds": 0.5}
        if step == 10:
            metrics["eval/accuracy"] = 0.75
        p.update(step, metrics)
    p.close()
    lines = out.getvalue().splitlines()
    # the first step and the last are always shown; in between, at most one line per interval
    assert len(lines) == 2
    assert lines[0].startswith("step 1/10  reward 0.100  step 0.50s  eta ")
    assert lines[1].startswith("step 10/10  reward 1.000  val acc 0.750  step 0.50s  eta 0:00:00")


def test_disabled_prints_nothing():
    out = io.StringIO()
    p = Progress(3, enabled=False, stream=out)
    p.update(1, {"reward/mean": 1.0})
    p.close()
    assert out.getvalue() == ""
