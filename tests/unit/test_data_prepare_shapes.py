"""The other shapes each public source comes in (a second packaging, optional fields, an answer typed
differently) beside the one fixture per converter of `test_data_prepare.py`: every field a converter
reads has a row here that changes the result when the field is read wrongly."""

from __future__ import annotations

import json

import pytest
from _prepare import convert_jsonl as _convert

from reasonrl.data.prepare import load_all
from reasonrl.errors import InputError
from reasonrl.rewards import score

load_all()


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
    assert c.extra_info["aggregation"] == "null" and {p.ability for p in (a, b, c)} == {"table"}
    (d,), _ = _convert(
        tmp_path, "hitab", [{**rows[1], "table_id": "t9"}]
    )  # an inline table wins, no tables_dir
    assert "| Year |\n" in d.user_text and "Sales" not in d.user_text
    for bad, options, error in (
        ({"table_id": "t9"}, None, r"field 'table': missing \(the row names table_id: pass --option tables_dir=DIR\)"),
        ({"table_id": "t0"}, {"tables_dir": str(tables)}, rf"field 'table_id': table file {tables / 't0.json'} not found"),
        ({"table": [1, 2]}, None, "field 'table': must be a matrix of cells"),
        ({}, None, "field 'table': must be a matrix of cells$"),
        ({"table": []}, None, "field 'table': must be a matrix of cells$"),
        ({"table": [["a"]], "answer": []}, None, "field 'answer': is empty$"),
    ):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "hitab", [{"question": "q", "answer": "1", **bad}], options)


def test_mmlu_pro_options_and_answers(tmp_path):
    base = {"question": "Pick one.", "options": ["w", "x", "y"], "answer": "c"}
    (p,), _ = _convert(tmp_path, "mmlu_pro", [base])
    assert (p.ground_truth, p.uid, p.extra_info) == (
        "C",
        "mmlu_pro/0",
        {"index": 0, "choices": ["w", "x", "y"]},
    )
    assert "Pick one.\n\n(A) w\n(B) x\n(C) y" in p.user_text
    ten = [str(i) for i in range(10)]
    (q,), _ = _convert(tmp_path, "mmlu_pro", [{**base, "options": ten, "answer": "J", "answer_index": 9}])
    assert q.extra_info["choices"] == ten and "(J) 9" in q.user_text
    (r,), _ = _convert(
        tmp_path, "mmlu_pro", [{**base, "options": [1.5, 2, "N/A "], "answer": "B"}]
    )  # two: enough
    (t,), _ = _convert(
        tmp_path,
        "mmlu_pro",
        [{**base, "question_id": 70, "category": "law", "src": "ori", "cot_content": ""}],
    )
    assert (t.uid, t.ability, t.extra_info) == (
        "mmlu_pro/70",
        "stem",
        {"index": 0, "choices": ["w", "x", "y"], "category": "law", "src": "ori"},
    )
    assert (
        r.extra_info["choices"] == ["1.5", "2"]
        and "(A) 1.5\n(B) 2" in r.user_text
        and "(C)" not in r.user_text
    )
    for bad, error in (({"options": "w x"}, "field 'options': must be a list$"),
                       ({"options": ["N/A", "N/A"]}, "field 'options': must hold 2 to 10"),
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
        "gsm8k/train/0",  # the question and the worked answer kept as verl keeps them (its SFT trainer's)
        {"split": "train", "index": 0, "question": "How many?", "answer": "so 2 * 3\n####  1,234,567"},
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
        {"index": 0, "choices": ["p", "q"], "field": "Physics"},
    )
    assert "Pick.\n\n(A) p\n(B) q" in p.user_text and p.ability == "stem"
    ten = [str(i) for i in range(10)]
    full = {**base, "uuid": "u7", "options": ten, "answer_letter": "J", "discipline": "Science", "subfield": "Optics",
            "difficulty": "hard"}  # fmt: skip
    (q,), _ = _convert(tmp_path, "supergpqa", [full])
    assert (q.uid, q.ground_truth, q.extra_info) == ("supergpqa/u7", "J", {
        "index": 0, "choices": ten, "discipline": "Science", "field": "Physics", "subfield": "Optics",
        "difficulty": "hard"})  # fmt: skip
    for bad, error in (({"options": ["p"]}, "field 'options': must be a list of 2 to 10 options"),
                       ({"options": "pq"}, "field 'options': must be a list of 2 to 10 options"),
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
    with pytest.raises(InputError, match=r"row 0: field 'table': must be a matrix of cells$"):
        _convert(tmp_path, "finqa", [{"table": [["a", "1"], "b 2"], "question": "a?", "answer": 1}])
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reasonrl.data.prepare import convert_files

    src = tmp_path / "finqa.parquet"  # the release's shape: sentence lists (arrays), absent post_text
    row = {"id": "ETR/2004/p1", "pre_text": ["Costs fell.", "Sales rose."], "post_text": None,
           "table": [["year", "sales"], ["2004", "$ 7"]], "question": "sales?", "answer": "7"}  # fmt: skip
    pq.write_table(pa.Table.from_pylist([row]), src)
    (g,) = convert_files("finqa", [str(src)])[0]
    assert g.uid == "finqa/ETR/2004/p1" and "None" not in g.user_text
    assert (
        "Costs fell.\nSales rose.\n\n| year | sales |" in g.user_text
        and "| 2004 | $ 7 |\n\nQuestion: sales?" in g.user_text
    )
    table = "<table><tr><td>Year</td><td>Sales</td></tr><tr><td>2020</td><td>7</td></tr></table>"
    rows = [
        {
            "paragraphs": ["Sales were 7.", "Costs fell."],
            "tables": [table, table.replace("2020", "2021")],
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
        and "| 2020 | 7 |\n\n| Year | Sales |" in kept[0].user_text  # the tables, in their order
        and "| 2021 | 7 |\n\nSales were 7.\nCosts fell.\n\nThe question is: Sales?" in kept[0].user_text
        and kept[0].ground_truth == "7"
    )
    assert {(p.ability, p.data_source) for p in kept} == {("table", "table__multihier")}
    assert [p.extra_info for p in kept] == [{"index": 0}, {"index": 1}]
    for bad, error in (({"qa": {"question": " ", "answer": 1}}, "field 'qa': must hold question and answer"),
                       ({"qa": {"question": None, "answer": 1}}, "field 'qa': must hold question and answer"),
                       ({"qa": "Year?"}, "field 'qa': must hold question and answer"),
                       ({"qa": {"question": "q"}}, "field 'qa': must hold question and answer"),
                       ({"tables": ["<p>no table</p>"]}, "field 'tables': must be a list of non-empty HTML tables"),
                       ({"tables": []}, "field 'tables': must be a list of non-empty HTML tables")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}$"):
            _convert(tmp_path, "multihiertt", [{**rows[1], **bad}])
    sol = json.dumps({"header": ["House", "Name"], "rows": [[1, "Ann"]]})  # as text, numbers as cells
    (z,), _ = _convert(tmp_path, "zebralogic", [{"puzzle": "Ann lives in 1.", "solution": sol}])
    assert z.ground_truth == {"header": ["House", "Name"], "rows": [["1", "Ann"]]}
    assert (z.uid, z.extra_info) == ("zebralogic/0", {"index": 0, "id": "0", "grid_size": ""})
    (y,), _ = _convert(
        tmp_path, "zebralogic", [{"id": "lgp-test-2x2-7", "size": "2*2", "puzzle": "p", "solution": sol}]
    )
    assert (y.uid, y.ability, y.data_source) == (
        "zebralogic/lgp-test-2x2-7",
        "logical_reasoning",
        "logic__zebra_puzzle_dataset",
    )
    assert y.extra_info == {"index": 0, "id": "lgp-test-2x2-7", "grid_size": "2*2"}
    shape, per_row = "must be {'header': .*}$", "every row must be a list of one value per header column$"
    for bad, error in (({"header": ["a"], "rows": []}, per_row), ({"header": ["a", "b"], "rows": [["1"]]}, per_row),
                       ({"header": ["a", "b"], "rows": ["12"]}, per_row),  # a text row as long as the header
                       ({"header": "ab", "rows": [["1", "2"]]}, shape), ({"header": ["a"], "rows": {"x": 1}}, shape),
                       ([["a"], [["1"]]], shape), ({"rows": [["1"]]}, shape)):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: field 'solution': {error}"):
            _convert(tmp_path, "zebralogic", [{"puzzle": "p", "solution": bad}])


def test_orz_and_areal_shapes(tmp_path):
    pair = [{"from": "human", "value": " 2+2? "}, {"from": "assistant", "ground_truth": {"value": 4}}]
    (o,), _ = _convert(tmp_path, "orz", [{"conversations": pair}])
    assert (o.ground_truth, o.uid, o.extra_info) == ("4", "orz/0", {"index": 0, "original_question": "2+2?"})
    assert (o.data_source, o.ability) == ("math__orz", "math")
    pair_error = r"field '0': expected a \[human, assistant\] message pair$"
    for bad, error in (([pair[0]], pair_error), (["a", "b"], pair_error), ("2+2?", pair_error),
                       ([pair[0], pair[1], "a third"], None),  # the pair is read; what follows is not
                       ([{"value": ""}, pair[1]], "field '0.value': missing problem text$"),
                       ([{"value": None}, pair[1]], "field '0.value': missing problem text$"),
                       ([pair[0], {"ground_truth": " "}], r"field '1.ground_truth.value': missing answer$"),
                       ([pair[0], {"ground_truth": {"value": " "}}], r"field '1.ground_truth.value': missing answer$")):  # fmt: skip
        if error is None:
            assert _convert(tmp_path, "orz", [{"conversations": bad}])[0][0].ground_truth == "4"
            continue
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "orz", [{"conversations": bad}])
    (a, b), _ = _convert(
        tmp_path,
        "areal",
        [
            {"prompt": "P1", "solutions": "The answer is 7."},
            {"prompt": "P2", "task": "math", "solutions": ["\\boxed{8}", "\\boxed{9}"]},
        ],
    )
    assert (a.ground_truth, a.uid, a.extra_info) == (
        "The answer is 7.",
        "areal/0",
        {"index": 0, "query_id": "0"},
    )
    assert b.ground_truth == "8" and a.prompt == [{"role": "user", "content": "P1"}]
    for bad, error in (({"task": "code"}, "field 'task': 'code' is not supported"), ({"solutions": []}, "field 'solutions': must be a non-empty list"),
                           ({"solutions": 5}, "field 'solutions': must be a non-empty list of solutions"),
                           ({"solutions": [None, "\\boxed{1}"]}, "field 'solutions': first solution has no answer"),
                       ({"solutions": [" "]}, "field 'solutions': first solution has no answer")):  # fmt: skip
        with pytest.raises(InputError, match=rf"row 0: {error}"):
            _convert(tmp_path, "areal", [{"prompt": "P", "solutions": ["1"], **bad}])


def test_gpqa_permutation_is_pinned_per_seed_and_record(tmp_path):
    """The shuffle is part of the benchmark: a changed default seed or hash re-letters every answer."""
    q = {"Question": "Which gas is noble?", "Correct Answer": "Argon", "Incorrect Answer 1": "Iron",
         "Incorrect Answer 2": "Sodium", "Incorrect Answer 3": "Carbon"}  # fmt: skip
    rows = [{**q, "Record ID": "rec1"}, {**q, "Record ID": "rec2"}, {**q, "Record ID": "rec3"}, q]
    problems, _ = _convert(tmp_path, "gpqa", rows)
    assert [(p.uid, p.ground_truth, p.extra_info["permutation"]) for p in problems] == [
        ("gpqa_diamond/rec1", "A", [0, 2, 1, 3]),
        ("gpqa_diamond/rec2", "B", [2, 0, 1, 3]),
        ("gpqa_diamond/rec3", "B", [3, 0, 2, 1]),
        ("gpqa_diamond/3", "B", [1, 0, 2, 3]),  # no Record ID: the row's index names it
    ]
    options = ["Argon", "Iron", "Sodium", "Carbon"]
    for p in problems:
        shown = [options[k] for k in p.extra_info["permutation"]]
        assert p.extra_info["choices"] == shown and p.extra_info["record_id"] == p.uid.split("/")[1]
        assert (p.data_source, p.ability) == ("stem__gpqa_diamond", "stem")
        listed = "\n".join(f"({letter}) {o}" for letter, o in zip("ABCD", shown))
        assert f"{q['Question']}\n\n{listed}\n\n" in p.user_text  # every option, once, in that order
        assert score("\\boxed{E}", p).info["reason"] == "no_answer"  # four options: E is none of them
    seeded, _ = _convert(tmp_path, "gpqa", rows, {"seed": 1})
    assert [p.extra_info["permutation"] for p in seeded] == [
        [2, 1, 3, 0],
        [0, 2, 1, 3],
        [3, 2, 1, 0],
        [0, 3, 1, 2],
    ]


def test_aime_year_and_mmlu_pro_answer_index_are_checked(tmp_path):
    row = {"problem": "p", "answer": "7"}
    (a,), _ = _convert(tmp_path, "aime", [{**row, "year": "2025"}])
    assert (a.data_source, a.extra_info) == ("aime25", {"index": 0, "year": 2025})
    with pytest.raises(InputError, match=r"row 0: field 'year': must be a year such as 2024, got '25th'$"):
        _convert(tmp_path, "aime", [{**row, "year": "25th"}])
    with pytest.raises(
        InputError, match=r"converter aime: option year must be a year such as 2024, got 'x'$"
    ):
        _convert(tmp_path, "aime", [row], {"year": "x"})
    base = {"question": "q", "options": ["w", "x", "y"], "answer": "C"}
    for index in (2, "2", " 2"):  # parquet's int or a text
        (m,), _ = _convert(tmp_path, "mmlu_pro", [{**base, "answer_index": index}])
        assert m.ground_truth == "C"
    for index in (1, "two", True, 9):  # 9: past the options
        with pytest.raises(
            InputError, match=rf"row 0: field 'answer_index': {index} is not the answer letter 'C'$"
        ):
            _convert(tmp_path, "mmlu_pro", [{**base, "answer_index": index}])
    ten = {**base, "options": [str(i) for i in range(10)], "answer": "J"}
    with pytest.raises(InputError, match=r"row 0: field 'answer_index': -1 is not the answer letter 'J'$"):
        _convert(tmp_path, "mmlu_pro", [{**ten, "answer_index": -1}])  # an index, not counted from the end
