"""`reasonrl eval MODEL --benchmarks ...` end to end on CPU with a tiny model and two fixture benchmarks:
samples.jsonl holds every sample, the table is recomputed from it exactly, a SIGKILLed eval resumes
without regenerating committed samples and ends with the same table, and bad input fails before any
generation with a one-line error."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from reasonrl.eval.runner import summarize

pytestmark = pytest.mark.timeout(300)


def _data(tmp_path, n_problems=6):
    d = tmp_path / "data"
    d.mkdir()
    rows = [{"question": f"{i} + 1?", "answer": f"so\n#### {i + 1}"} for i in range(n_problems)]
    (d / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    aime = [{"id": i, "problem": f"Find {i}.", "answer": str(i)} for i in range(3)]
    (d / "aime24.jsonl").write_text("".join(json.dumps(r) + "\n" for r in aime))
    return d


def _cmd(model, data, out, *extra):
    return [sys.executable, "-m", "reasonrl.cli.main", "eval", model, "--benchmarks", "gsm8k,aime24",
            "--data-dir", str(data), "--out", str(out), "--n", "2", "--temperature", "1.0",
            "--max-new-tokens", "6", "--chunk-size", "1", "--device", "cpu", *extra]  # fmt: skip


def _run(cmd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)


def _samples(out):
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return [r for r in rows if "committed" not in r], [r for r in rows if "committed" in r]


def test_eval_writes_samples_and_a_table_recomputable_from_them(tiny_model_dir, tmp_path):
    data, out = _data(tmp_path), tmp_path / "out"
    res = _run(_cmd(tiny_model_dir, data, out))
    assert res.returncode == 0, res.stderr[-2000:]
    samples, marks = _samples(out)
    assert len(samples) == (6 + 3) * 2 and len(marks) == 9
    assert {"benchmark", "problem", "uid", "sample", "prompt", "completion", "extracted", "score", "reason",
            "tokens", "finish_reason"} <= set(samples[0])  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    assert results == json.loads(json.dumps(summarize(samples, {"gsm8k": "math", "aime24": "math"})))
    row = results["benchmarks"]["gsm8k"]
    assert row["problems"] == 6 and row["n"] == 2 and {"pass@1", "pass@2", "maj@2", "ci95"} <= set(row)
    assert 0.0 <= row["truncated"] <= 1.0
    assert "| gsm8k |" in (out / "results.md").read_text()
    t = json.loads((out / "timing.json").read_text())  # this invocation's time, by phase
    assert t["chunks"] == 9 and t["samples"] == 18 and t["generate_s"] > 0 and t["score_s"] > 0
    assert t["other_s"] >= 0 and t["total_s"] >= t["generate_s"] + t["score_wait_s"]
    assert abs(t["other_s"] - (t["total_s"] - t["generate_s"] - t["score_wait_s"])) < 1e-3
    assert 0 < t["verifier_ready_s"] < t["total_s"]  # the workers' first answer, timed from their start
    assert "time: " in res.stdout and "samples/s" in res.stdout  # printed after the table


def test_verifier_options_score_the_eval_and_are_recorded(tiny_model_dir, tmp_path, monkeypatch):
    """An engine that answers each problem by copying its question ("3 + 1?" -> "#### 3 + 1", the
    shortcut a policy would find) scores 0 ("unevaluated"); `math.accept_unevaluated` given to the eval
    scores it as math-verify does, and the table says so."""
    import re

    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks
    from reasonrl.rollout.factory import ROLLOUT_ENGINES
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.types import Completion

    class Echo(HFRolloutEngine):
        def generate(self, prompts, params):
            questions = [
                re.search(r"(\d+) ?\+ ?1", self.tokenizer.decode(p)).group(1) + " + 1" for p in prompts
            ]
            return [[Completion([0], f"#### {q}", [0.0]) for _ in range(params.n)] for q in questions]

    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))  # undone afterwards
    ROLLOUT_ENGINES.register("echo-question")(lambda model, tokenizer: Echo(model, tokenizer))
    data = _data(tmp_path)
    kw = dict(data_dir=data, engine="echo-question", device="cpu", overrides={"n": 1, "temperature": 0.0},
              workers=1, log=lambda *a: None)  # fmt: skip
    strict = run_benchmarks(tiny_model_dir, [BENCHMARKS.get("gsm8k")], tmp_path / "strict", **kw)
    samples, _ = _samples(tmp_path / "strict")
    assert [s["completion"] for s in samples][:2] == ["#### 0 + 1", "#### 1 + 1"]
    assert {(s["score"], s["reason"]) for s in samples} == {(0.0, "unevaluated")}
    assert strict["benchmarks"]["gsm8k"]["mean@n"] == 0.0 and "notes" not in strict
    opts = {"gsm8k": {"accept_unevaluated": True}}
    loose = run_benchmarks(
        tiny_model_dir, [BENCHMARKS.get("gsm8k")], tmp_path / "loose", **kw, reward_options=opts
    )
    assert loose["benchmarks"]["gsm8k"]["mean@n"] == 1.0
    assert loose["notes"] == {"verifier options": "gsm8k.accept_unevaluated=true"}
    assert (
        "verifier options: gsm8k.accept_unevaluated=true" in (tmp_path / "loose" / "results.md").read_text()
    )
    setup = json.loads((tmp_path / "loose" / "samples.setup.json").read_text())
    assert setup["verifier_options"] == opts and "verifier_options" not in json.loads(
        (tmp_path / "strict" / "samples.setup.json").read_text()
    )
    from reasonrl.errors import InputError

    with pytest.raises(InputError, match=r"verifier_options: \{'gsm8k': .* there, None now"):  # without them
        run_benchmarks(tiny_model_dir, [BENCHMARKS.get("gsm8k")], tmp_path / "loose", **kw)


def test_scoring_beside_generation_gives_the_same_samples(tiny_model_dir, tmp_path, monkeypatch):
    from pebble.common import CONSTS

    from reasonrl.eval.benchmarks import BENCHMARKS, load_benchmark
    from reasonrl.eval.runner import generate_samples, sampling_for
    from reasonrl.rewards.runner import RewardRunner
    from reasonrl.rollout import scored

    # the verifier pool is told it closes soon when the last chunk starts generating, not earlier
    generated, told = [], []
    real_generate, real_soon = scored.generate_groups, RewardRunner.closing_soon
    monkeypatch.setattr(
        scored, "generate_groups", lambda *a, **k: generated.append(1) or real_generate(*a, **k)
    )
    monkeypatch.setattr(
        RewardRunner, "closing_soon", lambda self: told.append(len(generated)) or real_soon(self)
    )
    tick = CONSTS.sleep_unit
    data = _data(tmp_path)
    b = BENCHMARKS.get("gsm8k")
    work = [
        ("gsm8k", load_benchmark(b, data), sampling_for(b, {"n": 2, "temperature": 1.0, "max_new_tokens": 6}))
    ]
    got = {}
    for overlap in (False, True):  # CPU default: after; accelerator default: beside the next chunk
        path = tmp_path / f"overlap{overlap}" / "samples.jsonl"
        got[overlap] = generate_samples(tiny_model_dir, work, path, device="cpu", chunk_size=2,
                                        log=lambda *a: None, overlap=overlap)  # fmt: skip
        assert path.read_text().count('"committed"') == 3
        assert told == [2] and CONSTS.sleep_unit == tick  # pebble's tick back after the eval
        generated.clear(), told.clear()
    assert len(got[True]) == 12 and got[True] == got[False]


def test_sigkilled_eval_resumes_without_regenerating_and_matches(tiny_model_dir, tmp_path):
    data = _data(tmp_path, n_problems=12)
    ref = _run(_cmd(tiny_model_dir, data, tmp_path / "ref"))
    assert ref.returncode == 0, ref.stderr[-2000:]
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(_cmd(tiny_model_dir, data, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    path = out / "samples.jsonl"
    end = time.monotonic() + 120
    while time.monotonic() < end and not (path.is_file() and path.read_text().count('"committed"') >= 3):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    lines = path.read_text().splitlines(keepends=True)
    last = max(i for i, x in enumerate(lines) if x.startswith('{"committed"') and x.endswith("\n"))
    kept = "".join(lines[: last + 1])  # everything up to the last committed chunk
    done = kept.count('"committed"')
    assert 3 <= done < 15, "the kill came too late to test anything"
    res = _run(_cmd(tiny_model_dir, data, out))
    assert res.returncode == 0, res.stderr[-2000:]
    generated = [x for x in res.stdout.splitlines() if " problems" in x and ("gsm8k:" in x or "aime24:" in x)]
    assert len(generated) == 15 - done  # only the chunks not committed before the kill were generated
    after = path.read_text()
    assert after.startswith(kept)  # committed samples kept as they were, not regenerated
    assert after.count('"committed"') == 15  # 12 + 3 chunks, each exactly once
    assert json.loads((out / "results.json").read_text()) == json.loads(
        (tmp_path / "ref" / "results.json").read_text()
    )


def test_samples_whose_verifier_failed_are_scored_again_by_the_same_command(tiny_model_dir, tmp_path):
    """An eval whose verifier was down for four samples (their rows say so: score 0, reason "error: ...";
    their completions made right answers here): the same command again scores just those again, with the
    real verifier, and generates nothing; the table is recomputed from the new scores."""
    data = _data(tmp_path)
    ref = _run(_cmd(tiny_model_dir, data, tmp_path / "ref"))
    assert ref.returncode == 0, ref.stderr[-2000:]
    out = tmp_path / "out"
    shutil.copytree(tmp_path / "ref", out)
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    hit = [r for r in rows if r.get("benchmark") == "gsm8k" and "sample" in r][:4]  # problems 0 and 1
    for r in hit:  # "{i} + 1?" -> i + 1
        r.update(completion=f"#### {r['problem'] + 1}", score=0.0, extracted=None,
                 reason="error: ConnectionError: the verifier went away")  # fmt: skip
    (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = _run(_cmd(tiny_model_dir, data, out))
    assert res.returncode == 0, res.stderr[-2000:]
    assert (
        f"{out / 'samples.jsonl'}: scored again the 4 samples whose verifier call had failed: 4 scored"
        in (res.stdout)
    )
    assert not [x for x in res.stdout.splitlines() if " problems [" in x]  # no chunk generated
    assert "ended in a verifier error" not in res.stdout + res.stderr  # none left to warn of
    after, _ = _samples(out)
    before, _ = _samples(tmp_path / "ref")
    assert [(r["score"], r["reason"], r["extracted"]) for r in after[:4]] == [(1.0, "correct", "1")] * 2 + [
        (1.0, "correct", "2")
    ] * 2
    assert after[4:] == before[4:]  # every other sample as it was
    results = json.loads((out / "results.json").read_text())
    assert results == json.loads(json.dumps(summarize(after, {"gsm8k": "math", "aime24": "math"})))
    assert results["benchmarks"]["gsm8k"]["mean@n"] == pytest.approx(2 / 6)  # two of six problems now right


def test_samples_still_failing_are_counted_wrong_and_said_so(tmp_path, monkeypatch):
    from reasonrl.eval import runner
    from reasonrl.eval.benchmarks import BENCHMARKS

    def samples(score, reason):
        return {"benchmark": "gsm8k", "problem": 0, "sample": 0, "score": score, "extracted": None,
                "reason": reason, "finish_reason": "stop"}  # fmt: skip

    failing = [samples(0.0, "error: ConnectionError: down"), {**samples(1.0, "correct"), "problem": 1}]
    monkeypatch.setattr(runner, "generate_samples", lambda *a, **k: failing)
    monkeypatch.setattr(runner, "load_benchmark", lambda *a, **k: [])
    monkeypatch.setattr("reasonrl.rewards.check_routable", lambda *a, **k: None)
    logs = []
    res = runner.run_benchmarks("m", [BENCHMARKS.get("gsm8k")], tmp_path, log=logs.append)
    assert logs == [
        "warning: 1 samples ended in a verifier error (e.g. 'error: ConnectionError: down'), so the table counts "
        "them wrong (verifier_errors); run the same command again once the verifier works: only those samples "
        "are scored again"
    ]
    assert (
        res["benchmarks"]["gsm8k"]["mean@n"] == 0.5 and res["benchmarks"]["gsm8k"]["verifier_errors"] == 0.5
    )


def test_a_resume_with_other_settings_is_refused_and_keeps_the_samples(tiny_model_dir, tmp_path):
    """A second run into the same --out adds to its samples only with the same setup: another chunk
    size would repeat some problems' samples under other seeds, another n or model would mix two
    evals into one table."""
    data, out = _data(tmp_path), tmp_path / "out"
    first = _run(_cmd(tiny_model_dir, data, out))
    assert first.returncode == 0, first.stderr[-2000:]
    before = (out / "samples.jsonl").read_bytes(), (out / "results.json").read_bytes()
    for extra, message in [
        (["--chunk-size", "2"], "chunk_size: 1 there, 2 now"),
        (["--n", "3"], "benchmark gsm8k: different sampling"),
        (["--seed", "5"], "seed: 0 there, 5 now"),
    ]:
        res = _run(_cmd(tiny_model_dir, data, out, *extra))
        assert res.returncode == 2 and "holds samples of another setup" in res.stderr, res.stderr[-1500:]
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
        assert ((out / "samples.jsonl").read_bytes(), (out / "results.json").read_bytes()) == before
    rows = (
        (data / "gsm8k.jsonl").read_text().replace("#### 1", "#### 99")
    )  # the same file name, other problems
    (data / "gsm8k.jsonl").write_text(rows)
    res = _run(_cmd(tiny_model_dir, data, out))
    assert res.returncode == 2 and "benchmark gsm8k: different fingerprint" in res.stderr, res.stderr[-1500:]
    (tmp_path / "same").mkdir()
    again = _run(_cmd(tiny_model_dir, _data(tmp_path / "same"), out))  # the original problems: resumes
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "samples.jsonl").read_bytes() == before[0]  # everything was committed: nothing added


@pytest.mark.parametrize(
    "args, message",
    [
        (["--benchmarks", "nope"], "unknown benchmark 'nope'"),
        (["--benchmarks", "math500"], "benchmark math500: no file matching"),
        (["--benchmarks", "gsm8k", "--file", "gsm8k"], "expected NAME=PATH"),
        (["--benchmarks", "gsm8k", "--n", "0"], "--n must be >= 1"),
        (["--benchmarks", "gsm8k", "--workers", "0"], "--workers must be >= 1"),
    ],
)
def test_bad_input_fails_before_generation(tiny_model_dir, tmp_path, args, message):
    data, out = _data(tmp_path), tmp_path / "out"
    res = _run([sys.executable, "-m", "reasonrl.cli.main", "eval", tiny_model_dir, "--data-dir", str(data),
                "--out", str(out), *args])  # fmt: skip
    assert res.returncode == 2 and message in res.stderr, res.stderr[-1500:]
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (out / "samples.jsonl").exists()


def test_missing_model_is_named(tmp_path):
    res = _run(
        [sys.executable, "-m", "reasonrl.cli.main", "eval", str(tmp_path / "nope"), "--benchmarks", "gsm8k"]
    )
    assert res.returncode == 2 and "model path not found" in res.stderr


def test_eval_of_a_run_uses_its_own_validation_data_and_reproduces_its_accuracy(tiny_model_dir, tmp_path):
    from pathlib import Path

    from test_train_loop import _cfg

    from reasonrl.data.schema import write_problems
    from reasonrl.trainer.loop import train
    from reasonrl.types import Problem

    here = str(Path(__file__).parent)
    rows = [Problem([{"role": "user", "content": f"say something about {w}"}], "x", "parity_test", "x",
                    {"split": "test"}, verifier="parity", uid=f"p{i}")
            for i, w in enumerate("apple pear plum fig kiwi lime date yuzu grape melon peach cherry".split())]  # fmt: skip
    write_problems(tmp_path / "train.jsonl", rows)
    write_problems(tmp_path / "val.jsonl", rows[:10])
    import sys as _sys

    _sys.path.insert(0, here)
    try:
        out = train(_cfg(tiny_model_dir, tmp_path / "run", 2, "plugins=[parity_verifier]",
                         f"data.train_files=[{tmp_path / 'train.jsonl'}]", f"data.val_files=[{tmp_path / 'val.jsonl'}]",
                         "val.size=10", "rollout.max_new_tokens=9", "log.tensorboard=false"))  # fmt: skip
    finally:
        _sys.path.remove(here)
    logged = out["history"][-1]["eval/accuracy"]
    assert 0.0 < logged < 1.0  # a mix: only the same problems and settings reproduce it
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run([sys.executable, "-m", "reasonrl.cli.main", "eval", str(tmp_path / "run"), "--device", "cpu"],
                         capture_output=True, text=True, timeout=240, env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["problems"] == 10 and got["mean_score"] == pytest.approx(logged, abs=1e-12)
    assert "run's own validation data" in res.stderr


def test_all_checkpoints_gives_one_table_and_a_plot(tiny_model_dir, tmp_path):
    from test_train_loop import _cfg

    from reasonrl.trainer.loop import train

    train(_cfg(tiny_model_dir, tmp_path / "run", 4, "log.tensorboard=false"))  # checkpoints at 2 and 4
    data, out = _data(tmp_path, n_problems=3), tmp_path / "out"
    res = _run([sys.executable, "-m", "reasonrl.cli.main", "eval", str(tmp_path / "run"), "--all-checkpoints",
                "--benchmarks", "gsm8k", "--data-dir", str(data), "--out", str(out), "--n", "1",
                "--max-new-tokens", "4", "--device", "cpu"])  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    table = json.loads((out / "checkpoints.json").read_text())
    assert sorted(table) == ["2", "4"]
    for step in ("2", "4"):
        ckpt_results = json.loads((out / f"step_00000{step}" / "results.json").read_text())
        assert table[step]["gsm8k"] == ckpt_results["benchmarks"]["gsm8k"]["mean@n"]
    assert (out / "checkpoints.png").stat().st_size > 5_000
    md = (out / "checkpoints.md").read_text()
    row = json.loads((out / "step_000004" / "results.json").read_text())["benchmarks"]["gsm8k"]
    assert md.splitlines()[0] == "| step | gsm8k (mean@n ±ci95) |"
    assert f"| 4 | {row['mean@n']:.4f} ±{row['ci95']:.4f} |" in md
    # `reasonrl view` shows the table (it once looked for another shape of this file and showed nothing)
    import urllib.request

    from reasonrl.viewer.server import Viewer

    with Viewer([out]) as v, urllib.request.urlopen(v.url + "api/evals?run=0", timeout=10) as r:
        tables = {t["file"]: t for t in json.loads(r.read())["tables"]}
    assert tables["checkpoints.json"]["rows"] == [
        {"step": 2, "gsm8k": table["2"]["gsm8k"]},
        {"step": 4, "gsm8k": table["4"]["gsm8k"]},
    ]
    assert tables["step_000004/results.json"]["kind"] == "results"


def test_val_benchmarks_are_logged_during_training_and_checked_first(tiny_model_dir, tmp_path):
    from test_train_loop import _cfg

    from reasonrl.config import ConfigError
    from reasonrl.errors import InputError
    from reasonrl.trainer.loop import train

    data = _data(tmp_path, n_problems=5)
    extra = (
        "val.benchmarks=[gsm8k,aime24]",
        f"val.data_dir={data}",
        "val.benchmark_limit=3",
        "log.tensorboard=false",
    )
    hist = train(_cfg(tiny_model_dir, tmp_path / "run", 2, *extra))["history"]
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import benchmark_metric_names

    for row in (hist[0], hist[-1]):  # before training and at the end
        for name, n in (("gsm8k", 1), ("aime24", 16)):  # each benchmark's own n
            assert 0.0 <= row[f"eval/{name}/mean@n"] <= 1.0
            assert f"eval/{name}/pass@{n}" in row and f"eval/{name}/truncated" in row
            # what checkpoint.keep_best may name (config.checks) is exactly what is logged
            logged = sorted(k for k in row if k.startswith(f"eval/{name}/"))
            assert logged == sorted(benchmark_metric_names(BENCHMARKS.get(name)))
    with pytest.raises(ConfigError, match="val.benchmarks: unknown benchmark 'nope'"):
        _cfg(tiny_model_dir, tmp_path / "r2", 2, "val.benchmarks=[nope]")
    with pytest.raises(InputError, match="benchmark math500: no file matching"):
        train(_cfg(tiny_model_dir, tmp_path / "r3", 2, "val.benchmarks=[math500]", f"val.data_dir={data}"))
    assert not (tmp_path / "r3" / "metrics.jsonl").exists()  # failed before any work


def test_keep_best_keeps_the_best_validation_checkpoint_besides_the_last(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    from pathlib import Path

    from test_train_loop import _cfg

    import reasonrl.trainer.state as state
    from reasonrl.data.schema import write_problems
    from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
    from reasonrl.trainer.loop import train
    from reasonrl.types import Problem

    here = str(Path(__file__).parent)
    rows = [Problem([{"role": "user", "content": f"tell me about {w}"}], "x", "parity_test", "x", {"split": "test"},
                    verifier="parity", uid=f"p{i}") for i, w in enumerate("ab cd ef gh ij kl mn op qr st uv wx".split())]  # fmt: skip
    write_problems(tmp_path / "train.jsonl", rows)
    write_problems(tmp_path / "val.jsonl", rows)
    written = []  # the step of the checkpoint just saved whenever best.json is written

    def spy(root, best):
        written.append(max(int(p.name.split("_")[1]) for p in root.glob("step_*")))
        state_write_best(root, best)

    state_write_best = state._write_best
    monkeypatch.setattr(state, "_write_best", spy)
    sys.path.insert(0, here)
    try:
        hist = train(_cfg(tiny_model_dir, tmp_path / "run", 6, "plugins=[parity_verifier]",
                          f"data.train_files=[{tmp_path / 'train.jsonl'}]", f"data.val_files=[{tmp_path / 'val.jsonl'}]",
                          "val.size=12", "val.every=1", "val.n=1", "checkpoint.every=0", "checkpoint.keep_last=1",
                          "checkpoint.keep_best=eval/accuracy", "algo.entropy_coef=0.2", "train.lr=3e-2",
                          "log.tensorboard=false"))["history"]  # fmt: skip
    finally:
        sys.path.remove(here)
    acc = {r["step"]: r["eval/accuracy"] for r in hist if r["step"] > 0}
    best_step = max(acc, key=lambda s: (acc[s], -s))  # the first step reaching the maximum
    best = json.loads((tmp_path / "run" / "checkpoints" / "best.json").read_text())
    assert best["step"] == best_step and best["value"] == acc[best_step] and best["metric"] == "eval/accuracy"
    kept = [c.name for c in list_checkpoints(tmp_path / "run")]
    assert kept == sorted({f"step_{best_step:06d}", "step_000006"})  # the best and the last, nothing else
    assert all(verify_checkpoint(c) is None for c in list_checkpoints(tmp_path / "run"))
    assert len(set(acc.values())) > 1, "the accuracy never changed: the test shows nothing"
    # best.json is written with each new best's own checkpoint (so a run stopped later still names it),
    # and by no other checkpoint
    assert written == [s for s in acc if acc[s] > max([acc[r] for r in acc if r < s], default=float("-inf"))]
    _export_and_eval_the_best(tmp_path / "run", f"step_{best_step:06d}", here, capsys)


def _export_and_eval_the_best(run, best, plugin_dir, capsys):
    """`reasonrl export RUN OUT --best` and `reasonrl eval RUN --best` take the checkpoint best.json names
    (the newest is another one); a run without it, or naming a checkpoint that no longer verifies, is
    a one-line error before any work."""
    from reasonrl.cli import main as cli

    capsys.readouterr()
    assert cli.main(["export", str(run), str(run.parent / "best_export"), "--best"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["checkpoint"] == str(run / "checkpoints" / best)  # here step 1 (the newest: step 6)
    sys.path.insert(0, plugin_dir)  # the run's own validation set is scored by its plugin verifier
    try:
        assert cli.main(["eval", str(run), "--best", "--device", "cpu"]) == 0
    finally:
        sys.path.remove(plugin_dir)
    assert f"evaluating {run / 'checkpoints' / best} (the run's best checkpoint)" in capsys.readouterr().err
    shutil.copytree(run, run.parent / "nobest")
    (run.parent / "nobest" / "checkpoints" / "best.json").unlink()
    assert cli.main(["export", str(run.parent / "nobest"), str(run.parent / "x"), "--best"]) == 2
    assert (
        "the run kept no best checkpoint (train with checkpoint.keep_best=METRIC)" in capsys.readouterr().err
    )
    (run / "checkpoints" / best / "config.json").write_text("{}")  # damaged after it was saved
    assert cli.main(["eval", str(run), "--best"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reasonrl: error: --best: {run / 'checkpoints' / best}: ") and err.count("\n") == 1
    assert cli.main(["eval", str(run), "--best", "--all-checkpoints", "--benchmarks", "gsm8k"]) == 2
    assert "--best and --all-checkpoints: choose one" in capsys.readouterr().err
    assert not (run.parent / "x").exists()


def test_held_out_eval_samples_with_the_given_top_p(tiny_model_dir, monkeypatch, capsys):
    # before: --top-p was accepted and ignored outside --benchmarks
    import reasonrl.eval.accuracy as accuracy
    from reasonrl.cli import main as cli

    seen = []  # (and it says how many samples its verifier failed on: they count as wrong in the mean)
    result = accuracy.Evaluation(0.25, [], ["correct", "wrong", "error: ConnectionError: refused", "timeout"])
    monkeypatch.setattr(accuracy, "evaluate", lambda engine, tok, problems, params, **kw: seen.append(params) or result)  # fmt: skip
    argv = ["eval", str(tiny_model_dir), "--task", "arithmetic", "--size", "3", "--device", "cpu"]
    assert cli.main([*argv, "--temperature", "0.7", "--top-p", "0.5"]) == 0
    assert cli.main([*argv, "--top-p", "0.5"]) == 0  # greedy: no nucleus
    assert [(p.temperature, p.top_p) for p in seen] == [(0.7, 0.5), (0.0, 1.0)]
    out, err = capsys.readouterr()
    assert out.count('"mean_score": 0.25, "verifier_errors": 0.5') == 2
    assert err.count("warning: eval: the verifier failed on 1 of 4 samples (e.g. 'error: ConnectionError: "
                     "refused'); they count as wrong\n") == 2  # fmt: skip
