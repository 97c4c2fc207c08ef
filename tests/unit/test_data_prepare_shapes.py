"""The other shapes each public source comes in (a second packaging, optional fields, an answer typed
differently) beside the one fixture per converter of `test_data_prepare.py`: every field a converter
reads has a row here that changes the result when the field is read wrongly."""

from __future__ import annotations

import json

import pytest

from reasonrl.data.prepare import convert_files, load_all
from reasonrl.errors import InputError
from reasonrl.rewards import score

load_all()


def _convert(tmp_path, name, rows, options=None):
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return convert_files(name, [str(src)], options)[0], str(src)


def test_amc_in_both_packagings(tmp_path):
    rows = [{"question": "How many?", "answer": "27", "id": 5, "url": "https://aops/5"},  # math-ai/amc23
            {"problem": "Half?", "answer": 2.5}, {"problem": "Whole?", "answer": 142.0, "id": 9}]  # fmt: skip
    (a, b, c), _ = _convert(tmp_path, "amc", rows)
    assert (a.user_text.count("How many?"), a.ground_truth, a.uid) == (1, "27", "amc/5")
    assert a.extra_info == {"index": 0, "url": "https://aops/5"} and b.extra_info == {"index": 1}
    assert (b.ground_truth, b.uid, c.ground_truth, c.uid) == ("2.5", "amc/1", "142", "amc/9")
    assert {p.data_source for p in (a, b, c)} == {"math__amc"} and {p.ability for p in (a, b, c)} == {"math"}


def test_matharena_defaults_and_question_field(tmp_path):
    (p,), _ = _convert(tmp_path, "matharena", [{"question": "Compute 2+2.", "answer": "4"}])
    assert (p.data_source, p.uid, p.extra_info) == ("math__hmmt_feb_2025", "hmmt_feb_2025/0", {"index": 0})
    assert "Compute 2+2." in p.user_text and score("\\boxed{4}", p).score == 1.0


def test_olympiadbench_answer_shapes(tmp_path):
    rows = [{"id": 3, "problem": "Find y.", "answer": "$5$"},  # Qwen2.5-Math's packaging: one string
            {"question": "Find z.", "final_answer": ["$1$"], "context": "  Let z = 1.  ", "unit": ""},
            {"question": "Find w.", "final_answer": ["2"], "unit": " cm ", "error": " "}]  # fmt: skip
    (a, b, c), _ = _convert(tmp_path, "olympiadbench", rows)
    assert (a.ground_truth, a.uid, a.extra_info) == ("5", "olympiadbench/3", {"index": 0})
    assert "Find y." in a.user_text and "unit" not in a.user_text
    assert b.user_text.count("Let z = 1.\n\nFind z.") == 1 and b.extra_info == {"index": 1}
    assert c.extra_info == {"index": 2, "unit": "cm"}  # a blank error is no tolerance
    assert "The unit of the answer is cm; give the number without the unit." in c.user_text
    (d,), _ = _convert(
        tmp_path, "olympiadbench", [{"question": "q", "final_answer": ["1", "2"], "error": "1e-2,5"}]
    )
    assert d.extra_info["tolerance"] == 0.01  # the first of one per answer
    for bad in ([], ["$3$", " $ $ "]):
        with pytest.raises(
            InputError, match=r"row 0: field 'final_answer': must be a non-empty list of answers$"
        ):
            _convert(tmp_path, "olympiadbench", [{"question": "q", "final_answer": bad}])
    with pytest.raises(
        InputError, match=r"row 0: field 'error': must be a finite number \(a tolerance\), got 'abc'"
    ):
        _convert(tmp_path, "olympiadbench", [{"question": "q", "final_answer": ["1"], "error": "abc"}])


def test_minerva_in_both_packagings(tmp_path):
    rows = [{"question": "Speed?", "answer": " 3e8 ", "id": "m7"},  # math-ai/minervamath
            {"problem": "Mass?", "answer": "", "solution": "So \\boxed{5}", "type": "Physics"},
            {"problem": "Time?", "answer": "2", "idx": 42, "id": "x"}]  # fmt: skip
    (a, b, c), _ = _convert(tmp_path, "minerva", rows)
    assert (a.ground_truth, a.uid, a.extra_info) == ("3e8", "minerva/m7", {"index": 0})
    assert "Speed?" in a.user_text and a.data_source == "math__minerva"
    assert (b.ground_truth, b.uid, b.extra_info) == ("5", "minerva/1", {"index": 1, "type": "Physics"})
    assert c.uid == "minerva/42"  # Qwen2.5-Math's idx first


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
    (q,), _ = _convert(tmp_path, "livecodebench", [bare])
    assert q.uid == "lcb/0" and q.ground_truth == {"inputs": ["2\n"], "outputs": ["4\n"]}
    assert (q.extra_info["platform"], q.extra_info["difficulty"]) == ("", "")
    assert "Read the inputs from stdin" in q.user_text and "# YOUR CODE HERE" in q.user_text


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"public_test_cases": "", "private_test_cases": 5}, "field 'public_test_cases': no tests"),
        (
            {"metadata": "", "public_test_cases": [{"input": "1", "output": "2", "testtype": "functional"}]},
            "field 'metadata': functional tests need metadata.func_name",
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
        _convert(tmp_path, "livecodebench", [_lcb(**fields)])


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
    with pytest.raises(InputError, match=r"row 0: field 'input_output': is not valid JSON"):  # TACO's own field
        _convert(tmp_path, "taco", [{"question": "q", "input_output": "{x", "tests": "[]"}])


@pytest.mark.parametrize(
    ("tests", "error"),
    [
        ("{not json", "field 'tests': is not valid JSON"),
        ([], r"field 'tests': must list \{input, output\} cases"),
        ([{"input": "1"}], r"field 'tests': must list \{input, output\} cases"),
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
    for bad in ([], [{"input": 1}], ["x"], "[]"):
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
    named, _ = _convert(tmp_path, "arcagi", [{**task, "task_id": "t1"}, {**task, "id": "t2"}, task])
    assert [p.uid for p in named] == [
        "arc/t1/0",
        "arc/t1/1",
        "arc/t2/0",
        "arc/t2/1",
        "arc/arcagi-2/0",
        "arc/arcagi-2/1",
    ]
    for bad, error in (({"train": []}, "field 'train': must list example pairs"),
                       ({"test": []}, "field 'test': has no test pairs"),
                       ({"train": [{"input": [[1]], "output": [["x"]]}]}, r"field 'train\[0\].output': must be a non-empty grid"),
                       ({"test": [{"input": [], "output": [[1]]}]}, r"field 'test\[0\].input': must be a non-empty grid"),
                       ({"test": [{"input": [[1]], "output": [1]}]}, r"field 'test\[0\].output': must be a non-empty grid")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "arcagi", [{**task, **bad}])


def test_hitab_tables_inline_or_in_their_own_files(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "t9.json").write_text(json.dumps({"texts": [["Year", "Sales"], ["2020", "7"]], "title": "x"}))
    rows = [{"question": "Sales in 2020?", "answer": 7, "table_id": "t9", "aggregation": ["none"]},
            {"id": "h2", "question": "Years?", "answer": ["2020"], "texts": [["Year"], ["2020"]]},
            {"question": "Cells?", "answer": "a", "table": {"texts": [["a", "b"]]}}]  # fmt: skip
    (a, b, c), _ = _convert(tmp_path, "hitab", rows, {"tables_dir": str(tables)})
    assert (a.ground_truth, a.uid, a.extra_info) == ("7", "hitab/0", {"index": 0, "aggregation": '["none"]'})
    assert "| Year | Sales |" in a.user_text and "| 2020 | 7 |" in a.user_text
    assert a.user_text.count("The question is: Sales in 2020?") == 1
    assert (b.uid, b.ground_truth, c.ground_truth) == ("hitab/h2", "2020", "a") and "| a | b |" in c.user_text
    assert c.extra_info["aggregation"] == "null"
    for bad, options, error in (
        ({"table_id": "t9"}, None, r"field 'table': missing \(the row names table_id: pass --option tables_dir=DIR\)"),
        ({"table_id": "t0"}, {"tables_dir": str(tables)}, rf"field 'table_id': table file {tables / 't0.json'} not found"),
        ({"table": [1, 2]}, None, "field 'table': must be a matrix of cells"),
        ({"table": [["a"]], "answer": []}, None, "field 'answer': is empty"),
    ):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "hitab", [{"question": "q", "answer": "1", **bad}], options)


def test_mmlu_pro_options_and_answers(tmp_path):
    base = {"question": "Pick one.", "options": ["w", "x", "y"], "answer": "c"}
    (p,), _ = _convert(tmp_path, "mmlu_pro", [base])
    assert (p.ground_truth, p.uid, p.extra_info) == ("C", "mmlu_pro/0", {"index": 0, "choices": 3})
    assert "Pick one.\n\n(A) w\n(B) x\n(C) y" in p.user_text
    ten = [str(i) for i in range(10)]
    (q,), _ = _convert(tmp_path, "mmlu_pro", [{**base, "options": ten, "answer": "J", "answer_index": 9}])
    assert q.extra_info["choices"] == 10 and "(J) 9" in q.user_text
    for bad, error in (({"options": "w x"}, "field 'options': must be a list"),
                       ({"options": ["w", "N/A"]}, "field 'options': must hold 2 to 10 options besides N/A padding"),
                       ({"options": ten + ["10"]}, "field 'options': must hold 2 to 10"),
                       ({"answer": "D"}, "field 'answer': 'D' is not one of the 3 options"),
                       ({"answer_index": 1}, "field 'answer_index': 1 is not the answer letter 'C'")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "mmlu_pro", [{**base, **bad}])


def test_aime_gsm8k_and_math_in_their_other_shapes(tmp_path):
    rows = [{"ID": "2025-I-3", "Problem": "Find n.", "Answer": "16"}, {"problem": "Find m.", "answer": "7"}]
    (a, b), _ = _convert(tmp_path, "aime", rows, {"year": 2025})
    assert (a.data_source, a.uid, a.ground_truth, a.extra_info) == (
        "aime25",
        "aime25/2025-I-3",
        "16",
        {"index": 0, "year": 2025},
    )
    assert "Find n." in a.user_text and b.uid == "aime25/1"
    (c, d), _ = _convert(
        tmp_path, "aime", [{"question": "q", "answer": "1", "year": "2024"}, {"problem": "q", "answer": "2"}]
    )
    assert (c.data_source, c.extra_info, d.data_source, d.uid, d.extra_info) == ("aime24", {"index": 0, "year": 2024},
                                                                                "aime", "aime/1", {"index": 1})  # fmt: skip
    (g,), _ = _convert(
        tmp_path,
        "gsm8k",
        [{"question": "How many?", "answer": "so 2 * 3\n####  1,234,567 "}],
        {"split": "train"},
    )
    assert (g.ground_truth, g.uid, g.extra_info) == (
        "1234567",
        "gsm8k/train/0",
        {"split": "train", "index": 0},
    )
    with pytest.raises(InputError, match=r"row 0: field 'answer': has no final '#### <number>' line$"):
        _convert(tmp_path, "gsm8k", [{"question": "How many?", "answer": "six"}])
    rows = [
        {
            "question": "Half?",
            "answer": " 1/2 ",
            "unique_id": "test/algebra/1.json",
            "subject": "Algebra",
            "level": 2,
        },
        {"problem": "Twice?", "answer": " ", "solution": "It is $\\boxed{4}$.", "id": 8, "type": "Algebra"},
    ]
    (m, n), _ = _convert(tmp_path, "math", rows)
    assert (m.ground_truth, m.uid, m.extra_info) == (
        "1/2",
        "math/test/algebra/1.json",
        {"subject": "Algebra", "level": 2, "index": 0},
    )
    assert (n.ground_truth, n.uid, n.extra_info) == ("4", "math/8", {"type": "Algebra", "index": 1})
    with pytest.raises(
        InputError,
        match=r"row 0: field 'solution': has no \\boxed\{\} answer \(and there is no 'answer' field\)$",
    ):
        _convert(tmp_path, "math", [{"problem": "p", "solution": "It is 4."}])


def test_supergpqa_options_and_letters(tmp_path):
    base = {
        "question": "Pick.",
        "options": ["p", "q"],
        "answer_letter": "b",
        "field": "Physics",
        "subfield": None,
    }
    (p,), _ = _convert(tmp_path, "supergpqa", [base])
    assert (p.ground_truth, p.uid, p.extra_info) == (
        "B",
        "supergpqa/0",
        {"index": 0, "choices": 2, "field": "Physics"},
    )
    assert "Pick.\n\n(A) p\n(B) q" in p.user_text
    for bad, error in (({"options": ["p"]}, "field 'options': must be a list of 2 to 10 options"),
                       ({"options": [str(i) for i in range(11)]}, "field 'options': must be a list of 2 to 10"),
                       ({"answer_letter": "C"}, "field 'answer_letter': 'C' is not one of the 2 options")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "supergpqa", [{**base, **bad}])


def test_finqa_multihiertt_and_zebralogic_shapes(tmp_path):
    (f,), _ = _convert(
        tmp_path, "finqa", [{"pre_text": "Costs fell.", "table": [["a", "1"]], "question": "a?", "answer": 1}]
    )
    assert (f.uid, f.ground_truth, f.extra_info) == ("finqa/0", "1", {"index": 0})
    assert f.user_text.count("Costs fell.\n\n| a | 1 |") == 1 and "Question: a?" in f.user_text
    with pytest.raises(InputError, match=r"row 0: field 'table': must be a matrix of cells$"):
        _convert(tmp_path, "finqa", [{"table": [], "question": "a?", "answer": 1}])
    table = "<table><tr><td>Year</td><td>Sales</td></tr><tr><td>2020</td><td>7</td></tr></table>"
    rows = [
        {
            "paragraphs": ["Sales were 7."],
            "tables": [table],
            "qa": {"question": "Sales?", "answer": 7, "text_evidence": [0]},
        },
        {"uid": "m2", "tables": [table], "qa": {"question": "Year?", "answer": "2020", "text_evidence": []}},
    ]
    problems, src = _convert(tmp_path, "multihiertt", rows)
    assert [(p.uid, p.ground_truth) for p in problems] == [
        ("multihiertt/m2", "2020")
    ]  # text evidence: left out
    assert "| 2020 | 7 |" in problems[0].user_text and "The question is: Year?" in problems[0].user_text
    kept, _ = _convert(tmp_path, "multihiertt", rows, {"keep_text_evidence": True})
    assert (
        kept[0].uid == "multihiertt/0"
        and "Sales were 7." in kept[0].user_text
        and kept[0].ground_truth == "7"
    )
    for bad, error in (({"qa": {"question": " ", "answer": 1}}, "field 'qa': must hold question and answer"),
                       ({"qa": {"question": "q"}}, "field 'qa': must hold question and answer"),
                       ({"tables": ["<p>no table</p>"]}, "field 'tables': must be a list of non-empty HTML tables"),
                       ({"tables": []}, "field 'tables': must be a list of non-empty HTML tables")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}$"):
            _convert(tmp_path, "multihiertt", [{**rows[1], **bad}])
    sol = json.dumps({"header": ["House", "Name"], "rows": [[1, "Ann"]]})  # as text, numbers as cells
    (z,), _ = _convert(tmp_path, "zebralogic", [{"puzzle": "Ann lives in 1.", "solution": sol}])
    assert z.ground_truth == {"header": ["House", "Name"], "rows": [["1", "Ann"]]}
    assert (z.uid, z.extra_info) == ("zebralogic/0", {"index": 0, "id": "0", "grid_size": ""})
    for bad in (
        {"header": ["a"], "rows": []},
        {"header": ["a", "b"], "rows": [["1"]]},
        {"header": "a", "rows": []},
    ):
        with pytest.raises(InputError, match=r"row 0: field 'solution': "):
            _convert(tmp_path, "zebralogic", [{"puzzle": "p", "solution": bad}])


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
