"""The viewer's read-only JSON API over run directories (no browser): runs found, metric columns,
rollout search and filters, eval tables, bad parameters named, a torn last line skipped, live files
re-read, nothing under the run directory changed, and only 127.0.0.1 bound by default."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from reasonrl.errors import InputError
from reasonrl.viewer.runs import find_runs
from reasonrl.viewer.server import Viewer
from reasonrl.viewer.synthetic import write_run


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _tree(root):
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def two_runs(tmp_path):
    write_run(tmp_path / "runs" / "a", steps=12, groups_per_step=3, n=4, seed=0)
    write_run(tmp_path / "runs" / "b", steps=8, groups_per_step=2, n=2, seed=1, offset=0.1)
    return tmp_path / "runs"


def test_runs_metrics_and_evals(two_runs):
    before = _tree(two_runs)
    with Viewer([two_runs]) as v:
        assert v.url.startswith("http://127.0.0.1:")
        assert [r["name"] for r in _get(v.url + "api/runs")] == ["a", "b"]
        m = _get(v.url + "api/metrics?run=1")
        assert m["steps"] == list(range(1, 9))
        rows = [json.loads(x) for x in (two_runs / "b" / "metrics.jsonl").read_text().splitlines()]
        assert m["series"]["reward/mean"] == [r["reward/mean"] for r in rows]
        # eval/accuracy is logged on some steps only: aligned to the steps with gaps as null
        assert m["series"]["eval/accuracy"] == [r.get("eval/accuracy") for r in rows]
        assert m["series"]["eval/accuracy"][1] is None and m["series"]["eval/accuracy"][4] is not None
        (table,) = _get(v.url + "api/evals?run=0")["tables"]
        assert table["file"] == "eval/final/results.json" and table["benchmarks"]["gsm8k"]["mean@n"] == 0.42
    assert _tree(two_runs) == before  # the viewer never writes into a run directory


def test_rollout_search_filters_and_pages(two_runs):
    with Viewer([two_runs / "a"]) as v:
        api = v.url + "api/rollouts?run=0"
        everything = _get(api + "&limit=500")
        assert everything["total"] == 12 * 3 and everything["steps"] == list(range(1, 13))
        assert everything["data_sources"] == ["arithmetic", "countdown", "math__gsm8k"]
        assert [g["step"] for g in everything["groups"][:4]] == [12, 12, 12, 11]  # newest first
        hit = _get(api + "&q=WHAT%20IS%207%20%2B%202")  # case-insensitive, in the prompt
        assert hit["total"] == 1 and hit["groups"][0]["uid"] == "s7-g2"
        group = hit["groups"][0]
        assert [c["reward"] for c in group["completions"]] == [1.0, 0.0, 1.0, 0.0]
        assert (
            group["completions"][1]["extracted"] == "10"
            and group["completions"][1]["reason"] == "wrong answer"
        )
        assert group["mean_reward"] == 0.5 and "_text" not in group
        hits = _get(
            api + "&q=the%20answer%20is%2014."
        )  # in completions: right for 12+2, wrong for 11+2, 12+1
        assert sorted(g["uid"] for g in hits["groups"]) == ["s11-g2", "s12-g1", "s12-g2"]
        step5 = _get(api + "&step=5&data_source=countdown")
        assert [g["uid"] for g in step5["groups"]] == ["s5-g1"]
        assert _get(api + "&min_reward=0.6")["total"] == 0 and _get(api + "&max_reward=0.5")["total"] == 36
        page2 = _get(api + "&limit=10&offset=10")
        assert page2["offset"] == 10 and [g["id"] for g in page2["groups"]] == [
            g["id"] for g in everything["groups"][10:20]
        ]


@pytest.mark.parametrize(
    "query, named",
    [("run=7", "run=7"), ("step=x", "step='x'"), ("limit=0", "limit"), ("min_reward=abc", "min_reward")],
)
def test_bad_parameters_are_a_400_naming_them(two_runs, query, named):
    with Viewer([two_runs]) as v:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(v.url + "api/rollouts?" + query, timeout=10)
        assert e.value.code == 400 and named in json.loads(e.value.read())["error"]


def test_static_files_only_from_the_package(two_runs):
    with Viewer([two_runs]) as v:
        page = urllib.request.urlopen(v.url, timeout=10).read().decode()
        assert "/static/vendor/uplot/uPlot.iife.min.js" in page and "https://" not in page  # no CDN
        js = urllib.request.urlopen(v.url + "static/vendor/uplot/uPlot.iife.min.js", timeout=10)
        assert js.headers["Content-Type"].startswith("text/javascript") and len(js.read()) > 10_000
        for bad in ("static/../server.py", "static/%2e%2e/server.py", "etc/passwd"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(v.url + bad, timeout=10)
            assert e.value.code == 404


def test_torn_line_is_skipped_and_a_live_run_is_reread(tmp_path):
    run = write_run(tmp_path / "live", steps=3, groups_per_step=1, n=2)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "reward/me')  # a run killed mid-write
    with Viewer([run]) as v:
        assert _get(v.url + "api/metrics")["steps"] == [1, 2, 3]
        with open(run / "metrics.jsonl", "a") as f:
            f.write('an": 0.9}\n{"step": 5, "reward/mean": 0.95}\n')
        m = _get(v.url + "api/metrics")
        assert m["steps"] == [1, 2, 3, 4, 5] and m["series"]["reward/mean"][-2:] == [
            0.9,
            0.95,
        ]  # line completed


def test_paths_that_are_not_runs_are_named(tmp_path):
    with pytest.raises(InputError, match="not a directory"):
        find_runs([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty: no metrics.jsonl"):
        find_runs([tmp_path / "empty"])
    a = write_run(tmp_path / "x" / "run", steps=2)
    b = write_run(tmp_path / "y" / "run", steps=2)
    with Viewer([a, b, a]) as v:  # duplicates dropped, same names told apart by their parent
        assert [r["name"] for r in _get(v.url + "api/runs")] == ["x/run", "y/run"]


def test_view_command_serves_and_stops_on_ctrl_c(tmp_path):
    """`reasonrl view RUN --port 0`: prints its address, serves the API, exits 0 on SIGINT, leaves
    nothing running; a path that is not a run is a one-line error before anything is served."""
    import os
    import re
    import signal
    import subprocess
    import sys

    run = write_run(tmp_path / "r", steps=3, groups_per_step=1, n=2)
    cmd = [sys.executable, "-m", "reasonrl.cli.main", "view", str(run), "--port", "0"]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        assert "1 run(s): r" in line
        assert [r["name"] for r in _get(url + "api/runs")] == ["r"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bad = subprocess.run([sys.executable, "-m", "reasonrl.cli.main", "view", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.strip() == f"reasonrl: error: {tmp_path / 'nope'}: not a directory " \
        "(expected a run directory or a directory of runs)"  # fmt: skip


def test_a_taken_port_or_one_out_of_range_is_a_clear_error(two_runs):
    """Before: OSError "Address already in use" / OverflowError as tracebacks."""
    first = Viewer([two_runs]).start()
    try:
        port = int(first.url.rsplit(":", 1)[1].strip("/"))
        with pytest.raises(InputError, match=rf"cannot serve on 127.0.0.1:{port}: Address already in use; choose "
                                             r"another --port \(0 picks a free one\)"):  # fmt: skip
            Viewer([two_runs], port=port)
    finally:
        first.close()
    with pytest.raises(InputError, match=r"--port 70000: a port is 0-65535"):
        Viewer([two_runs], port=70000)


def test_checkpoint_tables_are_shown_in_step_order_and_other_shapes_skipped(tmp_path):
    write_run(tmp_path / "run", steps=2, groups_per_step=1, n=2, seed=0)
    (tmp_path / "run" / "eval" / "all").mkdir(parents=True)
    # the shape `reasonrl eval --all-checkpoints` writes: {step: {benchmark: mean@n}}
    table = {"10": {"gsm8k": 0.5, "aime24": 0.1}, "9": {"gsm8k": 0.4, "aime24": 0.0}}
    (tmp_path / "run" / "eval" / "all" / "checkpoints.json").write_text(json.dumps(table))
    (tmp_path / "run" / "eval" / "odd").mkdir()
    (tmp_path / "run" / "eval" / "odd" / "checkpoints.json").write_text(json.dumps({"last": {"gsm8k": 1}}))
    with Viewer([tmp_path / "run"]) as v:
        tables = {t["file"]: t for t in _get(v.url + "api/evals?run=0")["tables"]}
    assert tables["eval/all/checkpoints.json"]["rows"] == [
        {"step": 9, "gsm8k": 0.4, "aime24": 0.0},
        {"step": 10, "gsm8k": 0.5, "aime24": 0.1},
    ]
    assert "eval/odd/checkpoints.json" not in tables


def test_a_groups_voted_label_is_served_beside_its_ground_truth(tmp_path):
    """reward.pseudo_label runs write each group's voted label; the page shows it (app.js), the API serves it."""
    run = write_run(tmp_path / "ttrl", steps=1, groups_per_step=2, n=2)
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    rows[0]["pseudo_label"], rows[1]["pseudo_label"] = "7", None
    (run / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Viewer([run]) as v:
        got = {g["uid"]: g for g in _get(v.url + "api/rollouts?run=0")["groups"]}
    assert got[rows[0]["uid"]]["pseudo_label"] == "7" and got[rows[1]["uid"]]["pseudo_label"] is None
    plain = write_run(tmp_path / "plain", steps=1, groups_per_step=1, n=2)
    with Viewer([plain]) as v:
        assert "pseudo_label" not in _get(v.url + "api/rollouts?run=0")["groups"][0]
