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
from _runner_verifiers import prob  # noqa: E402

T = H.P
TIMEOUT = 1.0


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
        ({"code": {"timeout_s": "6"}}, "option 'timeout_s' of 'code' must be a number >= 0, got '6'"),
        ({"code": {"max_tests": 0}}, "max_tests must be a whole number >= 1 or null, got 0"),
        ({"zebra": {"partial": "false"}}, "option 'partial' of 'zebra' must be true or false, got 'false'"),
        ({"math": {"float_rounding": 2.5}}, "option 'float_rounding' of 'math' must be a whole number >= 0"),
        ({"table": {"rel_tol": float("nan")}}, "option 'rel_tol' of 'table' must be a number >= 0, got nan"),
        ({"table": {"rel_tol": 1}}, "rel_tol must be < 1"),
        ({"reasoning_gym": {"rel_tol": 2.0}}, "rel_tol must be < 1"),
        ({"format_think_answer": {"require": "tag"}}, "require must be any|answer_tag|boxed, not 'tag'"),
        ({"overlong": {"unit": "tokens"}}, "unit must be chars or words, not 'tokens'"),
        (
            {"overlong": {"max_len": 100, "cache_len": 200}},
            "need 0 < cache_len <= max_len, got cache_len=200",
        ),
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


def test_correctness_is_the_score_clamped_to_0_1_while_the_reward_keeps_it(runner):
    res, _ = runner.score(["-0.5", "0.3", "1.5"], [prob(T + "as_number")] * 3)
    assert [x.score for x in res] == [-0.5, 0.3, 1.5]
    assert [x.info["correctness"] for x in res] == [0.0, 0.3, 1.0]


def test_a_failure_reason_is_cut_to_500_characters():
    from reasonrl.rewards.worker import failure

    assert failure("x" * 600).info == {"extracted": None, "reason": "x" * 500}


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


def test_modules_are_imported_in_the_caller_too(tmp_path, monkeypatch):
    """`modules=` registers a plugin's verifiers here as well as in the workers: its term is known when
    the runner is built and its inline verifier scores, though the caller never imported the module."""
    from reasonrl.rewards.base import VERIFIERS

    name = "_runner_plugin_" + tmp_path.name.replace("-", "_")
    (tmp_path / f"{name}.py").write_text(
        "from reasonrl.rewards.base import VERIFIERS, RewardResult\n"
        f"@VERIFIERS.register({name!r})\n"
        "def plugin(response, problem):\n"
        "    return RewardResult(float(response == problem.ground_truth), {})\n"
        "plugin.run_mode = 'inline'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert name not in sys.modules and name not in VERIFIERS
    try:
        with RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[name], weights={name: 1.0}) as r:
            res, _ = r.score(["a", "b"], [prob(name, "a"), prob(name, "a")])
        assert [x.score for x in res] == [1.0, 0.0] and res[0].info["terms"] == {name: 1.0}
    finally:
        VERIFIERS._entries.pop(name, None)
        sys.modules.pop(name, None)


def test_an_unknown_verifier_named_inline_fails_before_any_call():
    """A problem routed to a verifier nobody registered is a data error raised before scoring, even
    where the runner's `inline=` list names it (it would otherwise score 0 call by call)."""
    with RewardRunner(workers=1, timeout_s=TIMEOUT, inline=["_no_such_verifier"]) as r:
        with pytest.raises(RegistryError, match="_no_such_verifier"):
            r.score(["a"], [prob("_no_such_verifier")])
