"""A malformed ground truth is a bad row at load time, not a verifier error at scoring time: every
converter's fixture problem gets ground truths of each JSON type (and, for structured ones, each
field replaced), and either routing rejects it (`check_route`: InputError) or every verifier call
scores it without raising. A verifier that raised here would score every sample of that row 0 as
an "error" for a whole run."""

from __future__ import annotations

import copy

import pytest
from test_data_prepare import SOURCES, _gpqa_csv, _write

from reasonrl.data.prepare import convert_files, load_all
from reasonrl.errors import InputError
from reasonrl.rewards import score
from reasonrl.rewards.ground_truth import json_value
from reasonrl.rewards.routing import check_route
from reasonrl.types import Problem

load_all()
ODD = [None, 5, 2.5, True, "", " ", "x", [], [None], [5], ["x"], {}, {"a": 1}, [[1]], [{"a": 1}], {"a": None}]
SANDBOXED = ("codegen", "simulation__cruxeval")  # their rows run code: checked in the sandbox tests


def _fixture_problem(name: str, tmp_path) -> Problem:
    fname, rows, options = SOURCES[name][:3]
    src = tmp_path / fname
    _gpqa_csv(src) if rows is None else _write(src, rows)
    return convert_files(name, [str(src)], options)[0][0]


def _malformed(p: Problem):
    """`p` with its ground truth replaced by each ODD value, and (a mapping's) each field replaced."""
    try:
        gt = json_value(p.ground_truth)  # Reasoning360 keeps structured ground truths as JSON texts
    except ValueError:
        gt = p.ground_truth
    for field in [None, *(gt if isinstance(gt, dict) else [])]:
        for value in ODD:
            q = copy.deepcopy(p)
            q.ground_truth = value if field is None else {**gt, field: value}
            yield q


def _rejected(q: Problem) -> bool:
    """True if routing refuses `q` (in one line naming what is wrong), False if it routes."""
    try:
        check_route(q)
    except InputError as e:
        assert "\n" not in str(e) and str(e).strip(), q.ground_truth
        return True
    return False


@pytest.mark.parametrize("name", sorted(n for n in SOURCES if not SOURCES[n][3].startswith(SANDBOXED)))
def test_a_malformed_ground_truth_fails_routing_or_scores(name, tmp_path):
    p = _fixture_problem(name, tmp_path)
    responses = [r for r in SOURCES[name][4:] if r] + ["", "<answer>x</answer> \\boxed{A}"]
    rejected = 0
    for q in _malformed(p):
        if _rejected(q):
            rejected += 1
            continue
        for response in responses:
            got = score(response, q)  # must not raise
            assert 0.0 <= got.score <= 1.0
    # every verifier but codeio's has ground truths it cannot score (codeio's: any JSON value is an output)
    assert rejected > 0 or name == "codeio"


# verifiers whose rows come from built-in tasks or generators, not from a converter: a good ground truth
BUILT_IN = {
    "reasonrl/arithmetic": "12",
    "reasonrl/countdown": {"target": 10, "numbers": [2, 5]},
    "logic__graph_logical": "7",
    "searchR1_nq": {"target": ["Paris"]},
    "reasoning_gym": "12",
}


@pytest.mark.parametrize("source", sorted(BUILT_IN))
def test_a_malformed_built_in_ground_truth_fails_routing_or_scores(source):
    p = Problem([{"role": "user", "content": "q"}], BUILT_IN[source], source, "u", {})
    check_route(p)
    responses = [
        "<answer>12</answer>",
        "<answer>2 * 5</answer>",
        "<answer>None</answer>",
        "<answer></answer>",
    ]
    rejected = 0
    for q in _malformed(p):
        if _rejected(q):
            rejected += 1
            continue
        for response in responses:  # must not raise
            assert score(response, q).score in (0.0, 1.0)
    assert rejected >= 10


@pytest.mark.parametrize(
    ("source", "gt", "error"),
    [
        ("reasonrl/arithmetic", "12.0", r"arithmetic: ground truth '12.0' is not an integer"),
        ("reasonrl/arithmetic", True, r"arithmetic: ground truth True is not an integer"),
        ("reasonrl/countdown", {"target": 10}, r"countdown: ground truth must be \{'target': int, 'numbers'"),
        ("reasonrl/countdown", {"target": 10, "numbers": [2, "x"]}, r"countdown: ground truth must be"),
        # a missing gold read as the text "None" was matched by "<answer>None</answer>"
        ("logic__graph_logical", None, r"graph: ground truth None is not one short answer"),
        ("logic__graph_logical", ["3", "4"], r"graph: ground truth \['3', '4'\] is not one short answer"),
        ("reasoning_gym", None, r"reasoning_gym: a row without a task needs a gold answer, got None"),
        ("searchR1_nq", {"target": ["the", None]}, r"qa_em: ground truth .* has no gold answer"),
        ("stem__gpqa", "x", r"choice: ground truth 'x' is not an option letter"),
        (
            "logic__zebra_puzzle_dataset",
            {"header": ["a", "b"], "rows": [["1"]]},
            r"zebra: ground truth is not",
        ),
        ("logic__zebra_puzzle_dataset", {"header": ["a"], "rows": []}, r"zebra: ground truth is not"),
        ("logic__zebra_puzzle_dataset", {"header": ["a"], "rows": [[None]]}, r"zebra: ground truth is not"),
        ("logic__zebra_puzzle_dataset", {"header": [" "], "rows": [["1"]]}, r"zebra: ground truth is not"),
        ("simulation__arcagi1", [[1, "x"]], r"arc: ground truth is not a grid"),
        ("logic__ordering_puzzle_dataset", "a, b", r"ordering: ground truth must be a list, got str"),
        *(
            ("logic__ordering_puzzle_dataset", gt, r"ordering: ground truth .* is not a list of names")
            for gt in ([], [None], ["a", ""], "[['a'], ['b']]")
        ),
        ("simulation__codeio", {"functional": "def f(x): return x"}, r"codeio: .* route it to 'cruxeval'"),
        ("math", [], r"math: empty ground truth \[\]"),
        ("math", " ", r"math: empty ground truth ' '"),
        # read as its Python text, ['2', '3'] was the interval [2, 3]: `\boxed{[2, 3]}` scored 1
        ("math", ["2", "3"], r"math: ground truth \['2', '3'\] is a list, not one answer"),
        ("openai/gsm8k", [2, 3], r"math: ground truth \[2, 3\] is a list, not one answer"),
        ("math", {"answer": "2"}, r"math: ground truth \{'answer': '2'\} is a dict, not one answer"),
        ("table__hitab", ["3", None], r"table: ground truth \['3', None\] is not a cell or a list of cells"),
        ("table__finqa", "", r"table: ground truth '' is empty"),
        ("table__finqa", " . ", r"table: ground truth ' . ' is empty"),
        ("table__hitab", "5| |6", r"table: ground truth '5\| \|6' has an empty cell"),
        ("table__hitab", ["5", ""], r"table: ground truth \['5', ''\] has an empty cell"),
        (
            "codegen__taco",
            '{"inputs": "12", "outputs": ["2"]}',
            r"code: ground truth: inputs and outputs must be lists",
        ),
        (
            "codegen__mbpp",
            {"test_list": ["assert 1"], "test_imports": "import os"},
            r"code: .* a list of lines",
        ),
        ("codegen__taco", "{not json", r"code: ground truth: ground_truth is not JSON"),
        ("simulation__cruxeval-o", {"functional": " "}, r'cruxeval: ground_truth must be \{"functional"'),
        (
            "simulation__cruxeval-o",
            {"functional": "def f(x): return x"},
            r"cruxeval: no extra_info.reference",
        ),
        ("ood__ifbench", "[{'instruction_id'", r"ifbench: ground_truth is not a list literal"),
        *(
            ("ood__ifbench", gt, r"ifbench: ground_truth must be \[\{'instruction_id'")
            for gt in ("[]", 5, [5], [])
        ),
        (
            "ood__ifbench",
            [{"instruction_id": ["copy:copy"]}],
            r"ifbench: instruction_id and kwargs must be lists",
        ),
    ],
)
def test_routing_names_what_is_wrong_with_a_ground_truth(source, gt, error):
    p = Problem([{"role": "user", "content": "q"}], gt, source, "x", {})
    with pytest.raises(InputError, match=rf"^{error}"):
        check_route(p)


def test_a_reasoning_gym_row_must_name_a_task_reasoning_gym_knows():
    p = Problem([{"role": "user", "content": "q"}], "12", "reasoning_gym", "x", {"task": "no_such_task"})
    with pytest.raises(InputError, match=r"^reasoning_gym: task 'no_such_task': Dataset 'no_such_task' not"):
        check_route(p)
    check_route(Problem(p.prompt, "12", "reasoning_gym", "x", {"task": "basic_arithmetic"}))
    one = Problem(p.prompt, ["7"], "logic__graph_logical", "x", {})  # a list of one, as parquet keeps it
    check_route(one)
    assert (score("<answer>7</answer>", one).score, score("<answer>['7']</answer>", one).score) == (1.0, 0.0)


def test_an_ifbench_ground_truth_may_be_one_mapping_or_a_list_of_one():
    one = {"instruction_id": ["punctuation:punctuation_dot"], "kwargs": [{}]}
    for gt in (one, [one], str([one])):
        p = Problem([{"role": "user", "content": "q"}], gt, "ood__ifbench", "x", {})
        check_route(p)
        assert (score("No dot here", p).score, score("A dot.", p).score) == (1.0, 0.0)


def test_ifeval_kwargs_must_fit_their_instruction():
    def row(kwargs) -> Problem:
        extra = {"instruction_id_list": ["keywords:existence", "detectable_format:title"]}
        return Problem([{"role": "user", "content": "q"}], kwargs, "ood__ifeval", "ood", extra)

    check_route(row([{"keywords": ["a"]}, {}]))  # what IFEval ships: fine
    check_route(row([{"keywords": ["a"], "num_words": None}, None]))  # parquet's None-valued keys: dropped
    for kwargs, error in (
        ([{}, {}], r"instruction 'keywords:existence' kwargs \[\]: missing a required argument: 'keywords'"),
        (
            [{"keywords": ["a"], "bogus": 1}, {}],
            r"instruction 'keywords:existence' kwargs \['bogus', 'keywords'\]",
        ),
        ([["a"], {}], r"an instruction's kwargs must be a mapping, got list"),
        (None, r"instruction 'keywords:existence' kwargs \[\]: missing"),
    ):
        with pytest.raises(InputError, match=rf"^ifeval: {error}"):
            check_route(row(kwargs))
    # the same load-time check for an IFBench row, named as IFBench's
    bench = [{"instruction_id": ["copy:copy"], "kwargs": [{"prompt_to_repeat": "x", "bogus": 1}]}]
    with pytest.raises(
        InputError, match=r"^ifbench: instruction 'copy:copy' kwargs \['bogus', 'prompt_to_repeat'\]"
    ):
        check_route(Problem([{"role": "user", "content": "q"}], bench, "ood__ifbench", "ood", {}))


@pytest.mark.parametrize("name", sorted(n for n in SOURCES if SOURCES[n][3].startswith(SANDBOXED)))
def test_a_malformed_code_ground_truth_fails_routing(name, tmp_path):
    """The sandboxed verifiers' rows, without running code: routing rejects a ground truth the verifier
    cannot build tests from; one it accepts parses into tests (code) or a check (cruxeval), so no
    sample of that row is scored as "bad_ground_truth"."""
    from reasonrl.rewards.verifiers.code import parse_tests

    p = _fixture_problem(name, tmp_path)
    check_route(p)  # the fixture's own row routes
    rejected = 0
    for q in _malformed(p):
        if _rejected(q):
            rejected += 1
        elif p.data_source.startswith("codegen"):
            assert parse_tests(q.ground_truth)["kind"] in ("stdio", "call", "program", "asserts")
        else:  # no prediction in the answer: nothing runs, and the row's check was built
            assert score("", q).reason == "no_answer", q.ground_truth
    assert rejected > 0
