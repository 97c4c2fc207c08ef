"""The other shapes the code and simulation sources come in (LiveCodeBench's call-based tests, TACO /
DeepCoder cases, CodeIO's two directions, ARC-AGI task files, CRUXEval's input mode, MBPP sanitized,
HumanEval's fields), beside the one fixture per converter of `test_data_prepare.py`."""

from __future__ import annotations

import json

import pytest
from _prepare import convert_jsonl as _convert

from reasonrl.data.prepare import load_all
from reasonrl.errors import InputError
from reasonrl.rewards import score

load_all()


def _lcb(**fields):
    row = {"question_content": "Double n.", "question_id": "q9", "platform": "leetcode", "difficulty": "easy",
           "contest_date": "2024-09-01T00:00:00", "starter_code": "", "metadata": "{}",
           "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
           "private_test_cases": ""}  # fmt: skip
    return {**row, **fields}


@pytest.mark.bwrap
def test_livecodebench_call_based_tests_and_optional_fields(tmp_path):
    starter = "class Solution:\n    def mul(self, a, b):\n        "
    public = [{"input": "3\n2", "output": "6", "testtype": "functional"},  # one JSON argument per line
              {"input": "[1, 2]\n2\n", "output": "[1, 2, 1, 2]", "testtype": "functional"}]  # fmt: skip
    row = _lcb(starter_code=starter, metadata={"func_name": "mul"}, public_test_cases=public,
               private_test_cases=None)  # fmt: skip
    (p,), _ = _convert(tmp_path, "livecodebench", [row])
    assert p.ground_truth == {"inputs": [[3, 2], [[1, 2], 2]], "outputs": [6, [1, 2, 1, 2]], "fn_name": "mul"}
    assert "use the following starter code" in p.user_text and starter.strip() in p.user_text
    assert "Read the inputs from stdin" not in p.user_text and "### Question:\nDouble n." in p.user_text
    assert p.extra_info == {"index": 0, "question_id": "q9", "platform": "leetcode", "difficulty": "easy",
                            "contest_date": "2024-09-01T00:00:00"}  # fmt: skip
    solution = "```python\nclass Solution:\n    def mul(self, a, b):\n        return a * b\n```"
    assert score(solution, p).score == 1.0
    assert score(solution.replace("a * b", "a * b if isinstance(a, int) else a"), p).score == 0.0
    bare = {k: v for k, v in _lcb().items() if k not in ("question_id", "platform", "difficulty", "metadata")}
    bare.update(starter_code=None, contest_date=None, public_test_cases=[{"input": "2\n", "output": "4\n"}])
    (q,), _ = _convert(tmp_path, "livecodebench", [bare])  # a case without testtype is stdin
    assert (
        q.uid == "lcb/0"
        and q.ground_truth == {"inputs": ["2\n"], "outputs": ["4\n"]}
        and q.ability == "codegen"
    )
    assert (q.extra_info["platform"], q.extra_info["difficulty"], q.extra_info["contest_date"]) == (
        "",
        "",
        "",
    )
    assert "Read the inputs from stdin" in q.user_text and "# YOUR CODE HERE" in q.user_text


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"public_test_cases": "", "private_test_cases": None},
            r"field 'public_test_cases': no tests \(public or private\)$",
        ),
        (
            {"private_test_cases": 5},
            "field 'private_test_cases': must be a list of test cases with input and output",
        ),
        (
            {"public_test_cases": '{"input": "1", "output": "2"}'},
            "field 'public_test_cases': must be a list of test",
        ),
        ({"public_test_cases": [{"input": "1"}]}, "field 'public_test_cases': must be a list of test cases"),
        (
            {"public_test_cases": [{"input": 1, "output": "2"}]},
            "field 'public_test_cases': must be a list of test",
        ),
        ({"metadata": "{func_name: f}"}, "field 'metadata': is not JSON"),
        ({"metadata": '["f"]'}, r"field 'metadata': must be a mapping \(holding func_name\), got list$"),
        ({"public_test_cases": "not base64 at all"}, "field 'public_test_cases': is neither JSON nor"),
        (
            {"contest_date": None},
            "field 'contest_date': must be an ISO date to filter by --since/--until, got ''$",
        ),
        (
            {"metadata": "", "public_test_cases": [{"input": "1", "output": "2", "testtype": "functional"}]},
            "field 'metadata': functional tests need metadata.func_name$",
        ),
        (
            {
                "metadata": '{"func_name": "f"}',
                "public_test_cases": [{"input": "1", "output": "two", "testtype": "functional"}],
            },
            "field 'private_test_cases': functional test output is not JSON",
        ),
        (
            {
                "metadata": '{"func_name": "f"}',
                "public_test_cases": [{"input": "x y", "output": "2", "testtype": "functional"}],
            },
            "field 'private_test_cases': functional test input is not one JSON value per line",
        ),
        (
            {"private_test_cases": json.dumps([{"input": "1", "output": "2", "testtype": "functional"}])},
            r"field 'private_test_cases': mixes test types \['functional', 'stdin'\]",
        ),
        ({"private_test_cases": "not base64 at all"}, "field 'private_test_cases': is neither JSON nor"),
    ],  # fmt: skip
)
def test_livecodebench_bad_tests_name_their_field(tmp_path, fields, error):
    with pytest.raises(InputError, match=rf"row 0: {error}"):
        _convert(tmp_path, "livecodebench", [_lcb(**fields)], {"since": "2024-01-01"})


def test_livecodebench_half_open_windows(tmp_path):
    rows = [
        _lcb(question_id=f"q{i}", contest_date=d)
        for i, d in enumerate(["2024-07-31", "2024-08-01", "2025-03-01"])
    ]
    assert [p.uid for p in _convert(tmp_path, "livecodebench", rows, {"since": "2024-08-01"})[0]] == [
        "lcb/q1",
        "lcb/q2",
    ]
    assert [p.uid for p in _convert(tmp_path, "livecodebench", rows, {"until": "2024-08-01"})[0]] == [
        "lcb/q0"
    ]


@pytest.mark.bwrap
def test_taco_deepcoder_cases_and_call_based_tests(tmp_path):
    calls = [{"input": [2, 3], "output": 5, "type": "function_call", "fn_name": "add"},
             {"input": [0, 0], "output": 0, "type": "function_call"}]  # fmt: skip
    rows = [
        {"problem": "Add two numbers.", "tests": json.dumps(calls), "starter_code": "def add(a, b):\n"},
        {"problem": "Echo.", "tests": [{"input": "x\n", "output": "x\n", "type": "stdin_stdout"}]},
        {"question": "Square.", "tests": json.dumps({"inputs": ["3\n"], "outputs": ["9\n"], "fn_name": ""})},
    ]
    (a, b, c), _ = _convert(tmp_path, "taco", rows, {"data_source": "codegen__primeintellect"})
    assert a.ground_truth == {"inputs": [[2, 3], [0, 0]], "outputs": [5, 0], "fn_name": "add"}
    assert "Use the following starter code" in a.user_text and "def add(a, b):" in a.user_text
    assert a.user_text.rstrip().endswith("Add two numbers.") and a.data_source == "codegen__primeintellect"
    assert b.ground_truth == {"inputs": ["x\n"], "outputs": ["x\n"]} and "starter code" not in b.user_text
    assert c.ground_truth == {"inputs": ["3\n"], "outputs": ["9\n"]}  # an empty fn_name is stdin/stdout
    assert (a.extra_info, b.uid) == ({"index": 0}, "taco/1")
    assert score("```python\ndef add(a, b):\n    return a + b\n```", a).score == 1.0
    assert score("```python\ndef add(a, b):\n    return 5\n```", a).score == 0.0
    no_fn = [{"input": [1, 1], "output": 2, "type": "function_call"}]  # no fn_name anywhere: stdin cases
    (d,), _ = _convert(tmp_path, "taco", [{"problem": "p", "tests": no_fn}])
    assert d.ground_truth == {"inputs": [[1, 1]], "outputs": [2]}
    with pytest.raises(
        InputError, match=r"row 0: field 'input_output': is not valid JSON"
    ):  # TACO's own field
        _convert(tmp_path, "taco", [{"question": "q", "input_output": "{x", "tests": "[]"}])


@pytest.mark.parametrize(
    ("tests", "error"),
    [
        ("{not json", "field 'tests': is not valid JSON"),
        ([], r"field 'tests': must list \{input, output\} cases"),
        ([{"input": "1"}], r"field 'tests': must list \{input, output\} cases"),
        ([{"output": "1"}], r"field 'tests': must list \{input, output\} cases"),
        (["input, output"], r"field 'tests': must list \{input, output\} cases"),  # a string holds both words
        ({"inputs": [], "outputs": []}, "field 'tests': must hold non-empty 'inputs' and 'outputs'"),
        ({"inputs": ["1"]}, "field 'tests': must hold non-empty 'inputs' and 'outputs'"),
        ({"inputs": ["1", "2"], "outputs": ["1"]}, "field 'tests': 2 inputs but 1 outputs"),
        (None, "field 'input_output': missing"),
    ],  # fmt: skip
)
def test_taco_bad_tests_name_their_field(tmp_path, tests, error):
    row = {"problem": "p"} if tests is None else {"problem": "p", "tests": tests}
    with pytest.raises(InputError, match=rf"row 0: {error}"):
        _convert(tmp_path, "taco", [row])


def test_codeio_asks_for_either_side_seeded(tmp_path):
    row = {"problem_description": "Sum a list.", "io_requirements": "Input: nums", "refcode": "def main(nums): ...",
           "ios": [{"input": {"nums": [1, 2]}, "output": 3}, {"input": {"nums": []}, "output": 0}]}  # fmt: skip
    problems, _ = _convert(tmp_path, "codeio", [row] * 40)
    asked = [p.extra_info["predict"] for p in problems]
    assert 10 < asked.count("input") < 30 and set(asked) == {"input", "output"}  # a fair coin per row
    assert asked == [p.extra_info["predict"] for p in _convert(tmp_path, "codeio", [row] * 40)[0]]  # seeded
    assert asked != [
        p.extra_info["predict"] for p in _convert(tmp_path, "codeio", [row] * 40, {"seed": 7})[0]
    ]
    assert asked == [
        p.extra_info["predict"] for p in _convert(tmp_path, "codeio", [row] * 40, {"seed": 42})[0]
    ]
    by_side = {p.extra_info["predict"]: p for p in problems}
    out, inp = by_side["output"], by_side["input"]
    assert (
        out.ground_truth == '"output": 3' and 'Given the following input:\n{"nums": [1, 2]}' in out.user_text
    )
    assert (
        inp.ground_truth == '"input": {"nums": [1, 2]}'
        and "Given the following output:\n3\n" in inp.user_text
    )
    assert '{"output": <your output>}' in out.user_text and '{"input": <your input>}' in inp.user_text
    assert score('```json\n{"input": {"nums": [1, 2]}}\n```', inp).score == 1.0
    assert (
        score('```json\n{"input": {"nums": [3]}}\n```', inp).score == 0.0
    )  # also sums to 3: not what was asked
    assert (out.ability, out.extra_info) == (
        "coding-inference",
        {"index": out.extra_info["index"], "predict": "output"},
    )
    assert problems.index(out) == out.extra_info["index"]
    for bad in ([], [{"input": 1}], ["x"], "[]", [["input", "output"]]):
        with pytest.raises(InputError, match=r"row 0: field 'ios': must list \{input, output\} pairs$"):
            _convert(tmp_path, "codeio", [{**row, "ios": bad}])


def test_arcagi_tasks_with_several_tests_long_training_and_names(tmp_path):
    train = [{"input": [[i]], "output": [[i + 1]]} for i in range(8)]
    task = {"train": train, "test": [{"input": [[5]], "output": [[6]]}, {"input": [[7]], "output": [[8]]}]}
    (a, b), _ = _convert(tmp_path, "arcagi", [task], {"version": 2})
    assert (a.uid, b.uid, a.data_source) == ("arc/arcagi/0", "arc/arcagi/1", "simulation__arcagi2")
    assert (a.ground_truth, b.ground_truth) == ([[6]], [[8]]) and b.extra_info == {"index": 0, "task": "arcagi",
                                                                                 "test_index": 1}  # fmt: skip
    assert "Example 6\nInput: [[5]]\nOutput: [[6]]" in a.user_text and "Example 7" not in a.user_text
    assert a.user_text.count("Test input: [[5]]") == 1 and "Test input: [[7]]" in b.user_text
    assert "Output: [[1]]\n\nExample 2\nInput: [[1]]" in a.user_text and a.ability == "reasoning"
    named, _ = _convert(tmp_path, "arcagi", [{**task, "task_id": "t1"}, {**task, "id": "t2"}, task])
    assert [p.uid for p in named] == [
        "arc/t1/0",
        "arc/t1/1",
        "arc/t2/0",
        "arc/t2/1",
        "arc/arcagi-2/0",
        "arc/arcagi-2/1",
    ]
    for bad, error in (({"train": []}, "field 'train': must list example pairs$"),
                       ({"train": "pairs"}, "field 'train': must list example pairs$"),
                       ({"test": []}, "field 'test': has no test pairs$"),
                       ({"train": [{"input": [[1]], "output": [["x"]]}]}, r"field 'train\[0\].output': must be a non-empty grid of integers$"),
                       ({"test": [{"input": [], "output": [[1]]}]}, r"field 'test\[0\].input': must be a non-empty grid"),
                       ({"test": [{"input": [[1]], "output": [1]}]}, r"field 'test\[0\].output': must be a non-empty grid")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "arcagi", [{**task, **bad}])


@pytest.mark.bwrap
def test_cruxeval_input_mode(tmp_path):
    row = {"code": "def f(s):\n    return s[::-1]", "input": "'abc'", "output": "'cba'"}
    (p,), _ = _convert(tmp_path, "cruxeval", [row], {"mode": "CRUXEVAL-I"})
    assert (p.data_source, p.uid, p.ground_truth) == (
        "simulation__cruxeval-i",
        "cruxeval-i/0",
        {"functional": row["code"]},
    )
    assert "assert f(??) == 'cba'" in p.user_text and "'abc'" not in p.user_text
    assert p.extra_info == {"index": 0, "reference": "'cba'", "dataset": "cruxeval-i", "input": "'abc'"}
    assert score("```python\nassert f('abc') == 'cba'\n```", p).score == 1.0
    assert score("```python\nassert f('cba') == 'cba'\n```", p).score == 0.0
    with pytest.raises(InputError, match=r"option mode must be 'i' or 'o', got 'x'"):
        _convert(tmp_path, "cruxeval", [row], {"mode": "x"})
    (o,), _ = _convert(tmp_path, "cruxeval", [{**row, "id": "sample_7"}])  # the default: predict the output
    assert (o.data_source, o.uid, o.ability) == (
        "simulation__cruxeval-o",
        "cruxeval-o/sample_7",
        "simulation",
    )
    assert "assert f('abc') == ??" in o.user_text and "'cba'" not in o.user_text


def test_mbpp_sanitized_and_humaneval_fields(tmp_path):
    sanitized = {"prompt": "Double n.", "test_list": ["assert dbl(2) == 4"], "test_imports": ["import math"],
                 "challenge_test_list": ["assert dbl(0) == 0", " "], "test_setup_code": "X = 1"}  # fmt: skip
    (m,), _ = _convert(tmp_path, "mbpp", [sanitized])
    assert m.ground_truth == {
        "test_list": ["assert dbl(2) == 4", "assert dbl(0) == 0"],
        "test_setup_code": "import math\nX = 1",
    }
    assert (m.uid, m.extra_info) == (
        "mbpp/0",
        {"index": 0, "task_id": "0"},
    ) and "assert dbl(0)" not in m.user_text
    for bad in ([], "assert x", [1]):
        with pytest.raises(
            InputError, match=r"row 0: field 'test_list': must be a non-empty list of assert statements$"
        ):
            _convert(tmp_path, "mbpp", [{**sanitized, "test_list": bad}])
    bare = {
        "prompt": "Double n.",
        "test_list": ["assert dbl(2) == 4"],
        "test_setup_code": None,
    }  # no optional fields
    full = {"task_id": 11, "text": "Double n.", "code": "def dbl(n): return 2 * n", "test_list": ["assert dbl(2) == 4"],
            "challenge_test_list": [5, "assert dbl(1) == 2"]}  # fmt: skip
    (b, f), _ = _convert(tmp_path, "mbpp", [bare, full])
    assert b.ground_truth == {"test_list": ["assert dbl(2) == 4"], "test_setup_code": ""}
    assert f.ground_truth["test_list"] == [
        "assert dbl(2) == 4",
        "assert dbl(1) == 2",
    ]  # a non-text test: dropped
    assert (f.uid, f.ability, f.data_source) == ("mbpp/11", "codegen", "codegen__mbpp")
    assert f.extra_info == {"index": 1, "task_id": "11", "reference": "def dbl(n): return 2 * n"}
    with pytest.raises(
        InputError, match=r"row 0: field 'challenge_test_list': must be a list of assert statements$"
    ):
        _convert(tmp_path, "mbpp", [{**full, "challenge_test_list": "assert dbl(1) == 2"}])
    he = {"task_id": "HumanEval/1", "prompt": "def f():\n", "test": "def check(c): pass", "entry_point": "f"}
    (h,), _ = _convert(tmp_path, "humaneval", [he])
    assert (h.uid, h.extra_info, h.ground_truth) == ("HumanEval/1", {"index": 0, "task_id": "HumanEval/1"},
                                                     {"test": "def check(c): pass", "entry_point": "f"})  # fmt: skip
    for key in ("prompt", "test", "entry_point"):
        with pytest.raises(InputError, match=rf"row 0: field '{key}': "):
            _convert(tmp_path, "humaneval", [{**he, key: "  "}])
