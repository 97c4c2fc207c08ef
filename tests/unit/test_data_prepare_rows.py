"""`reasonrl data prepare`'s driver on its own: what a converter's text fields accept, rows that are
not mappings, the `data_source` option (it re-routes every problem, and a route to no verifier is a bad
row named by file and row), `--limit` (stops reading files once reached), the cap on reported bad rows,
and the errors of an empty run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _prepare import convert_or_error

from reasonrl.data.prepare import RowError, convert_files, load_all, prepare, text
from reasonrl.data.schema import read_problems
from reasonrl.errors import InputError

load_all()


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _guru(q: str, data_source: str = "math__x", **extra):
    return {"data_source": data_source, "prompt": [{"role": "user", "content": q}],
            "reward_model": {"ground_truth": "2", "style": "rule"}, **extra}  # fmt: skip


def test_need_takes_the_first_field_present_and_names_all_when_none_is():
    from reasonrl.data.prepare import need

    assert need({"b": 2, "c": 3}, "a", "b", "c") == 2
    assert need({"a": None, "b": None, "c": 0}, "a", "b", "c") == 0  # a NaN field: dropped by convert_rows
    with pytest.raises(RowError, match=r"^field 'a': missing \(or 'b', 'c'\)$"):
        need({"d": 1}, "a", "b", "c")
    with pytest.raises(RowError, match=r"^field 'a': missing$"):
        need({}, "a")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("   ", "must be non-empty text, got str"),
        ({"q": 1}, "must be non-empty text, got dict"),
        ([1, 2], "must be non-empty text, got list"),
        (float("nan"), "missing"),  # pandas' missing value
        (float("inf"), "must be non-empty text, got inf"),
        (True, None),
    ],  # fmt: skip
)
def test_text_fields_must_be_non_empty_text(tmp_path, value, why):
    src = _jsonl(
        tmp_path / "ds.jsonl", [{"problem": "fine?", "answer": "1"}, {"problem": value, "answer": "2"}]
    )
    if why is None:  # a bool is an int to Python; it reads as its text, like a number
        (_, p), _ = convert_files("deepscaler", [src])
        assert p.extra_info["original_question"] == "True"
        return
    with pytest.raises(InputError, match=rf"^{src} row 1: field 'problem': {why}$"):
        convert_files("deepscaler", [src])
    with pytest.raises(RowError) as e:  # the field, for callers that handle it
        text({"question": value}, "question", "problem")
    assert e.value.field == "question"


def test_numbers_are_text_and_surrounding_space_is_stripped(tmp_path):
    src = _jsonl(
        tmp_path / "ds.jsonl", [{"problem": "  3*3?\n", "answer": 9}, {"problem": "x", "answer": 2.5}]
    )
    problems, report = convert_files("deepscaler", [src])
    assert [p.ground_truth for p in problems] == ["9", "2.5"]
    assert problems[0].extra_info["original_question"] == "3*3?"
    assert (report.rows_in, report.rows_out, report.dropped, report.bad) == (2, 2, 0, [])


def test_a_row_that_is_not_a_mapping_is_a_bad_row(tmp_path):
    src = tmp_path / "ds.json"
    src.write_text(json.dumps([{"problem": "ok?", "answer": "1"}, 7, "text"]))
    with pytest.raises(InputError, match=rf"^{src} row 1: a row must be a mapping, got int$"):
        convert_files("deepscaler", [str(src)])
    problems, report = convert_files("deepscaler", [str(src)], skip_bad=True)
    assert [p.ground_truth for p in problems] == ["1"]
    assert report.bad == [(str(src), 1, "a row must be a mapping, got int"),
                          (str(src), 2, "a row must be a mapping, got str")]  # fmt: skip


def test_pass_through_rows_are_checked_and_routed_row_by_row(tmp_path):
    """guru passes verl rows through: a row without reward_model names its row once (not "row: row:"),
    and a data_source no verifier takes is a bad row of its file, not of the whole converter."""
    choice = {
        **_guru("Pick (A) 1 (B) 2", "stem__gpqa_x"),
        "reward_model": {"ground_truth": "B", "style": "rule"},
    }
    src = _jsonl(tmp_path / "g.jsonl", [_guru("1+1?"), {"data_source": "math__x", "prompt": [{"role": "user",
                 "content": "q"}]}, _guru("1+3?", "bogus__x"), choice, _guru("2+0?", "stem__gpqa_x")])  # fmt: skip
    with pytest.raises(
        InputError, match=rf"^{src} row 1: missing field\(s\) \['reward_model'\]; a row needs"
    ):
        convert_files("guru", [src])
    problems, report = convert_files("guru", [src], skip_bad=True)
    assert [p.data_source for p in problems] == ["math__x", "stem__gpqa_x"]
    assert [(f, i) for f, i, _ in report.bad] == [(src, 1), (src, 2), (src, 4)]
    assert report.bad[1][2].startswith("no verifier for data_source 'bogus__x' (uid 'bogus__x/2')")
    assert (
        report.bad[2][2] == "choice: ground truth '2' is not an option letter"
    )  # its verifier could not score it
    assert report.as_dict()["bad_examples"][1].startswith(
        f"{src} row 2: no verifier for data_source 'bogus__x'"
    )
    assert (report.rows_in, report.rows_out) == (5, 2)
    ok = _jsonl(tmp_path / "ok.jsonl", [_guru("1+1?"), _guru("1+3?", "bogus__x")])
    with pytest.raises(InputError, match=rf"^{ok} row 1: no verifier for data_source 'bogus__x'"):
        prepare("guru", [ok], tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_the_data_source_option_reroutes_every_problem(tmp_path):
    src = _jsonl(
        tmp_path / "ds.jsonl", [{"problem": "1+1?", "answer": "2"}, {"problem": "2+2?", "answer": "4"}]
    )
    out = tmp_path / "out.jsonl"
    report = prepare("deepscaler", [src], out, {"data_source": "math__mine"})
    assert report["source"] == "deepscaler" and report["out"] == str(out)
    assert [p.data_source for p in read_problems(out)] == ["math__mine", "math__mine"]
    with pytest.raises(InputError, match=rf"^{src} row 0: no verifier for data_source 'nowhere'"):
        prepare("deepscaler", [src], out, {"data_source": "nowhere"})
    with pytest.raises(InputError, match=r"^data prepare deepscaler: no rows converted from "):
        prepare("deepscaler", [src], tmp_path / "none.jsonl", {"data_source": "nowhere"}, skip_bad=True)
    assert not (tmp_path / "none.jsonl").exists()
    assert len(read_problems(out)) == 2  # the earlier output is untouched by the failed runs


def test_the_system_option_puts_a_system_message_first_where_a_prompt_has_none(tmp_path):
    """`--option system=TEXT` on any converter (how a tool is announced to the model: docs/rollouts.md);
    a row's own system message is kept."""
    src = _jsonl(tmp_path / "ds.jsonl", [{"problem": "1+1?", "answer": "2"}])
    own = _jsonl(tmp_path / "g.jsonl", [{"data_source": "math__x", "reward_model": {"ground_truth": "2"},
                                          "prompt": [{"role": "system", "content": "mine"},
                                                     {"role": "user", "content": "1+1?"}]}])  # fmt: skip
    tool = "Write Python in ```python blocks; its output follows in an ```output block."
    prepare("deepscaler", [src], tmp_path / "a.jsonl", {"system": tool})
    (p,) = read_problems(tmp_path / "a.jsonl")
    assert p.prompt[0] == {"role": "system", "content": tool} and p.prompt[1]["role"] == "user"
    prepare("guru", [own], tmp_path / "b.jsonl", {"system": tool})
    (q,) = read_problems(tmp_path / "b.jsonl")
    assert [m["content"] for m in q.prompt] == ["mine", "1+1?"]
    with pytest.raises(InputError, match=r"known: \[.*'data_source', 'system'\]"):
        prepare("deepscaler", [src], tmp_path / "c.jsonl", {"sytem": tool})


def test_limit_stops_reading_further_files(tmp_path):
    rows = [{"problem": f"{i}+1?", "answer": str(i + 1)} for i in range(3)]
    first, second = _jsonl(tmp_path / "a.jsonl", rows[:2]), _jsonl(tmp_path / "b.jsonl", rows[2:])
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    problems, report = convert_files("deepscaler", [first, str(broken)], limit=2)  # reached: never read
    assert [p.ground_truth for p in problems] == ["1", "2"] and report.rows_out == 2
    problems, report = convert_files("deepscaler", [first, second, str(broken)], limit=1)
    assert [p.ground_truth for p in problems] == ["1"] and (report.rows_in, report.rows_out) == (2, 1)
    problems, _ = convert_files("deepscaler", [first, second], limit=3)
    assert [p.ground_truth for p in problems] == ["1", "2", "3"]
    with pytest.raises(InputError, match=str(broken)):
        convert_files("deepscaler", [first, str(broken)], limit=3)


def test_bad_examples_are_capped_but_counted(tmp_path):
    src = _jsonl(tmp_path / "ds.jsonl", [{"problem": "ok?", "answer": "1"}] + [{"problem": "x"}] * 25)
    report = prepare("deepscaler", [src], tmp_path / "out.jsonl", skip_bad=True)
    assert (report["rows_in"], report["rows_out"], report["bad_rows"]) == (26, 1, 25)
    assert report["bad_examples"] == [f"{src} row {i}: field 'answer': missing" for i in range(1, 21)]


def test_a_run_without_inputs_fails_before_any_work(tmp_path):
    with pytest.raises(InputError, match=r"^data prepare deepscaler: give at least one --input file$"):
        prepare("deepscaler", [], tmp_path / "out.jsonl")


def test_converters_register_themselves_in_a_fresh_process(tmp_path):
    """convert_files imports every converter module itself (nothing else has, in a fresh process)."""
    src = _jsonl(tmp_path / "ds.jsonl", [{"problem": "1+1?", "answer": "2"}])
    code = ("import sys; from reasonrl.data.prepare import convert_files; "
            "print(convert_files('deepscaler', [sys.argv[1]])[0][0].uid)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, src], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "deepscaler/0"


def test_a_nan_answer_is_a_missing_answer(tmp_path):
    """pandas writes a missing value in a float column as NaN: it must not become the gold "nan"."""
    rows = [{"problem": "1+1?", "answer": float("nan"), "solution": "so \\boxed{2}"}]
    (p,), _ = convert_files("math", [_jsonl(tmp_path / "m.jsonl", rows)])
    assert p.ground_truth == "2"
    (p,), _ = convert_files("minerva", [_jsonl(tmp_path / "n.jsonl", rows)])
    assert p.ground_truth == "2"
    with pytest.raises(InputError, match=r"row 0: field 'answer': missing$"):
        convert_files("deepscaler", [_jsonl(tmp_path / "d.jsonl", rows)])


def _one(name: str, row: dict, tmp_path, options=None):
    got = convert_or_error(tmp_path, name, [row], options)
    return got if isinstance(got, str) else got[0]


def test_ifeval_rows_unknown_ids_and_the_loose_option(tmp_path):
    row = {"key": 7, "prompt": "Write.", "instruction_id_list": ["keywords:existence"],
           "kwargs": [{"keywords": ["apple"]}]}  # fmt: skip
    strict = _one("ifeval", row, tmp_path)
    assert "loose" not in strict.extra_info and strict.uid == "ifeval/7"  # strict by default
    assert _one("ifeval", row, tmp_path, {"loose": True}).extra_info["loose"] is True
    assert _one("ifeval", {**row, "instruction_id_list": ["keywords:nope"]}, tmp_path) == (
        "field 'instruction_id_list': unknown instruction id(s) ['keywords:nope']"
    )


def test_ifbench_and_dapo_rows_name_what_is_missing(tmp_path):
    row = {"key": "k1", "messages": [{"role": "user", "content": "  "}],
           "ground_truth": "[{'instruction_id': ['punctuation:punctuation_dot'], 'kwargs': [{}]}]"}  # fmt: skip
    assert _one("ifbench", row, tmp_path) == "field 'messages': the first message has no content"
    dapo = {"data_source": "math_dapo", "prompt": [{"role": "user", "content": "1+1?"}],
            "reward_model": {"ground_truth": "2", "style": "rule"}}  # fmt: skip
    assert _one("dapo", {**dapo, "prompt": None}, tmp_path).startswith("missing field(s) ['prompt']")
    assert _one("dapo", {k: v for k, v in dapo.items() if k != "reward_model"}, tmp_path).startswith(
        "missing field(s) ['reward_model']; a row needs data_source, prompt, reward_model"
    )


def test_search_r1_rows_as_search_r1_and_verl_build_them(tmp_path):
    """Search-R1's prompt (queries in <search> tags) or verl's (a system message, Hermes calls), the question
    ending in "?", every alias gold, the source from the row or the option; a row without answers is named."""
    from reasonrl.data.prepare import convert_files, prompts
    from reasonrl.errors import InputError

    src = tmp_path / "test.jsonl"
    rows = [{"question": "capital of France", "golden_answers": ["Paris"], "data_source": "hotpotqa"},
            {"question": "Who wrote Hamlet?", "reward_model": {"ground_truth": {"target": ["Shakespeare"]}}}]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (a, b), _ = convert_files("search_r1", [str(src)])
    assert a.prompt == [{"role": "user", "content": prompts.SEARCH_R1 + "capital of France?\n"}]
    assert "<search> query </search>" in prompts.SEARCH_R1 and a.ground_truth == {"target": ["Paris"]}
    assert (a.data_source, b.data_source, b.ground_truth) == (
        "searchR1_hotpotqa",
        "searchR1_nq",
        {"target": ["Shakespeare"]},
    )
    (h, _), _ = convert_files("search_r1", [str(src)], {"style": "hermes", "dataset": "bamboogle"})
    assert [m["role"] for m in h.prompt] == ["system", "user"] and h.data_source == "searchR1_bamboogle"
    assert (
        '<tool_call>{"name": "search", "arguments": {"query_list": ["query"]}}</tool_call>'
        in h.prompt[1]["content"]
    )
    with pytest.raises(InputError, match="option style must be one of search_r1, hermes"):
        convert_files("search_r1", [str(src)], {"style": "xml"})
    src.write_text(json.dumps({"question": "q", "golden_answers": []}) + "\n")
    with pytest.raises(InputError, match=r"row 0.*golden_answers.*at least one answer"):
        convert_files("search_r1", [str(src)])
