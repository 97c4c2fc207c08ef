"""rewards.verifiers.cruxeval: prediction extraction (literals only), task detection, check programs, sandbox runs."""

from __future__ import annotations

import ast
import json
import re

import pytest

from reasonrl.rewards import VERIFIERS, score
from reasonrl.rewards.base import check_setup
from reasonrl.rewards.verifiers import code
from reasonrl.rewards.verifiers.cruxeval import cruxeval, extract_prediction, is_literal, task_of
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(120)
needs_bwrap = pytest.mark.bwrap
F = "```"
FUNC = "def f(s):\n    return s[::-1] + '!'"
LOOP = "def f(n):\n    while n != 0:\n        n -= 2\n    return n"


def fenced(body: str) -> str:
    return f"Let me run it step by step.\n{F}python\n{body}\n{F}\n"


def problem(task: str, func: str = FUNC, inp: str = "'abc'", out: str = "'cba!'", **kw) -> Problem:
    """A row shaped like Reasoning360's data_preprocess/simulation/cruxeval-{i,o}.py output."""
    asserted = f"assert f(??) == {out}" if task == "i" else f"assert f({inp}) == ??"
    extra = {"reference": out, "dataset": f"cruxeval-{task}", "split": "test", "index": 0}
    extra.update(kw.pop("extra", {}))
    return Problem(
        prompt=[{"role": "user", "content": f"Find it.\n\n{F}python\n{func}\n{asserted}\n{F}\n"}],
        ground_truth=kw.pop("gt", json.dumps({"functional": func})),
        data_source=kw.pop("data_source", f"simulation__cruxeval-{task}"),
        ability="simulation",
        extra_info={k: v for k, v in extra.items() if v is not None},
    )


@pytest.mark.parametrize(
    "src, ok",
    [
        ("'cba!'", True),
        ("-1", True),
        ("+2.5", True),
        ("1+2j", True),
        ("-1-2j", True),
        ("None", True),
        ("...", True),
        ("b'x'", True),
        ("{1: [2, (3,)], 'k': {True, False}}", True),
        ("set()", True),
        ("frozenset()", True),
        ("()", True),
        ("x", False),  # a name
        ("f(1)", False),
        ("set([1])", False),  # a call with arguments
        ("1+1", False),  # unsimplified expression
        ("'a' * 3", False),
        ("-'a'", False),
        ("-True", False),
        ("{**a}", False),
        ("[*a]", False),
        ("().__class__", False),
        ("__import__('os').system('id')", False),
        ("[i for i in range(3)]", False),
        ("lambda: 1", False),
        # every position a literal can hold code in: keys, values, operands, call arguments
        ("{f(1): 2}", False),
        ("{1: f(1)}", False),
        ("{1: 2, f(1): 3}", False),
        ("~5", False),  # an operator other than a sign
        ("-f(1)", False),
        ("-(-1)", True),
        ("1 * 2j", False),
        ("f(1) + 2j", False),
        ("1 + x", False),
        ("1 + 2", False),
        ("set(x=1)", False),
        ("list()", False),  # only the empty sets print as calls
        ("os.set()", False),
    ],
)
def test_is_literal(src, ok):
    assert is_literal(ast.parse(src, mode="eval").body) is ok


@pytest.mark.parametrize(
    "task, response, expected",
    [
        ("output", fenced("assert f('abc') == 'cba!'"), ("'cba!'", "ok")),
        ("output", fenced("assert 'cba!' == f('abc')"), ("'cba!'", "ok")),  # sides swapped
        ("output", fenced("'cba!'"), ("'cba!'", "ok")),  # bare literal
        ("output", fenced("assert f('abc') == ('cba' '!')"), ("'cba!'", "ok")),  # re-serialised
        ("output", fenced("assert f('a') == 1\nassert f('abc') == [1, 2]"), ("[1, 2]", "ok")),  # last
        ("output", fenced("assert f('abc') == 'x'\nprint(f('abc'))"), ("'x'", "ok")),  # assert wins
        ("output", "Answer:\nassert f('abc') == {1: 2}\n", ("{1: 2}", "ok")),  # no fence
        ("output", f"<think>{fenced('assert f(1) == 2')}</think>\n{fenced('assert f(1) == 3')}", ("3", "ok")),
        ("output", fenced("assert f('abc') == f('abc')"), (None, "bad_form")),  # output from f itself
        ("output", fenced("assert f('abc') == 'cba' + '!'"), (None, "not_literal")),
        ("output", fenced("assert f('abc') == __import__('os').system('id')"), (None, "not_literal")),
        ("output", fenced("assert f('abc') == ('x') or True or ('x')"), (None, "bad_form")),
        ("output", fenced("assert f('abc') != 'x'"), (None, "bad_form")),
        ("output", fenced("assert f('abc') == 'x' == 'x'"), (None, "bad_form")),  # chained
        ("output", fenced("assert True"), (None, "bad_form")),
        ("output", fenced("1) or True or (1"), (None, "no_answer")),  # does not parse at all
        ("output", fenced("pass"), (None, "no_answer")),
        ("output", "I am not sure.", (None, "no_answer")),
        ("output", f"<think>{fenced('assert f(1) == 2')}</think>so that is it", (None, "no_answer")),
        ("output", f"<think>{fenced('assert f(1) == 2')}", (None, "no_answer")),  # think never closed
        ("output", fenced("assert f('abc') == '" + "a" * 30_000 + "'"), (None, "answer_too_long")),
        ("output", fenced("assert f('abc') == " + "[" * 150 + "]" * 150), ("[" * 150 + "]" * 150, "ok")),
        ("input", fenced("assert f('abc') == 'cba!'"), ("f('abc')", "ok")),
        ("input", fenced("assert 'cba!' == f('abc')"), ("f('abc')", "ok")),
        ("input", fenced("f('abc')"), ("f('abc')", "ok")),  # bare call
        ("input", fenced("assert f(s='abc', *[1]) == 0"), ("f(*[1], s='abc')", "ok")),
        ("input", fenced("assert f('ab' + 'c') == 'cba!'"), (None, "not_literal")),
        ("input", fenced("assert f(**{'s': 'abc'}) == 'cba!'"), (None, "not_literal")),
        (
            "input",
            fenced("assert f(__import__('os').system('touch /tmp/pwned')) == 1"),
            (None, "not_literal"),
        ),
        ("input", fenced("assert f(1) or True or (1) == 'cba!'"), (None, "bad_form")),
        ("input", fenced("assert g('abc') == 'cba!'"), (None, "bad_form")),
        ("input", fenced("assert f.__globals__ == 1"), (None, "bad_form")),
        ("input", fenced("'cba!'"), (None, "bad_form")),  # an output, not an input
        ("input", fenced("assert f('abc') == f('abc')"), (None, "bad_form")),
        ("output", fenced("'x'\n'cba!'"), ("'cba!'", "ok")),  # the last bare literal
        ("output", fenced("assert f(1) == " + "-" * 1000 + "1"), (None, "not_literal")),  # too deep to check
        ("input", fenced("assert f(s=g(1)) == 'cba!'"), (None, "not_literal")),  # a keyword's value
        ("input", fenced("assert f(*g()) == 'cba!'"), (None, "not_literal")),
        # the whole block does not parse: its assert lines that do are read, the others skipped
        ("output", fenced("it is\nassert f('abc') == 'cba!'\nassert f('abc') == (\nso"), ("'cba!'", "ok")),
        (
            "output",
            fenced("assert f('abc') == '" + "a" * 19_979 + "'"),
            ("'" + "a" * 19_979 + "'", "ok"),
        ),  # exactly MAX_PREDICTION_CHARS
    ],
)
def test_extract_prediction(task, response, expected):
    assert extract_prediction(response, task) == expected


@pytest.mark.parametrize(
    "prob, task",
    [
        (problem("i"), "input"),
        (problem("o"), "output"),
        (problem("o", data_source="simulation__cruxeval-i"), "output"),  # extra_info.dataset first
        (problem("i", extra={"dataset": None}), "input"),  # then the data_source
        (problem("i", extra={"dataset": None}, data_source="simulation__cruxeval"), "input"),  # prompt ??
        (problem("o", extra={"dataset": None}, data_source="simulation__cruxeval"), "output"),
    ],
)
def test_task_of(prob, task):
    assert task_of(prob) == task


class Recorder:
    """Stands in for the sandbox's `run_job` to show exactly what would run (and that nothing ran)."""

    def __init__(self):
        self.programs: list[str] = []
        self.limits: list[tuple[float, int]] = []

    def __call__(self, job, **_):
        self.programs.append(job["program"] + "\n\n" + "\n".join(job["tests"]))
        self.limits.append((job["timeout_s"], job["memory_mb"]))
        return {"status": "success", "passed": [False], "errors": ["AssertionError: "]}


@pytest.mark.parametrize(
    "prob, response, program",
    [
        (problem("o"), fenced("assert f('abc') == 'cba!'"), f"{FUNC}\n\nassert ('cba!') == ('cba!')"),
        (problem("i"), fenced("assert f(\"abc\") == 'x'"), f"{FUNC}\n\nassert ('cba!') == f('abc')"),
        (  # no reference: the prompt's call is the trusted side of output prediction
            problem("o", extra={"reference": None}),
            fenced("assert f('abc') == 'cba!'"),
            f"{FUNC}\n\nassert (f('abc')) == ('cba!')",
        ),
        (  # no reference: the prompt's output is the trusted side of input prediction
            problem("i", extra={"reference": None}),
            fenced("assert f('abc') == 1"),
            f"{FUNC}\n\nassert ('cba!') == f('abc')",
        ),
        (problem("o"), fenced("assert f('abc') == __import__('os').system('id')"), None),
        (problem("i"), fenced("assert f(1) or True or (1) == 'cba!'"), None),
        (problem("i"), f"<think>{fenced('assert f(1) == 2')}</think>", None),
    ],
)
def test_check_program_is_built_from_trusted_text(monkeypatch, prob, response, program):
    rec = Recorder()
    monkeypatch.setattr(code, "run_job", rec)
    got = cruxeval(response, prob)
    assert got.score == 0.0
    if program is None:
        assert rec.programs == []  # rejected before anything runs
    else:
        assert len(rec.programs) == 1
        assert rec.programs[0] == program  # trusted function, then the check built from trusted text
        assert got.reason == "wrong"  # the check's AssertionError


@pytest.mark.parametrize(
    "prob, reason",
    [
        (problem("o", gt="not json"), "bad_ground_truth: ground_truth is not JSON"),
        (
            problem("o", gt=json.dumps({"inputs": [1], "outputs": [2]})),
            "bad_ground_truth: ground_truth must be",
        ),
        (problem("o", gt=json.dumps({"functional": "  "})), "bad_ground_truth: ground_truth must be"),
        (problem("o", extra={"reference": "[1,"}), "bad_ground_truth: trusted side"),
        (
            Problem(
                [{"role": "user", "content": "q"}], json.dumps({"functional": FUNC}), "simulation__cruxeval"
            ),
            "bad_ground_truth: cannot tell",
        ),
        (
            Problem(
                [{"role": "user", "content": "q"}], json.dumps({"functional": FUNC}), "simulation__cruxeval-o"
            ),
            "bad_ground_truth: no extra_info.reference",
        ),
    ],
)
def test_bad_rows(prob, reason):
    got = cruxeval(fenced("assert f('abc') == 'cba!'"), prob)
    assert got.score == 0.0
    assert got.reason.startswith(reason)


def test_prompt_fallback_reads_the_question_not_an_example(monkeypatch):
    """Without a reference, the trusted side is the prompt's *last* assertion: a few-shot example
    before the question must not become the gold (an answer matching the example would score)."""
    example = "Example:\nassert f(??) == 'x!'\n\n"
    prob = problem("i", extra={"reference": None})
    prob.prompt[0]["content"] = example + prob.prompt[0]["content"]
    rec = Recorder()
    monkeypatch.setattr(code, "run_job", rec)
    cruxeval(fenced("assert f('x') == 'x!'"), prob)
    assert rec.programs == [f"{FUNC}\n\nassert ('cba!') == f('x')"]
    prob = problem("o", extra={"reference": None})
    prob.prompt[0]["content"] = "Example:\nassert f('zz') == ??\n\n" + prob.prompt[0]["content"]
    cruxeval(fenced("assert f('abc') == 'cba!'"), prob)
    assert rec.programs[-1] == f"{FUNC}\n\nassert (f('abc')) == ('cba!')"


def test_default_limits(monkeypatch):
    """The check runs with 6 s (less what has already gone by) and 1024 MB unless the options say
    otherwise."""
    rec = Recorder()
    monkeypatch.setattr(code, "run_job", rec)
    cruxeval(fenced("assert f('abc') == 'cba!'"), problem("o"))
    cruxeval(fenced("assert f('abc') == 'cba!'"), problem("o"), timeout_s=2.0, memory_mb=256)
    assert [m for _, m in rec.limits] == [1024, 256]
    assert [t for t, _ in rec.limits] == [pytest.approx(6.0, abs=0.5), pytest.approx(2.0, abs=0.5)]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"backend": "docker"}, "unknown code backend 'docker'"),
        ({"backend": "sandbox_fusion"}, "backend=sandbox_fusion needs sandbox_fusion_urls"),
        ({"isolation": "chroot"}, "unknown sandbox isolation 'chroot'"),
        ({"timeout_s": 0}, "timeout_s must be > 0"),
        ({"memory_mb": 0}, "memory_mb must be > 0"),
    ],
)
def test_setup_refuses_bad_execution_options(options, message, monkeypatch):
    monkeypatch.delenv("REASONRL_SANDBOX_FUSION_URLS", raising=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        check_setup("cruxeval", options)
    with pytest.raises(ValueError, match=re.escape(message)):  # and for each routed row
        check_setup("cruxeval", options, problem("o"))
    check_setup("cruxeval", {}, problem("o"))  # the defaults pass


def test_registered_and_routed():
    assert VERIFIERS.get("cruxeval") is cruxeval
    assert cruxeval.run_mode == "thread"


@needs_bwrap
@pytest.mark.parametrize(
    "prob, response, expected, reason",
    [
        (problem("o"), fenced("assert f('abc') == 'cba!'"), 1.0, "correct"),
        (
            problem("o"),
            "<think>reverse then add !</think>" + fenced("assert f('abc') == 'cba!'"),
            1.0,
            "correct",
        ),
        (problem("o"), fenced("assert f('abc') == 'abc!'"), 0.0, "wrong"),
        (problem("o"), fenced("assert f('abc') == ['c', 'b', 'a', '!']"), 0.0, "wrong"),
        (
            problem("o"),
            fenced("assert f('abc') == 'x'\nimport os\nos._exit(0)"),
            0.0,
            "wrong",
        ),  # tail ignored
        (problem("o", extra={"reference": None}), fenced("assert f('abc') == 'cba!'"), 1.0, "correct"),
        (problem("i"), fenced("assert f('abc') == 'cba!'"), 1.0, "correct"),
        (problem("i"), fenced("assert f(s='abc') == 'cba!'"), 1.0, "correct"),
        (problem("i"), fenced("assert f('abc') == 'whatever'"), 1.0, "correct"),  # output side is the row's
        (problem("i"), fenced("assert f('abd') == 'cba!'"), 0.0, "wrong"),
        (problem("i"), fenced("assert f(5) == 'cba!'"), 0.0, "runtime_error"),  # TypeError in f
        (problem("i"), fenced("assert f() == 'cba!'"), 0.0, "runtime_error"),
        (problem("i", func=LOOP, out="0"), fenced("assert f(4) == 0"), 1.0, "correct"),
        (problem("i", func=LOOP, out="0"), fenced("assert f(3) == 0"), 0.0, "timeout"),  # never ends
        (problem("i", extra={"reference": None}), fenced("assert f('abc') == 'cba!'"), 1.0, "correct"),
    ],
)
def test_cruxeval_in_sandbox(prob, response, expected, reason):
    got = cruxeval(response, prob, timeout_s=2.0, memory_mb=256)
    assert (got.score, got.reason) == (expected, reason)


@needs_bwrap
def test_score_routes_cruxeval_rows():
    assert score(fenced("assert f('abc') == 'cba!'"), problem("o")).score == 1.0
    assert score(fenced("assert f('abc') == 'cba'"), problem("o")).score == 0.0
