"""`reasonrl data passrate` / `data filter` end to end on the demo model (the warm-started tiny model,
which solves some addsub problems and not others): pass rates through the eval runner's path, stored as
a column named after the model with every input column kept; a run killed with SIGKILL mid-way resumes
and ends with exactly the pass rates of an uninterrupted run; `filter` keeps the rows inside the range.
Plus the progress callback, on a random tiny model with a plugin verifier."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reasonrl.data.files import read_rows
from reasonrl.data.schema import write_problems
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(400)
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def demo_cache():
    """The demo model's cache: the default one, which every other test uses (built there on first use,
    once per machine, in a subprocess as the commands below build it)."""
    from reasonrl.models.loading import cache_root

    code = (
        "from reasonrl.models.loading import resolve_model_path; resolve_model_path('demo:addsub', log=print)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return str(cache_root())


def _env(cache=None):
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    return {**env, "REASONRL_CACHE": cache} if cache else env


def _cmd(data, out):
    return [sys.executable, "-m", "reasonrl.cli.main", "data", "passrate", str(data), "--model", "demo:addsub",
            "--out", str(out), "--n", "4", "--max-new-tokens", "40", "--chunk-size", "1", "--device", "cpu",
            "--column", "demo_pass_rate"]  # fmt: skip


def _run(cmd, cache):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(cache))


def test_passrate_on_the_demo_model_and_sigkill_resume_match_an_uninterrupted_run(demo_cache, tmp_path):
    from reasonrl.data.tasks import generate

    data = tmp_path / "train.parquet"
    write_problems(data, generate("addsub", 12, seed=3, difficulty=2, split="test"))
    sols = tmp_path / "solutions.parquet"
    ref = _run([*_cmd(data, tmp_path / "ref.parquet"), "--solutions", str(sols)], demo_cache)
    assert ref.returncode == 0, ref.stderr[-2000:]
    ref_rows = read_rows(tmp_path / "ref.parquet")
    rates = [r["demo_pass_rate"] for r in ref_rows]
    assert len(set(rates)) > 1 and max(rates) > 0  # a mix of rates: the comparison below can fail
    # rejection sampling: one solving sample of each problem the model solved at all, as an SFT row
    from reasonrl.data.schema import read_problems
    from reasonrl.rewards import score

    solved = [r["extra_info"]["uid"] for r in ref_rows if r["demo_pass_rate"] > 0]
    got = read_problems(sols)
    assert [p.uid for p in got] == solved and json.loads(ref.stdout)["solutions"] == len(solved)
    assert all(score(p.extra_info["response"], p).score == 1.0 for p in got)
    assert {p.extra_info["response_model"] for p in got} == {"demo:addsub"}
    assert all(r * 4 == int(r * 4) for r in rates)  # k / n with n = 4
    assert [r["extra_info"]["uid"] for r in ref_rows] == [r["extra_info"]["uid"] for r in read_rows(data)]
    assert json.loads(ref.stdout)["column"] == "demo_pass_rate"

    out = tmp_path / "out.parquet"
    samples = tmp_path / "out.parquet.work" / "demo_pass_rate" / "samples.jsonl"
    proc = subprocess.Popen(_cmd(data, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(demo_cache))  # fmt: skip
    end = time.monotonic() + 200
    while time.monotonic() < end and not (
        samples.is_file() and samples.read_text().count('"committed"') >= 3
    ):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    done = samples.read_text().count('"committed"')
    assert 3 <= done < 12 and not out.exists(), "the kill came too late to test anything"
    res = _run(_cmd(data, out), demo_cache)
    assert res.returncode == 0, res.stderr[-2000:]
    generated = [x for x in res.stderr.splitlines() if x.startswith("passrate:") and "problems" in x]
    assert len(generated) == 12 - done  # only the uncommitted chunks were generated again
    assert [r["demo_pass_rate"] for r in read_rows(out)] == rates

    lo, hi = sorted(rates)[3], sorted(rates)[8]
    flt = subprocess.run([sys.executable, "-m", "reasonrl.cli.main", "data", "filter", str(out), "--out",
                          str(tmp_path / "f.jsonl"), "--range", f"demo_pass_rate={lo}:{hi}"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert flt.returncode == 0, flt.stderr
    kept = [r["extra_info"]["uid"] for r in read_rows(tmp_path / "f.jsonl")]
    assert kept == [r["extra_info"]["uid"] for r in ref_rows if lo <= r["demo_pass_rate"] <= hi]


def test_progress_reports_every_committed_chunk(tiny_model_dir, tmp_path):
    sys.path.insert(0, str(HERE))
    import parity_verifier  # noqa: F401 - registers "parity" here

    from reasonrl.data.passrate import pass_rates
    from reasonrl.rollout.base import SamplingParams

    problems = [Problem([{"role": "user", "content": f"tell me about {w}"}], "x", "parity_test", "x", {"index": i},
                        verifier="parity", uid=f"p{i}") for i, w in enumerate(["ab", "cd", "ef"])]  # fmt: skip
    seen = []
    rates = pass_rates(tiny_model_dir, problems, tmp_path / "s.jsonl", SamplingParams(n=2, max_new_tokens=4),
                       device="cpu", chunk_size=1, plugins=("parity_verifier",), log=lambda m: None,
                       progress=lambda d, t: seen.append((d, t)))  # fmt: skip
    assert seen == [(1, 3), (2, 3), (3, 3)] and len(rates) == 3


def test_samples_whose_verifier_failed_are_scored_again_by_a_rerun_and_never_give_a_rate(tiny_model_dir, tmp_path,
                                                                                         monkeypatch):  # fmt: skip
    """The verifier's service is down for the first run: no rates (a clear error, nothing written). The same
    call once it is back scores those samples again without generating anything, and gives the rates of a
    run that never failed."""
    sys.path.insert(0, str(HERE))
    import parity_verifier  # noqa: F401 - registers "parity_unless_down" here

    from reasonrl.data.passrate import pass_rates
    from reasonrl.errors import InputError
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    down = tmp_path / "down"
    down.touch()
    problems = [Problem([{"role": "user", "content": f"tell me about {w}"}], "x", "parity_test", "x",
                        {"index": i, "down_if": str(down)}, verifier="parity_unless_down", uid=f"p{i}")
                for i, w in enumerate(["ab", "cd", "ef"])]  # fmt: skip
    params = SamplingParams(n=2, max_new_tokens=4)
    logs = []
    kw = dict(device="cpu", chunk_size=1, plugins=("parity_verifier",), log=logs.append)
    path = tmp_path / "s.jsonl"
    with pytest.raises(InputError, match=r"s.jsonl: 6 of 6 samples ended in a verifier error \(e.g. 'error: "
                                         r"ConnectionError: the parity service is down'\), so their problems' pass "
                                         r"rates are unknown and nothing was written"):  # fmt: skip
        pass_rates(tiny_model_dir, problems, path, params, **kw)
    first = [json.loads(x) for x in path.read_text().splitlines()]
    # still down: scored again and failing again; --allow-verifier-errors counts them unsolved, saying so
    logs.clear()
    assert pass_rates(tiny_model_dir, problems, path, params, allow_verifier_errors=True, **kw) == [0.0] * 3
    assert logs[0].startswith(f"{path}: scored again the 6 samples whose verifier call had failed: 0 scored, 6 "
                              "failed again (e.g. 'error: ConnectionError: the parity service is down')")  # fmt: skip
    assert logs[-1].startswith(f"warning: {path}: 6 of 6 samples ended in a verifier error")
    assert [json.loads(x) for x in path.read_text().splitlines()] == first
    down.unlink()
    generated = []
    real = HFRolloutEngine.generate
    monkeypatch.setattr(
        HFRolloutEngine, "generate", lambda self, *a, **k: generated.append(1) or real(self, *a, **k)
    )
    rates = pass_rates(tiny_model_dir, problems, path, params, **kw)
    assert generated == []  # nothing generated again
    assert f"{path}: scored again the 6 samples whose verifier call had failed: 6 scored" in logs
    clean = pass_rates(tiny_model_dir, problems, tmp_path / "clean.jsonl", params, **kw)
    assert generated and rates == clean and 0 < sum(rates) < 3  # a mix, so the scores must be the real ones
    again = [json.loads(x) for x in path.read_text().splitlines()]
    assert again == [json.loads(x) for x in (tmp_path / "clean.jsonl").read_text().splitlines()]
    # the same lines (committed markers too), only the failed samples' score / reason / extracted changed
    assert [{k: v for k, v in r.items() if k not in ("score", "reason", "extracted")} for r in first] == [
        {k: v for k, v in r.items() if k not in ("score", "reason", "extracted")} for r in again
    ]
    assert all(r["reason"].startswith("error") for r in first if "sample" in r)
    assert all(r["reason"] == "parity" for r in again if "sample" in r)
