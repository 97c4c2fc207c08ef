"""rewards.verifiers.code: extraction, tolerant comparison, ground-truth formats, scoring modes, reward hacks."""

from __future__ import annotations

import json

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers import code as code_module
from reasonrl.rewards.verifiers.code import code, extract_code, outputs_match, parse_tests
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(120)
needs_bwrap = pytest.mark.bwrap
F = "```"


def fenced(body: str, lang: str = "python") -> str:
    return f"Here is my solution.\n{F}{lang}\n{body}\n{F}\n"


def problem(gt, **extra) -> Problem:
    return Problem(
        prompt=[{"role": "user", "content": "solve"}],
        ground_truth=json.dumps(gt) if not isinstance(gt, str) else gt,
        data_source="codegen__test",
        ability="codegen",
        extra_info=extra,
    )


@pytest.mark.parametrize(
    "response, expected",
    [
        (fenced("print(1)"), "print(1)"),
        (f"{F}python\nprint(1)\n{F}\nthen\n{F}python\nprint(2)\n{F}", "print(2)"),  # last block
        (f"{F}python\nprint(1)\n{F}\nSample output:\n{F}\n1\n{F}", "print(1)"),  # python tag wins
        (f"{F}\nprint(3)\n{F}", "print(3)"),  # untagged block
        (f"{F}\nprint(1)\n{F}\nthen\n{F}\nprint(2)\n{F}", "print(2)"),  # the last untagged block
        (f"{F}py\nprint(4)\n{F}", "print(4)"),
        (f"{F}Python3\nprint(5)\n{F}", "print(5)"),
        (f"{F}cpp\nint main(){{}}\n{F}", None),  # another language only
        ("print(1)", None),  # no fence
        (f"{F}python\nprint(1)", None),  # unclosed fence (truncated generation)
        (f"{F}python\n\n{F}", None),  # empty block
        (
            f"<think>{F}python\nprint('draft')\n{F}</think>final:\n{F}python\nprint('final')\n{F}",
            "print('final')",
        ),
        (f"<think>{F}python\nprint('draft')\n{F}</think>no code after thinking", None),
        (f"  {F}python\n  def f():\n      return 1\n  {F}", "def f():\n    return 1"),  # indented block
        (f"{F}python\nx = 1\n    {F}", "x = 1"),  # indented closing fence (rllm codeforces row)
        (f"{F}python\ns = '{F}'\nprint(s)\n{F}", "s = '```'\nprint(s)"),  # fence inside a string
    ],
)
def test_extract_code(response, expected):
    assert extract_code(response) == expected


@pytest.mark.parametrize(
    "actual, expected, match",
    [
        ("4\n", "4", True),
        ("4", "4\n\n", True),
        ("1 2 3  \r\n4\r\n", "1 2 3\n4\n", True),
        ("1  2   3", "1 2 3", True),  # inner whitespace runs
        ("YES", "yes", True),
        ("No\nyes", "NO\nYES", True),
        ("yes", "no", False),
        ("Yes!", "yes", False),  # only bare yes/no tokens are case-folded
        ("ABC", "abc", False),  # other words stay case-sensitive
        ("0.3333333", "0.333333333", True),  # within 1e-6
        ("0.334", "0.333", False),
        ("1.0000015", "1.0", False),  # the default tolerance is 1e-6, not more
        ("1e-7", "0", True),
        ("3.0", "3", True),
        ("1000000000000000001", "1000000000000000000", False),  # big ints compare exactly
        ("-0", "0", True),
        ("nan", "nan", True),  # identical text
        ("nan", "0", False),
        ("1 2", "1 2 3", False),
        ("1\n2", "1 2", False),  # line structure matters
        ("", "", True),
        ("", "0", False),
        ("inf", "1e309", True),  # both parse to +inf
    ],
)
def test_outputs_match(actual, expected, match):
    assert outputs_match(actual, expected) is match


def test_float_tolerance_is_configurable():
    assert outputs_match("1.001", "1.0", float_tol=1e-2) is True
    assert outputs_match("1.001", "1.0", float_tol=1e-6) is False


@pytest.mark.parametrize(
    "gt, kind",
    [
        ({"inputs": ["1\n"], "outputs": ["1\n"]}, "stdio"),
        ('{"inputs": [["a", "b"]], "outputs": [["c"]]}', "stdio"),
        ({"inputs": [[1, 2]], "outputs": [3], "fn_name": "add"}, "call"),
        ({"functional": "assert f() == 1"}, "program"),
        ({"test": "def check(c):\n    assert c() == 1", "entry_point": "f"}, "program"),
        ({"test_list": ["assert f() == 1"], "test_setup_code": ""}, "asserts"),
    ],
)
def test_parse_tests_formats(gt, kind):
    assert parse_tests(gt)["kind"] == kind


def test_parse_tests_joins_list_valued_stdio():
    spec = parse_tests({"inputs": [["1 2", "3"]], "outputs": [["6"]]})
    assert spec["inputs"] == ["1 2\n3"] and spec["outputs"] == ["6"]


@pytest.mark.parametrize(
    "gt, message",
    [
        ("not json {", "not JSON"),
        ("[1, 2]", "must be a dict"),
        ({"inputs": ["1"], "outputs": []}, "1 inputs vs 0 outputs"),
        ({"inputs": [], "outputs": []}, "0 inputs"),
        ({"pytest": "def test_x(): pass"}, "unsupported test format with keys pytest"),
        ({}, "unsupported test format with keys [(]none[)]"),
        ({"inputs": ["1"]}, "unsupported test format with keys inputs$"),  # stdin with nothing to compare
        ({"test": "def check(c):\n    assert c() == 1"}, "keys test$"),  # HumanEval without entry_point
        ({"test_list": "assert f(1) == 1"}, "keys test_list$"),  # a string, not a list of asserts
        ({"test_list": []}, "keys test_list$"),
    ],
)
def test_parse_tests_rejects(gt, message):
    with pytest.raises(ValueError, match=message):
        parse_tests(gt)


def test_registered_and_thread_run_mode():
    assert VERIFIERS.get("code") is code
    assert code.run_mode == "thread"
    VERIFIERS.check_kwargs("code", ["score_mode", "timeout_s", "backend", "max_tests"])


STDIO = {"inputs": ["1 2\n", "10 20\n", "-5 5\n"], "outputs": ["3\n", "30\n", "0\n"]}
ADD_STDIN = "a, b = map(int, input().split())\nprint(a + b)"


@needs_bwrap
@pytest.mark.parametrize(
    "program, gt, mode, score, reason",
    [
        (ADD_STDIN, STDIO, "all_pass", 1.0, "correct"),
        ("a, b = map(int, input().split())\nprint(a + b if a > 0 else 999)", STDIO, "all_pass", 0.0, "wrong"),
        ("a, b = map(int, input().split())\nprint(a + b if a > 0 else 999)", STDIO, "fraction", 2 / 3, "wrong"),
        ("print(3)", STDIO, "fraction", 1 / 3, "wrong"),
        ("raise SystemExit(1)", STDIO, "all_pass", 0.0, "runtime_error"),
        ("print(3); raise ValueError", STDIO, "fraction", 0.0, "runtime_error"),  # crash after output
        ("while True: pass", {"inputs": ["1 2\n"], "outputs": ["3\n"]}, "all_pass", 0.0, "timeout"),
        ("def add(a, b):\n    return a + b", {"inputs": [[1, 2], [2, 2]], "outputs": [3, 4], "fn_name": "add"},
         "all_pass", 1.0, "correct"),
        ("def add(a, b):\n    return a * b", {"inputs": [[1, 2], [2, 2]], "outputs": [3, 4], "fn_name": "add"},
         "fraction", 0.5, "wrong"),
        ("class Solution:\n    def add(self, a, b):\n        return [a + b]",
         {"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}, "all_pass", 1.0, "correct"),
        # a top-level function is the one called, beside a class Solution or not defined by `def`
        ("class Solution:\n    def add(self, a, b):\n        return 0\ndef add(a, b):\n    return a + b",
         {"inputs": [[1, 2]], "outputs": [3], "fn_name": "add"}, "all_pass", 1.0, "correct"),
        ("add = lambda a, b: a + b", {"inputs": [[1, 2]], "outputs": [3], "fn_name": "add"}, "all_pass", 1.0,
         "correct"),
        ("def half(x):\n    return x / 3", {"inputs": [[1]], "outputs": [0.3333333], "fn_name": "half"},
         "all_pass", 1.0, "correct"),  # float tolerance in call-based tests
        ("def f():\n    return 1", {"functional": "assert f() == 1"}, "all_pass", 1.0, "correct"),
        ("def f():\n    return 2", {"functional": "assert f() == 1"}, "all_pass", 0.0, "wrong"),
            ("def f():\n    raise ValueError", {"functional": "assert f() == 1"}, "all_pass", 0.0, "runtime_error"),
        ("def f():\n    return 1", {"test": "def check(c):\n    assert c() == 1", "entry_point": "f"},
         "all_pass", 1.0, "correct"),
        ("def f(x):\n    return x if x < 3 else 0", {"test_list": [f"assert f({i}) == {i}" for i in range(4)]},
         "fraction", 0.75, "wrong"),
        ("def f(x):\n    return x if x < 3 else 0", {"test_list": [f"assert f({i}) == {i}" for i in range(4)]},
         "all_pass", 0.0, "wrong"),
    ],
)  # fmt: skip
def test_verifier_end_to_end(program, gt, mode, score, reason):
    res = code(fenced(program), problem(gt), score_mode=mode, timeout_s=2)
    assert res.score == pytest.approx(score, abs=1e-9)
    assert res.reason == reason
    assert res.extracted == program


CALL = {"inputs": [[0], [1], [2]], "outputs": [0, 1, 2], "fn_name": "f"}
ASSERTS = {"test_list": ["assert f(0) == 0", "assert f(1) == 1", "assert f(2) == 2"]}


@needs_bwrap
@pytest.mark.parametrize(
    "program, gt, test, reason, error",
    [
        # the first failed test is a wrong value, a later one raises: the failure is the first one's
        (
            "def f(x):\n    return [0, 5][x]",
            CALL,
            1,
            "wrong",
            "AssertionError: the call returned another value",
        ),
        ("def f(x):\n    return [0, 5][x]", ASSERTS, 1, "wrong", "AssertionError"),
        # the first failed test raises, a later one is a wrong value
        ("def f(x):\n    return {0: 0, 2: 5}[x]", CALL, 1, "runtime_error", "KeyError"),
        ("def f(x):\n    return {0: 0, 2: 5}[x]", ASSERTS, 1, "runtime_error", "KeyError"),
    ],
)
def test_the_failure_reported_is_the_first_failed_test_s(program, gt, test, reason, error):
    """With score_mode fraction every test runs; the reason and error given are those of the test
    named (the first that failed), not of whichever failed last."""
    res = code(fenced(program), problem(gt), score_mode="fraction", timeout_s=2)
    assert res.score == pytest.approx(1 / 3)
    assert (res.reason, res.info["failure"]["test"]) == (reason, test)
    assert res.info["failure"]["error"].startswith(error)


@needs_bwrap
def test_a_solution_method_named_in_full_is_called():
    """LeetCode-style rows name the method as `Solution().name`."""
    gt = {"inputs": [[1, 2]], "outputs": [3], "fn_name": "Solution().add"}
    ok = "class Solution:\n    def add(self, a, b):\n        return a + b"
    assert code(fenced(ok), problem(gt), timeout_s=2).score == 1.0
    assert code(fenced(ok.replace("a + b", "a - b")), problem(gt), timeout_s=2).reason == "wrong"


@needs_bwrap
@pytest.mark.parametrize(
    "hack",
    [
        "import sys; sys.exit(0)",
        "import os; os._exit(0)",
        "quit()",
        "raise SystemExit",
        "import atexit, os; atexit.register(lambda: os._exit(0))\nraise SystemExit(0)",
    ],
)
def test_exiting_before_the_tests_does_not_pass(hack):
    program = f"def f():\n    return 2\n{hack}"
    res = code(fenced(program), problem({"functional": "assert f() == 1"}))
    assert res.score == 0.0
    assert res.reason == "exited_before_tests"


@needs_bwrap
def test_printing_expected_output_via_stdin_peek_still_needs_right_answer():
    # reading all tests' answers is impossible: each stdin test runs in its own fresh sandbox
    res = code(fenced("import os; print(os.listdir('.'))"), problem(STDIO), score_mode="fraction")
    assert res.score == 0.0 and res.info["passed"] == 0 and res.info["total"] == 3


@needs_bwrap
def test_prefix_from_extra_info_is_prepended():
    program = "class Solution:\n    def f(self, xs: List[int]) -> int:\n        return len(xs)"
    gt = {"functional": "assert Solution().f([1, 2]) == 2"}
    without = code(fenced(program), problem(gt))
    with_prefix = code(fenced(program), problem(gt, prefix="from typing import *"))
    assert without.score == 0.0 and "NameError" in without.info["failure"]["error"]
    assert with_prefix.score == 1.0
    assert with_prefix.extracted == program  # the prefix is not part of what the model wrote


@needs_bwrap
def test_max_tests_and_failure_details():
    res = code(fenced("print(3)"), problem(STDIO), score_mode="fraction", max_tests=2)
    assert res.info["total"] == 2 and res.info["passed"] == 1
    fail = res.info["failure"]
    assert (fail["test"], fail["stdin"], fail["expected"], fail["stdout"]) == (1, "10 20\n", "30\n", "3\n")


def test_no_code_and_bad_ground_truth_score_zero_without_running():
    none = code("no fences here", problem(STDIO))
    assert (none.score, none.info) == (0.0, {"extracted": None, "reason": "no_code", "passed": 0, "total": 0})
    bad = code(fenced("print(1)"), problem("{not json"))
    assert bad.score == 0.0 and bad.reason.startswith("bad_ground_truth")


def test_default_limits_and_tolerance(monkeypatch):
    """Each test runs with 6 s, 1024 MB and a float tolerance of 1e-6 unless the options say otherwise."""
    from reasonrl.rewards.verifiers.code import clip_text

    jobs = []
    monkeypatch.setattr(
        code_module, "run_job", lambda job, **_: jobs.append(job) or {"status": "success", "passed": [True]}
    )
    gt = {"inputs": [[1]], "outputs": [1], "fn_name": "f"}
    assert code(fenced("def f(x):\n    return x"), problem(gt)).score == 1.0
    assert (jobs[0]["memory_mb"], jobs[0]["tol"]) == (1024, 1e-6)
    assert jobs[0]["timeout_s"] == pytest.approx(6.0, abs=0.5)
    assert clip_text("x" * 500) == "x" * 500 and clip_text("x" * 501) == "x" * 500 + "...[truncated]"


def test_load_check_takes_the_edges_and_refuses_past_them():
    from reasonrl.rewards.base import check_setup

    for ok in ({"max_tests": 1}, {"max_tests": None}, {"score_mode": "fraction"}, {"timeout_s": 0.1},
               {"memory_mb": 1}, {"total_timeout_s": 1}, {"isolation": "bwrap"}):  # fmt: skip
        check_setup("code", ok)
    for bad, message in (({"max_tests": True}, "max_tests must be a whole number"),
                         ({"max_tests": 0}, "max_tests must be a whole number"),
                         ({"total_timeout_s": 0}, "total_timeout_s must be > 0"),
                         ({"score_mode": "best"}, "unknown score_mode 'best'")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            check_setup("code", bad)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="score_mode"):
        code(fenced("print(1)"), problem(STDIO), score_mode="partial")
    with pytest.raises(ValueError, match="backend"):
        code(fenced("print(1)"), problem(STDIO), backend="docker")


def test_call_based_tests_share_a_time_budget_of_timeout_s_per_test():
    """Three calls of 0.8 s each run as one job: 2.4 s, past one test's 2 s but within 3 x 2 s."""
    program = "import time\ndef f(x):\n    time.sleep(0.8)\n    return x"
    res = code(fenced(program), problem({"inputs": [[1], [2], [3]], "outputs": [1, 2, 3], "fn_name": "f"}),
               timeout_s=2)  # fmt: skip
    assert (res.score, res.reason, res.info["passed"]) == (1.0, "correct", 3)


class FakeSandbox:
    """A job runner on a fake clock: each job takes `took` seconds; `wrong` lists the stdio inputs
    whose output is wrong. Records the budget each job was given."""

    def __init__(self, monkeypatch, took: float, wrong=()):
        self.now, self.took, self.wrong, self.budgets = 0.0, took, set(wrong), []
        monkeypatch.setattr(code_module.time, "monotonic", lambda: self.now)

    def __call__(self, job):
        self.budgets.append(job["timeout_s"])
        self.now += self.took
        if job["kind"] == "stdio":
            out = "wrong\n" if job["stdin"] in self.wrong else job["stdin"]
            return {"status": "success", "stdout": out, "stderr": ""}
        return {"status": "success", "passed": [True] * len(job["tests"]), "errors": []}


def _run(sandbox, spec, **kw):
    return code_module.run_spec(spec, "pass", sandbox, timeout_s=6.0, memory_mb=64, **kw)


ECHO = {"kind": "stdio", "inputs": ["a\n", "b\n", "c\n"], "outputs": ["a\n", "b\n", "c\n"]}


def test_stdio_tests_share_the_total_time_budget(monkeypatch):
    """Each stdin test gets timeout_s or what is left of total_timeout_s; once none is left, the
    rest fail as time_budget without running."""
    box = FakeSandbox(monkeypatch, took=5.0)
    outcomes, total, failure = _run(box, ECHO, total_timeout_s=8.0, stop_early=False)
    assert box.budgets == [6.0, 3.0]  # the third test had -2 s left: never ran
    assert (outcomes, total, failure) == ([True, True, False], 3, {"reason": "time_budget", "test": 2})


def test_a_job_gets_timeout_s_per_test_within_the_total_budget(monkeypatch):
    calls = {"kind": "call", "fn_name": "f", "inputs": [[1], [2], [3]], "outputs": [1, 2, 3]}
    asserts = {"kind": "asserts", "setup": "", "asserts": ["assert 1", "assert 2", "assert 3"]}
    for spec in (calls, asserts):
        box = FakeSandbox(monkeypatch, took=1.0)
        assert _run(box, spec, total_timeout_s=100.0)[:2] == ([True] * 3, 3) and box.budgets == [18.0]
        assert _run(box, spec, total_timeout_s=10.0)[:2] == ([True] * 3, 3) and box.budgets[-1] == 10.0
        box.budgets.clear()
        assert _run(box, spec, total_timeout_s=0.0) == ([False] * 3, 3, {"reason": "time_budget", "test": 0})
        assert box.budgets == []  # nothing ran
        assert _run(box, spec, total_timeout_s=100.0, max_tests=2)[:2] == ([True] * 2, 2)  # the first two


def test_the_stdio_failure_reported_is_the_first(monkeypatch):
    box = FakeSandbox(monkeypatch, took=0.1, wrong={"b\n", "c\n"})
    outcomes, total, failure = _run(box, ECHO, stop_early=False)
    assert (outcomes, total) == ([True, False, False], 3)
    assert (failure["reason"], failure["test"], failure["stdin"]) == ("wrong", 1, "b\n")
