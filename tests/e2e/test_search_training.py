"""Training with the search tool against the real retrieval service, started as `reasonrl retriever` in a
process of its own: every completion opens with a Search-R1 query (its tokens scored by the model itself,
as if it had sampled them), the service's passages come back in <information> tags, the HF engine samples
the rest, and the trainer's log-probs of every token the model wrote equal the sampler's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_tool_training import _model_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

CALL = "<search>France</search>"


@pytest.fixture
def retriever(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": str(i), "contents": c}) for i, c in enumerate(
        ['"France"\nParis is the capital of France.', '"Sums"\n12+7 is 19.', '"Cats"\nCats sleep a lot.'])))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "reasonrl.cli.main", "retriever", str(corpus), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert "reasonrl retriever: 3 passages of" in line, line + proc.stderr.read()
        yield line.split("POST ")[1].split()[0]
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


def test_training_with_search_calls_trains_only_the_models_tokens(tmp_path, monkeypatch, retriever):
    opens_with(monkeypatch, CALL, "<information>")
    run, lines = tmp_path / "run", []
    model = _model_dir(
        tmp_path, [CALL + "<information>Doc 1(Title: France) Paris is the capital of France.</information>"]
    )
    hist = train(_cfg(model, run, 2, "rollout.tools.enabled=true", "rollout.tools.format=search_r1",
                      "rollout.tools.names=[search]", f"rollout.tools.search.url={retriever}",
                      "rollout.tools.max_output_chars=2000", "rollout.max_new_tokens=80", "checkpoint.every=0",
                      "log.rollouts_per_step=2"), log=lambda *a: lines.append(" ".join(map(str, a))))["history"]  # fmt: skip
    assert any(f"the search service at {retriever} answers" in line for line in lines)
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 1.0 and h["rollout/tool_error_frac"] == 0.0
        assert h["rollout/logprob_gap_max"] < 1e-4  # the passages' tokens are masked out of the comparison
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    shown = "<information>Doc1(Title:France)ParisisthecapitalofFrance.</information>"  # (this tokenizer drops spaces)
    assert texts and all(shown in t.replace(" ", "") for t in texts)


def test_the_search_benchmark_runs():
    """bench/search_tool.py at a small size: its figures come out and every call of its round succeeded."""
    from pathlib import Path

    bench = Path(__file__).parents[2] / "bench" / "search_tool.py"
    res = subprocess.run([sys.executable, str(bench), "--passages", "300", "--queries", "16", "--samples", "4"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert (
        out["passages"] == 300
        and out["queries"] == 16
        and out["bare_bm25s_qps"] > 0
        and out["service_qps"] > 0
    )
    assert out["round_s"] > 0 and out["samples"] == 4


def test_eval_runs_search_r1s_benchmarks_with_the_tool(tiny_model_dir, retriever, tmp_path):
    """`reasonrl eval MODEL --benchmarks nq,bamboogle --tools search_r1 --search-url URL` on FlashRAG-shaped
    files: the service is tried before the model loads, the table has both sets, and the eval's setup
    records the tool and its service."""
    from reasonrl.cli.main import main

    for name, split in (("nq", "test"), ("bamboogle", "test")):
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / f"{split}.jsonl").write_text("".join(json.dumps(
            {"id": f"{split}_{i}", "question": f"capital of France {i}", "golden_answers": ["Paris"]}) + "\n"
            for i in range(2)))  # fmt: skip
    out = tmp_path / "eval"
    rc = main(["eval", tiny_model_dir, "--benchmarks", "nq,bamboogle", "--data-dir", str(tmp_path / "data"),
               "--tools", "search_r1", "--search-url", retriever, "--max-new-tokens", "8", "--out", str(out)])  # fmt: skip
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    assert sorted(results["benchmarks"]) == ["bamboogle", "nq"]
    rows = [
        r for x in (out / "samples.jsonl").read_text().splitlines() if "benchmark" in (r := json.loads(x))
    ]
    assert len(rows) == 4 and {r["benchmark"] for r in rows} == {"nq", "bamboogle"}
    setup = json.loads(next(out.glob("*setup*.json")).read_text())
    assert setup["tools"]["format"] == "search_r1" and setup["tools"]["names"] == ["search"]
    assert setup["tools"]["search"]["url"] == retriever
    bad = main(["eval", tiny_model_dir, "--benchmarks", "nq", "--data-dir", str(tmp_path / "data"), "--tools",
                "search_r1", "--search-url", "http://127.0.0.1:9/retrieve", "--out", str(tmp_path / "e2")])  # fmt: skip
    assert bad == 2 and not (tmp_path / "e2" / "samples.jsonl").exists()  # the service first, no sample
