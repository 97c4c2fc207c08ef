"""The chunk progress display: on a terminal a rich bar that follows the runner's (done, total) and hides
its plain lines; elsewhere the runner's own lines, untouched."""

from __future__ import annotations

from reasonrl.cli.bars import chunk_progress


def test_plain_lines_when_not_a_terminal():
    lines = []
    with chunk_progress("eval", lines.append, enabled=False) as (log, progress):
        log("gsm8k: 1/2 problems [1/2 chunks, 0s, ETA 0s]")
    assert progress is None and lines == ["gsm8k: 1/2 problems [1/2 chunks, 0s, ETA 0s]"]


def test_bar_follows_progress(capsys):
    lines = []
    with chunk_progress("eval", lines.append, enabled=True) as (log, progress):
        log("hidden behind the bar")
        for done in (1, 2, 3):
            progress(done, 3)
    assert lines == []  # the bar replaces the lines
