"""RewardRunner: time limits with hard kills, crash isolation, order, weighted terms, health metrics."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

from reasonrl.registry import RegistryError
from reasonrl.rewards.base import RewardResult
from reasonrl.rewards.runner import RewardRunner, _Job, health_metrics
from reasonrl.types import Problem

sys.path.insert(0, str(Path(__file__).parent))  # workers get the parent's sys.path
import _runner_verifiers as H  # noqa: E402  (registers the "_runner_test/..." verifiers)

T = H.P
TIMEOUT = 1.0


def prob(verifier: str | None, gt: object = "a", data_source: str = "test") -> Problem:
    return Problem(
        prompt=[{"role": "user", "content": "q"}], ground_truth=gt, data_source=data_source, verifier=verifier
    )


@pytest.fixture(scope="module")
def runner():
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        yield r


# (verifier, response, ground truth, expected score, expected reason)
MIXED = [
    (T + "echo", "a", "a", 1.0, "ok"),
    (T + "sleep_forever", "x", "a", 0.0, "timeout"),
    (T + "echo", "b", "a", 0.0, "ok"),
    (T + "sympy_explode", "x", "a", 0.0, "timeout"),
    (T + "segfault", "x", "a", 0.0, "error: worker died (exit code -11)"),
    (T + "echo", "c", "c", 1.0, "ok"),
    (T + "os_exit", "x", "a", 0.0, "error: worker died (exit code 3)"),
    (T + "raise", "x", "a", 0.0, "error: RuntimeError: boom"),
    (T + "not_a_result", "x", "a", 0.0, "error: TypeError: verifier returned float, not RewardResult"),
    ("arithmetic", "<answer>12</answer>", "12", 1.0, "correct"),
    ("arithmetic", "<answer>13</answer>", "12", 0.0, "wrong"),
    ("arithmetic", "no tags", "12", 0.0, "no_answer"),
    (T + "threaded", "t", "a", 1.0, "ok"),
    (T + "echo", "", "a", 0.0, "ok"),
]


def test_mixed_batch_keeps_order_and_records_reasons(runner):
    responses = [r for _, r, _, _, _ in MIXED]
    problems = [prob(v, gt) for v, _, gt, _, _ in MIXED]
    results, metrics = runner.score(responses, problems)
    assert [r.score for r in results] == [s for *_, s, _ in MIXED]
    assert [r.reason for r in results] == [why for *_, why in MIXED]
    assert [r.info["verifier"] for r in results] == [v for v, *_ in MIXED]
    # a hung call is charged exactly its timeout, and the batch returns (pebble killed the workers)
    assert results[1].info["latency_s"] == TIMEOUT and results[3].info["latency_s"] == TIMEOUT
    assert metrics["verifier/batch_seconds"] < 60  # hang guard, not a speed test
    # 2 timeouts, 5 errors (segfault, os_exit, raise, not_a_result) of 14 calls
    assert metrics["verifier/count"] == 14.0
    assert metrics["verifier/timeout_rate"] == pytest.approx(2 / 14)
    assert metrics["verifier/error_rate"] == pytest.approx(4 / 14)
    assert metrics[f"verifier/{T}echo/mean_score"] == pytest.approx(2 / 4)
    assert metrics[f"verifier/{T}echo/extract_fail_rate"] == pytest.approx(1 / 4)  # "" -> None
    assert metrics["verifier/arithmetic/mean_score"] == pytest.approx(1 / 3)
    assert metrics["verifier/arithmetic/extract_fail_rate"] == pytest.approx(1 / 3)
    assert metrics[f"verifier/{T}sleep_forever/timeout_rate"] == 1.0
    assert metrics[f"verifier/{T}sleep_forever/latency_p95_s"] == TIMEOUT
    assert metrics[f"verifier/{T}segfault/error_rate"] == 1.0
    assert f"verifier/{T}segfault/latency_p50_s" not in metrics  # a dead worker has no latency
    assert not any(math.isnan(v) for v in metrics.values())


def test_killed_workers_are_replaced_and_later_calls_work(runner):
    before, _ = runner.score(["a"] * 4, [prob(T + "echo")] * 4)
    old_pids = {r.info["pid"] for r in before}
    # two hung calls occupy both workers at once, so both are killed
    hung, _ = runner.score(["x", "x"], [prob(T + "sleep_forever")] * 2)
    assert [r.reason for r in hung] == ["timeout", "timeout"]
    after, metrics = runner.score(["a", "b", "a", "a"], [prob(T + "echo")] * 4)
    assert [r.score for r in after] == [1.0, 0.0, 1.0, 1.0]
    new_pids = {r.info["pid"] for r in after}
    assert new_pids and not (new_pids & old_pids)
    assert metrics["verifier/timeout_rate"] == 0.0 and metrics["verifier/error_rate"] == 0.0


def test_inline_runs_in_process_and_pool_does_not(runner):
    import os

    res, _ = runner.score(["a", "a"], [prob(T + "echo"), prob(T + "has_answer")])
    assert res[0].info["pid"] != os.getpid()  # pool
    assert res[1].info["pid"] == os.getpid()  # declared run_mode = "inline"
    assert runner.run_mode("arithmetic") == "inline"  # DEFAULT_INLINE
    assert runner.run_mode(T + "threaded") == "thread"
    assert runner.run_mode(T + "echo") == "pool"


@pytest.mark.parametrize(
    "inline, threaded, name, expected",
    [
        ([T + "echo"], None, T + "echo", "inline"),  # runner option overrides the default
        ([], None, "arithmetic", "pool"),  # explicit empty list: nothing inline
        ([], None, T + "has_answer", "pool"),  # ... not even declared ones
        (None, [], T + "threaded", "pool"),
        (None, [T + "echo"], T + "echo", "thread"),
        (None, None, T + "has_answer", "inline"),
    ],
)
def test_run_mode_resolution(inline, threaded, name, expected):
    r = RewardRunner(inline=inline, threaded=threaded)
    assert r.run_mode(name) == expected
    r.close()


def test_bad_declared_mode_and_unknown_names_fail_fast(runner):
    with pytest.raises(ValueError, match="run_mode='gpu'"):
        runner.run_mode(T + "bad_mode")
    with pytest.raises(ValueError, match="no verifier for data_source 'nowhere/x'"):
        runner.score(["a"], [prob(None, data_source="nowhere/x")])
    with pytest.raises(RegistryError, match="unknown verifier 'no_such_term'"):
        RewardRunner(weights={"correctness": 1.0, "no_such_term": 0.1})
    with pytest.raises(ValueError, match="2 responses but 1 problems"):
        runner.score(["a", "b"], [prob(T + "echo")])


# (response, ground truth, correctness, has_answer, length_penalty)
TERMS = [
    ("<answer>12</answer>", "12", 1.0, 1.0, -0.19),
    ("<answer>13</answer>", "12", 0.0, 1.0, -0.19),
    ("12", "12", 0.0, 0.0, -0.02),
    ("", "12", 0.0, 0.0, 0.0),
]


def test_weighted_terms_sum_and_are_recorded(runner):
    weights = {"correctness": 1.0, T + "has_answer": 0.5, T + "length_penalty": 2.0}
    with RewardRunner(workers=2, timeout_s=TIMEOUT, weights=weights, modules=[H.__name__]) as r:
        res, metrics = r.score([t[0] for t in TERMS], [prob("arithmetic", t[1]) for t in TERMS])
    for got, (_, _, corr, fmt, pen) in zip(res, TERMS):
        # e.g. row 0: 1.0 * 1 + 0.5 * 1 + 2.0 * (-0.19) = 1.12
        assert got.score == pytest.approx(corr + 0.5 * fmt + 2.0 * pen, rel=1e-12)
        assert got.info["correctness"] == corr
        assert got.info["terms"] == pytest.approx(
            {"correctness": corr, T + "has_answer": fmt, T + "length_penalty": pen}
        )
    assert res[0].info["extracted"] == "12" and res[0].reason == "correct"  # correctness info kept
    assert metrics[f"verifier/{T}has_answer/mean_score"] == 0.5
    assert metrics[f"verifier/{T}length_penalty/mean_score"] == pytest.approx(-0.4 / 4)
    assert f"verifier/{T}has_answer/extract_fail_rate" not in metrics  # term reports no extraction


def test_terms_without_correctness_score_only_those_terms():
    weights = {T + "has_answer": 0.5, T + "length_penalty": 1.0}
    with RewardRunner(workers=1, timeout_s=TIMEOUT, weights=weights, modules=[H.__name__]) as r:
        (res,), _ = r.score(["<answer>5</answer>"], [prob("arithmetic", "7")])  # wrong, but not scored
    assert res.score == pytest.approx(0.5 - 0.18)  # 18 characters
    assert res.info == {"terms": pytest.approx({T + "has_answer": 1.0, T + "length_penalty": -0.18})}


def test_correctness_alone_reports_no_terms(runner):
    (res,), _ = runner.score(["<answer>5</answer>"], [prob("arithmetic", "5")])
    assert res.score == 1.0 and res.info["correctness"] == 1.0 and res.info["verifier"] == "arithmetic"
    assert "terms" not in res.info and "term_reasons" not in res.info
    assert runner.restarts == 0  # nothing wedged so far in this module


@pytest.mark.parametrize("bad", [{"workers": 0}, {"timeout_s": 0}, {"timeout_s": -1.0}, {"threads": 0}])
def test_bad_runner_arguments_fail_when_it_is_built(bad):
    with pytest.raises(ValueError, match="workers and threads must be >= 1 and timeout_s > 0"):
        RewardRunner(**bad)


def test_the_smallest_valid_runner_scores():
    with RewardRunner(workers=1, threads=1, timeout_s=0.5, modules=[H.__name__]) as r:
        res, _ = r.score(["a", "t"], [prob(T + "echo"), prob(T + "threaded")])
    assert [(x.score, x.reason) for x in res] == [(1.0, "ok"), (1.0, "ok")]


def test_failed_term_scores_zero_with_reason():
    weights = {"correctness": 1.0, T + "raise": 0.3}
    with RewardRunner(workers=1, timeout_s=TIMEOUT, weights=weights, modules=[H.__name__]) as r:
        res, _ = r.score(["<answer>5</answer>"], [prob("arithmetic", "5")])
    assert res[0].score == 1.0 and res[0].info["terms"][T + "raise"] == 0.0
    assert res[0].info["term_reasons"] == {T + "raise": "error: RuntimeError: boom"}


def test_runner_restarts_after_close():
    r = RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__])
    first, _ = r.score(["a"], [prob(T + "echo")])
    r.close()
    second, _ = r.score(["a"], [prob(T + "echo")])
    r.close()
    assert first[0].score == second[0].score == 1.0
    assert first[0].info["pid"] != second[0].info["pid"]


def test_background_start_then_close_leaves_no_pool_and_then_scores():
    r = RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__]).start()
    r.close()  # waits for the start-up thread, then stops the pool it made
    assert r._pool is None and r._starter is None
    started = RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__]).start()
    with started:
        (res,), _ = started.score(["a"], [prob(T + "echo")])  # waits for the start-up
    assert res.score == 1.0 and started._pool is None


def test_empty_batch(runner):
    assert runner.score([], []) == (
        [],
        {"verifier/count": 0.0, "verifier/batch_seconds": pytest.approx(0, abs=5)},
    )


def _job(name, score, reason, extracted="x", latency=0.1):
    info = {"reason": reason} if extracted == "absent" else {"reason": reason, "extracted": extracted}
    return _Job(0, "correctness", name, result=RewardResult(score, info), latency=latency)


def test_health_metrics_by_hand():
    jobs = [
        _job("m", 1.0, "correct", latency=0.1),
        _job("m", 0.0, "wrong", latency=0.2),
        _job("m", 0.0, "no_answer", extracted=None, latency=0.3),
        _job("m", 0.0, "timeout", extracted=None, latency=10.0),
        _job("c", 0.0, "error: worker died (exit code -9)", extracted=None, latency=math.nan),
    ]
    m = health_metrics(jobs)
    assert m["verifier/count"] == 5.0
    assert m["verifier/timeout_rate"] == 0.2 and m["verifier/error_rate"] == 0.2
    # completed calls with an "extracted" key: 3 of "m"; one None -> 1/3 (timeouts / errors excluded)
    assert m["verifier/extract_fail_rate"] == pytest.approx(1 / 3)
    assert m["verifier/m/mean_score"] == 0.25
    # latencies of m: [0.1, 0.2, 0.3, 10.0]; p50 = 0.25, p95 at pos 2.85 = 0.3 + 0.85 * 9.7 = 8.545
    assert m["verifier/m/latency_p50_s"] == pytest.approx(0.25)
    assert m["verifier/m/latency_p95_s"] == pytest.approx(8.545)
    assert m["verifier/c/error_rate"] == 1.0
    assert "verifier/c/latency_p50_s" not in m and "verifier/c/extract_fail_rate" not in m
    assert "verifier/mean_score" not in m


def test_workers_recycled_after_max_tasks():
    with RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__], max_tasks_per_worker=2) as r:
        res, _ = r.score(["a"] * 6, [prob(T + "echo")] * 6)
    assert [x.score for x in res] == [1.0] * 6
    assert len({x.info["pid"] for x in res}) == 3  # one worker, replaced after every 2 calls


def test_quick_calls_are_batched_into_few_tasks_with_the_same_results():
    gts = [str(i % 3) for i in range(40)]
    responses = [str(i % 2) for i in range(40)]  # right where i % 3 == i % 2
    want = [float(a == b) for a, b in zip(responses, gts)]
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        first, _ = r.score(responses, [prob(T + "echo_or_die", g) for g in gts])
        assert r.tasks_scheduled == 40  # a verifier not yet measured: one call per task
        second, m = r.score(responses, [prob(T + "echo_or_die", g) for g in gts])
    assert r.tasks_scheduled - 40 == 4  # measured quick: 10 calls a task, two tasks per worker
    assert [x.score for x in first] == [x.score for x in second] == want
    assert [x.info["extracted"] for x in second] == responses
    assert m["verifier/count"] == 40 and m["verifier/latency_p95_s"] < TIMEOUT


def test_a_batch_with_a_hang_and_a_crash_is_rerun_call_by_call():
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        r.score(["a"] * 8, [prob(T + "echo_or_die")] * 8)  # measured quick: the next call batches
        # four batches of four calls: the first and third fail as a whole, the others do not
        responses = ["a", "b", "hang", "a"] + ["a", "c", "a", "a"] + ["exit", "a", "a", "b"] + ["a"] * 4
        res, m = r.score(responses, [prob(T + "echo_or_die")] * 16)
        tasks = r.tasks_scheduled
        again, _ = r.score(["a"] * 8, [prob(T + "echo_or_die")] * 8)
    reasons = {"hang": "timeout", "exit": "error: worker died (exit code 3)"}
    assert [x.reason for x in res] == [reasons.get(x, "ok") for x in responses]
    assert [x.score for x in res] == [float(x == "a") for x in responses]
    assert m["verifier/timeout_rate"] == 1 / 16 and m["verifier/error_rate"] == 1 / 16
    # 8 warm-up tasks, 4 batches, then the 8 calls of the two failed ones one by one; after a failure
    # the verifier is unmeasured again, so the next call goes one per task
    assert tasks == 8 + 4 + 8 and r.tasks_scheduled - tasks == 8
    assert [x.score for x in again] == [1.0] * 8


# (response, ground truth, correctness, format_think_answer, overlong with max_len=40, cache_len=20)
BUILTIN_TERMS = [
    # 35 chars: 20 < 35 <= 40, overlong = (20 - 35) / 20 = -0.75; total = 1 + 0.2 * 1 - 0.75 = 0.45
    ("<think>ok</think><answer>7</answer>", "7", 1.0, 1.0, -0.75),
    # 18 chars, no think block: total = 1 + 0 + 0 = 1
    ("<answer>7</answer>", "7", 1.0, 0.0, 0.0),
    # 74 chars > 40: overlong = -1; wrong answer; total = 0 + 0.2 - 1 = -0.8
    ("<think>" + "z" * 40 + "</think><answer>8</answer>", "7", 0.0, 1.0, -1.0),
]


@pytest.mark.parametrize("inline, mode", [(None, "inline"), ([], "pool")])  # options reach workers too
def test_builtin_shaping_terms_with_options(inline, mode):
    weights = {"correctness": 1.0, "format_think_answer": 0.2, "overlong": 1.0}
    options = {"overlong": {"max_len": 40, "cache_len": 20}}
    with RewardRunner(workers=1, timeout_s=5, weights=weights, options=options, inline=inline) as r:
        assert r.run_mode("format_think_answer") == mode and r.run_mode("overlong") == mode
        res, metrics = r.score(
            [t[0] for t in BUILTIN_TERMS], [prob("arithmetic", t[1]) for t in BUILTIN_TERMS]
        )
    for got, (_, _, corr, fmt, ovl) in zip(res, BUILTIN_TERMS):
        assert got.info["terms"] == pytest.approx(
            {"correctness": corr, "format_think_answer": fmt, "overlong": ovl}
        )
        assert got.info["correctness"] == corr
    assert [g.score for g in res] == pytest.approx([0.45, 1.0, -0.8])
    assert metrics["verifier/overlong/mean_score"] == pytest.approx(-1.75 / 3)


def test_option_typo_fails_when_the_runner_is_built():
    with pytest.raises(RegistryError, match="has no option"):
        RewardRunner(options={"overlong": {"max_length": 10}})


@pytest.mark.parametrize(
    "options, message",
    [
        ({"code": {"backend": "sandboxfusion"}}, "unknown code backend 'sandboxfusion'"),
        ({"code": {"backend": "sandbox_fusion"}}, "backend=sandbox_fusion needs sandbox_fusion_urls"),
        ({"code": {"score_mode": "fractional"}}, "unknown score_mode 'fractional'"),
        ({"code": {"isolation": "docker"}}, "unknown sandbox isolation 'docker'"),
        ({"cruxeval": {"backend": "remote"}}, "unknown code backend 'remote'"),
        ({"judge": {"timeout_s": 0}}, "timeout_s > 0"),
    ],
)
def test_reward_options_that_cannot_work_fail_when_the_runner_is_built(monkeypatch, options, message):
    monkeypatch.delenv("REASONRL_SANDBOX_FUSION_URLS", raising=False)
    with pytest.raises(ValueError, match=f"reward options for '{next(iter(options))}': .*{message}"):
        RewardRunner(workers=1, options=options)


def test_preload_declared_by_verifiers_is_imported_when_workers_start():
    from reasonrl.rewards.runner import preload_modules

    probs = [prob(T + "preloaded"), prob(T + "echo"), prob(T + "preloaded")]
    assert preload_modules(probs) == ("_preload_marker",)
    assert preload_modules([prob(T + "echo")]) == ()
    gsm = Problem(prompt=[{"role": "user", "content": "q"}], data_source="openai/gsm8k", ground_truth="1")
    assert preload_modules([gsm]) == ("math_verify",)  # sympy's import stays out of the first call's limit
    # not asked for: not there (first: a server that preloaded it keeps it for later runners)
    with RewardRunner(workers=1, modules=[H.__name__]).start() as r:
        (res,), _ = r.score(["_preload_marker"], [prob(T + "preloaded")])
        assert res.score == 0.0
    with RewardRunner(workers=1, modules=[H.__name__], preload=preload_modules(probs)).start() as r:
        (res,), _ = r.score(["_preload_marker"], [prob(T + "preloaded")])
        assert res.score == 1.0 and res.info["pid"] != os.getpid()
        assert "_preload_marker" not in sys.modules  # preloads are for the workers only, not the caller


@pytest.mark.parametrize("cores, want", [(1, 2), (2, 2), (4, 3), (16, 15), (64, 16)])
def test_default_workers_take_the_cores_but_one(monkeypatch, cores, want):
    """`reasonrl eval` scores with every core but one (2-16): with the runner's fixed 2, an H100 machine's
    16 cores left a small model's evaluation waiting on scoring 73% of its time."""
    from reasonrl.rewards.runner import default_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    assert default_workers() == want


def test_warm_ups_run_once_where_their_libraries_are_imported(monkeypatch):
    from reasonrl.rewards import warm_up

    monkeypatch.setattr(warm_up, "_warmed", set())
    monkeypatch.setattr(H, "WARMED_IN", [])
    monkeypatch.delitem(sys.modules, "_preload_marker", raising=False)
    done = warm_up.warm_up_verifiers()
    assert T + "warm_state" not in done and H.WARMED_IN == []  # its preload is not imported here
    assert T + "warm_fails" not in done  # no preload, so it ran, but it failed
    import _preload_marker  # noqa: F401

    assert T + "warm_state" in warm_up.warm_up_verifiers() and H.WARMED_IN == [os.getpid()]
    assert warm_up.warm_up_verifiers() == [] and H.WARMED_IN == [os.getpid()]  # once per process


WARM_POOL = """
import os
import _runner_verifiers as H
from reasonrl.rewards.runner import RewardRunner
from reasonrl.types import Problem

def prob(v):
    return Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="a", data_source="t", verifier=v)

if __name__ == "__main__":
    with RewardRunner(workers=1, timeout_s=30, modules=[H.__name__], preload=["math_verify", "_preload_marker"]) as r:
        (a, b, c), _ = r.score(["", "exit", ""], [prob(H.P + "warm_state")] * 2 + [prob(H.P + "warm_fails")])
        (d,), _ = r.score([""], [prob(H.P + "warm_state")])
    print(a.info["pid"], d.info["pid"], a.info["warmed_in"], d.info["warmed_in"], a.info["math"], d.info["math"],
          b.info["reason"].split(":")[0], c.score, os.getpid())
"""


def test_pool_workers_and_their_replacements_fork_warm(tmp_path):
    """The verifiers' warm-ups run once, in the pool's forkserver (a fresh process here: a forkserver
    starts once per process, with the first pool's preloads); the worker and the one that replaces it
    after it died both inherit them, math-verify's among them, and a failing warm-up breaks nothing."""
    import ast
    import subprocess

    script = tmp_path / "warm_pool.py"
    script.write_text(WARM_POOL)
    # on the PYTHONPATH: a forkserver imports its preloads before it reads the parent's sys.path (3.11)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second, warmed_a, warmed_d, math_a, math_d, died, other, caller = out.stdout.split(maxsplit=8)
    assert died == "error" and first != second  # the worker died, the second call ran in its replacement
    server = ast.literal_eval(warmed_a)  # one warm-up, in one process: neither a worker nor the caller
    assert len(server) == 1 and str(server[0]) not in (first, second, caller.strip())
    assert ast.literal_eval(warmed_d) == server and math_a == math_d == "True"
    assert other == "1.0"


HANGING = """
import os, time
from reasonrl.rewards.base import VERIFIERS

@VERIFIERS.register("_orphan/hang")
def hang(response, problem):
    open(os.path.join(os.environ["ORPHAN_DIR"], str(os.getpid())), "w").close()
    time.sleep(300)  # busy in a call: only the kernel's parent-death signal ends it early
"""

ORPHANS = """
import hanging_verifier
from reasonrl.rewards.runner import RewardRunner
from reasonrl.types import Problem

if __name__ == "__main__":
    r = RewardRunner(workers=2, timeout_s=300, modules=["hanging_verifier"])
    p = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="a", data_source="t", verifier="_orphan/hang")
    r.score(["a"] * 2, [p] * 2)
"""


def test_workers_busy_in_a_call_die_with_a_killed_caller(tmp_path):
    """A trainer killed with SIGKILL runs no cleanup: its verifier workers, even one in the middle
    of a long call, must go with it (each is armed to die with its parent, the forkserver, which
    exits when the trainer is gone)."""
    import signal
    import subprocess
    import time

    (tmp_path / "hanging_verifier.py").write_text(HANGING)
    (tmp_path / "orphans.py").write_text(ORPHANS)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = {**os.environ, "ORPHAN_DIR": str(pid_dir),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(tmp_path / "orphans.py")], env=env)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            pids = [int(x.name) for x in pid_dir.iterdir()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)  # both workers are in their calls
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids), "verifier workers outlived their killed caller"
    finally:
        proc.kill()
        proc.wait()
        for p in pids:  # never leave one behind, even when the test fails
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_wedged_pool_times_out_its_calls_and_is_rebuilt(monkeypatch):
    import concurrent.futures as cf
    import time

    r = RewardRunner(workers=2, timeout_s=0.2, thread_timeout_s=20.0, modules=[H.__name__])
    r.wedge_grace_s = 0.0  # the outer deadline: 0.2 s x (1 round + 2) instead of 30 s more
    try:
        r.score(["a"], [prob(T + "echo")])  # a real pool, started
        pool = r._pool
        # the pool machinery stops answering: its tasks never complete (pebble's own limit never fires)
        monkeypatch.setattr(r, "_schedule", lambda batch, call_args: cf.Future())
        t0 = time.monotonic()
        res, m = r.score(["a", "<answer>3</answer>", "b", "t"],
                         [prob(T + "echo"), prob("arithmetic", "3"), prob(T + "echo"), prob(T + "threaded")])  # fmt: skip
        # given up at the pool's own deadline (0.6 s), not at the thread calls' 20 s backstop
        assert time.monotonic() - t0 < 10.0
        assert 0.5 < m["verifier/latency_p95_s"] < 10.0  # the timed-out calls waited that long
        assert [(x.score, x.reason) for x in res] == [(0.0, "timeout"), (1.0, "correct"), (0.0, "timeout"), (1.0, "ok")]  # fmt: skip
        assert (r.restarts, r._pool) == (1, None)  # the wedged pool is dropped...
        monkeypatch.undo()
        res, _ = r.score(["a"], [prob(T + "echo")])
        assert res[0].score == 1.0 and r._pool is not None and r._pool is not pool  # ...and rebuilt

        # a thread call past its backstop times out, but the process pool is not to blame
        class Stuck:
            def submit(self, *args):
                return cf.Future()

        monkeypatch.setattr(r, "_thread_pool", lambda name: Stuck())
        r.thread_timeout_s = 0.1
        res, _ = r.score(["t", "a"], [prob(T + "threaded"), prob(T + "echo")])
        assert [x.reason for x in res] == ["timeout", "ok"] and r.restarts == 1
    finally:
        r.close()


def test_batch_sizes_come_from_a_running_mean_of_measured_call_seconds():
    r = RewardRunner(workers=2, timeout_s=10.0)  # nothing scored: no pool is started

    def jobs(name, seconds, reason="ok"):
        return [_Job(item=i, term="correctness", name=name, result=RewardResult(1.0, {"reason": reason}),
                     latency=s) for i, s in enumerate(seconds)]  # fmt: skip

    r._learn_latency(jobs("v", [0.002, 0.004]) + jobs("w", [math.nan, 0.5]), failed=[])
    assert r._latency == pytest.approx({"v": 0.003, "w": 0.5})  # an unmeasured call does not count
    # the next measurement averages with the last (not replaces it); timeouts and errors do not count
    r._learn_latency(jobs("v", [0.001]) + jobs("v", [9.0], "timeout") + jobs("v", [9.0], "error: x"), [])
    assert r._latency["v"] == pytest.approx(0.002)
    # 0.02 x 10 s / 0.002 s = 100 calls a task, capped at 64 and at two tasks per worker
    sizes = [len(b) for b in r._pool_batches(jobs("v", [0.0] * 600))]
    assert sizes == [64] * 9 + [24]
    assert [len(b) for b in r._pool_batches(jobs("v", [0.0] * 40))] == [10] * 4
    # 0.02 x 10 s / 0.5 s = 0.4: slow calls go one to a task; so do a verifier's never measured
    assert [len(b) for b in r._pool_batches(jobs("w", [0.0] * 3) + jobs("u", [0.0] * 2))] == [1] * 5
    # a batch of "v" failed as a whole: one call per task until it is measured again
    r._learn_latency([], failed=jobs("v", [0.0]))
    assert "v" not in r._latency and [len(b) for b in r._pool_batches(jobs("v", [0.0] * 4))] == [1] * 4
    r.close()


def test_correctness_is_the_score_clamped_to_0_1_while_the_reward_keeps_it(runner):
    res, _ = runner.score(["-0.5", "0.3", "1.5"], [prob(T + "as_number")] * 3)
    assert [x.score for x in res] == [-0.5, 0.3, 1.5]
    assert [x.info["correctness"] for x in res] == [0.0, 0.3, 1.0]


def test_a_failure_reason_is_cut_to_500_characters():
    from reasonrl.rewards.runner import _failure

    assert _failure("x" * 600).info == {"extracted": None, "reason": "x" * 500}


def test_a_batch_of_two_that_fails_is_rerun_call_by_call():
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        r.score(["a"] * 8, [prob(T + "echo_or_die")] * 8)  # measured quick
        tasks = r.tasks_scheduled
        responses = ["a", "hang", "a", "a", "b", "a", "a", "a"]  # 8 calls: 4 tasks of two
        res, _ = r.score(responses, [prob(T + "echo_or_die")] * 8)
    assert r.tasks_scheduled - tasks == 4 + 2  # the failed pair again, one call each
    assert [x.reason for x in res] == ["ok", "timeout"] + ["ok"] * 6  # the hang, not its partner
    assert [x.score for x in res] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]


def test_a_call_that_cannot_be_sent_to_a_worker_scores_0_with_the_reason(runner):
    (res,), _ = runner.score(["a"], [prob(T + "echo", gt=lambda: "a")])  # a ground truth pickle refuses
    assert res.score == 0.0 and res.reason.startswith("error: ") and "worker died" not in res.reason
    assert "pickle" in res.reason.lower()


@pytest.mark.parametrize("mode", ["pool", "inline"])
def test_a_score_that_is_not_a_finite_number_is_a_verifier_error(mode):
    kw = {"inline": [T + "bad_score"]} if mode == "inline" else {}
    with RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__], **kw) as r:
        responses = ["nan", "inf", "-inf", "str", "none", "int", "bool"]
        res, m = r.score(responses, [prob(T + "bad_score")] * 7)
    assert [x.score for x in res] == [0.0] * 5 + [1.0, 1.0]
    assert [x.reason for x in res[:5]] == [
        "error: ValueError: verifier returned a non-finite score (nan)",
        "error: ValueError: verifier returned a non-finite score (inf)",
        "error: ValueError: verifier returned a non-finite score (-inf)",
        "error: TypeError: verifier returned a score of type str, not a number",
        "error: TypeError: verifier returned a score of type NoneType, not a number",
    ]
    assert m["verifier/error_rate"] == pytest.approx(5 / 7)
