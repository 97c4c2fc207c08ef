"""The eval runner's files without a model: the results table from samples, committed chunks of a torn
samples file, the setup check of a resume, sampling settings, the markdown table and the timing line.
Hand-computed values are in comments."""

from __future__ import annotations

import json
import math

import pytest

from reasonrl.errors import InputError
from reasonrl.eval.benchmarks import Benchmark
from reasonrl.eval.runner import _chunk_seed, results_markdown, sampling_for, summarize, timing_line
from reasonrl.eval.samples import check_setup, committed_samples


def _s(bench, problem, sample, score, extracted, reason="correct", finish="stop"):
    return {"benchmark": bench, "problem": problem, "sample": sample, "score": score, "extracted": extracted,
            "reason": reason, "finish_reason": finish}  # fmt: skip


# benchmark a: problem 0 scores [1, 0, 1, 1]; problem 1 scores [0, 0, 0, 1] plus a fifth sample that
# the common n = 4 leaves out (it would change every number: score 1, truncated, a verifier error)
SAMPLES = [
    _s("a", 1, 4, 1.0, "z", reason="error: boom", finish="length"),
    _s("a", 0, 1, 0.0, "4", reason="wrong", finish="length"),
    _s("a", 0, 0, 1.0, "5"),
    _s("a", 0, 2, 1.0, "5"),
    _s("a", 0, 3, 1.0, "5"),
    _s("a", 1, 3, 1.0, "z"),
    _s("a", 1, 0, 0.0, "x", reason="timeout"),
    _s("a", 1, 1, 0.0, "x", reason="error: unparsable"),
    _s("a", 1, 2, 0.0, "y", reason="wrong", finish="length"),
    _s("b", 0, 0, 0.2, "q", reason="partial"),
    # benchmark c: n = 2, problem 0 scores [1, 1], problem 1 [0, 1] (first answer "7" and "8" tie 1-1)
    _s("c", 0, 0, 1.0, "7"),
    _s("c", 0, 1, 1.0, "7"),
    _s("c", 1, 0, 0.0, "7"),
    _s("c", 1, 1, 1.0, "8"),
]


def test_the_table_is_computed_from_the_samples_over_a_common_n():
    res = summarize(SAMPLES, {"a": "math", "b": "code", "c": "math"})
    a = res["benchmarks"]["a"]
    assert (a["problems"], a["n"]) == (2, 4)
    assert a["mean@n"] == pytest.approx(0.5)  # per problem [0.75, 0.25]
    assert a["se"] == pytest.approx(0.25)  # stdev 0.35355 / sqrt(2)
    assert a["ci95"] == pytest.approx(1.96 * 0.25)
    # pass@k (unbiased): c = 3 and 1 of n = 4; pass@2 = [1 - C(1,2)/C(4,2), 1 - C(3,2)/C(4,2)] = [1, 0.5]
    assert (a["pass@1"], a["pass@2"], a["pass@4"]) == pytest.approx((0.5, 0.75, 1.0))
    assert "pass@8" not in a and "pass@3" not in a
    assert a["maj@4"] == pytest.approx(0.5)  # "5" wins (scored 1), "x" wins (scored 0)
    assert (a["best@4"], a["worst@4"]) == (1.0, 0.0)
    assert a["truncated"] == pytest.approx(2 / 8)  # the fifth sample's "length" is not counted
    assert a["verifier_errors"] == pytest.approx(
        2 / 8
    )  # "timeout" and "error: ..." count, "error: boom" is cut
    b = res["benchmarks"]["b"]
    assert (b["n"], b["mean@n"], b["pass@1"]) == (1, pytest.approx(0.2), 0.0)  # a partial score never passes
    assert not any(k.startswith(("maj@", "best@", "worst@")) for k in b)  # nothing to vote on with n = 1
    c = res["benchmarks"]["c"]
    assert (c["n"], c["mean@n"], c["maj@2"], c["best@2"], c["worst@2"]) == (2, 0.75, 0.5, 1.0, 0.5)
    assert res["macro"] == pytest.approx({"math": 0.625, "code": 0.2, "macro": 0.4125})  # math: a and c


def test_the_markdown_table_orders_columns_and_keeps_the_notes():
    res = summarize(SAMPLES[:10], {"a": "math", "b": "code"})
    res["notes"] = {"b": "scored by partial credit"}
    lines = results_markdown(res).splitlines()
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cols == ["benchmark", "problems", "n", "mean@n", "ci95", "pass@1", "pass@2", "pass@4", "maj@4",
                    "best@4", "worst@4", "truncated", "verifier_errors"]  # fmt: skip
    assert lines[1] == "|---" * 13 + "|"
    a = [c.strip() for c in lines[2].strip("|").split("|")]
    assert a[:5] == ["a", "2", "4", "0.5000", "0.4900"] and a[8] == "0.5000"
    assert lines[3] == "| b | 1 | 1 | 0.2000 | 0.0000 | 0.0000 |  |  |  |  |  | 0.0000 | 0.0000 |"
    b = [c.strip() for c in lines[3].strip("|").split("|")]
    assert b[:4] == ["b", "1", "1", "0.2000"] and b[8:11] == ["", "", ""]  # no maj / best / worst for n = 1
    assert lines[5].endswith("domains): code 0.2000, math 0.5000, macro 0.3500")
    assert lines[-1] == "b: scored by partial credit"
    assert "macro" not in results_markdown({"benchmarks": res["benchmarks"], "macro": {}})


def test_committed_chunks_are_kept_and_a_torn_or_uncommitted_tail_is_cut(tmp_path):
    path = tmp_path / "samples.jsonl"
    assert committed_samples(path) == ([], set())
    rows = [_s("a", i, 0, 1.0, str(i)) for i in range(4)]
    lines = [json.dumps(rows[0]), json.dumps(rows[1]), json.dumps({"committed": "a", "chunk": 0}),
             json.dumps(rows[2]), json.dumps({"committed": "a", "chunk": 2})]  # fmt: skip
    path.write_text("\n".join([*lines, json.dumps(rows[3]), '{"benchmark": "a", "pro']) + "\n")
    samples, done = committed_samples(path)
    assert samples == rows[:3] and done == {("a", 0), ("a", 2)}
    assert path.read_text() == "\n".join(lines) + "\n"  # the file now ends at the last commit
    assert committed_samples(path) == (rows[:3], {("a", 0), ("a", 2)})


def _setup(seed=0, temperature=1.0, names=("a",)):
    return {"model": "m", "engine": "hf", "seed": seed, "chunk_size": 32,
            "benchmarks": {n: {"problems": 3, "fingerprint": "f" + n, "sampling": {"temperature": temperature}}
                           for n in names}}  # fmt: skip


def test_a_resume_with_another_setup_is_refused_naming_what_differs(tmp_path):
    samples = tmp_path / "samples.jsonl"
    setup_file = tmp_path / "samples.setup.json"
    check_setup(samples, _setup())  # nothing there yet: recorded
    assert json.loads(setup_file.read_text()) == _setup()
    check_setup(samples, _setup(seed=5))  # no samples written yet: a new setup replaces the old one
    assert json.loads(setup_file.read_text())["seed"] == 5
    samples.write_text('{"committed": "a", "chunk": 0}\n')
    with pytest.raises(InputError, match=r"seed: 5 there, 0 now") as e:
        check_setup(samples, _setup(seed=0, temperature=0.6))
    assert "benchmark a: different sampling" in str(e.value) and str(samples) in str(e.value)
    assert json.loads(setup_file.read_text())["seed"] == 5  # the refused setup is not recorded
    check_setup(samples, _setup(seed=5, names=("b",)))  # another benchmark added to the same eval
    assert set(json.loads(setup_file.read_text())["benchmarks"]) == {"a", "b"}
    check_setup(samples, _setup(seed=5, names=("a", "b")))


def _bench(**kw):
    return Benchmark(name="x", domain="math", files=(), source="", convert=lambda rows, path: [], **kw)


def test_sampling_takes_the_benchmarks_settings_and_the_given_overrides():
    b = _bench(n=8, temperature=0.6, top_p=0.95, max_new_tokens=100)
    p = sampling_for(b, {"n": None, "temperature": None, "max_new_tokens": 7})
    assert (p.n, p.temperature, p.top_p, p.max_new_tokens) == (8, 0.6, 0.95, 7)
    greedy = sampling_for(b, {"temperature": 0.0})
    assert (greedy.temperature, greedy.top_p) == (0.0, 1.0)  # top-p means nothing when greedy
    assert sampling_for(b, {"n": 2}).n == 2


def test_chunk_seeds_depend_on_seed_benchmark_and_chunk_only():
    seeds = {_chunk_seed(s, b, c) for s in (0, 1) for b in ("a", "b") for c in (0, 32)}
    assert len(seeds) == 8 and _chunk_seed(0, "a", 0) == _chunk_seed(0, "a", 0)
    assert all(0 <= s < 2**48 for s in seeds)


def test_the_timing_line_reports_where_the_time_went(tmp_path):
    assert timing_line(tmp_path) is None  # no timing.json
    t = {"chunks": 0}
    (tmp_path / "timing.json").write_text(json.dumps(t))
    assert timing_line(tmp_path) is None  # a resume that generated nothing
    t = {"chunks": 2, "total_s": 10.0, "generate_s": 6.0, "score_wait_s": 1.5, "other_s": 2.5, "score_s": 3.25,
         "verifier_ready_s": 0.75, "samples_per_s": math.pi}  # fmt: skip
    (tmp_path / "timing.json").write_text(json.dumps(t))
    assert timing_line(tmp_path) == (
        "time: 10.0s = generating 6.0s + waiting for scoring 1.5s + the rest 2.5s (scoring itself 3.2s; "
        "verifier workers ready after 0.8s); 3.1 samples/s"
    )
