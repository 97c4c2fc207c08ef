"""`data.passrate`'s rules on their own, without a model: the column and work directory names, how
samples become pass rates (a score at exactly the threshold solves; a problem short of samples is an
error, never a wrong rate), `--range` parsing and the filter's inclusive bounds and drop counts, and
the prompt-length filter's inclusive limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mixture_sources import Chars

from reasonrl.data import passrate
from reasonrl.errors import InputError
from reasonrl.rollout.base import SamplingParams
from reasonrl.types import Problem


def test_column_and_work_dir_names():
    assert passrate.column_name("Qwen/Qwen2.5-0.5B-Instruct/") == "Qwen2.5-0.5B-Instruct_pass_rate"
    assert passrate.column_name("runs/my model (v2)") == "my_model_v2__pass_rate"
    assert passrate.column_name("/") == "__pass_rate"  # no basename: the name itself, cleaned
    assert passrate.work_dir("out/rates.parquet", "m_pass_rate") == Path("out/rates.parquet.work/m_pass_rate")


def _problems(n):
    return [Problem([{"role": "user", "content": str(i)}], "1", "math", uid=f"p{i}") for i in range(n)]


def test_pass_rates_count_scores_at_the_threshold_as_solved_and_refuse_missing_samples(monkeypatch):
    import reasonrl.eval.runner as runner

    scores = {0: [1.0, 1.0, 0.0, 1.0], 1: [0.5, 0.49, 0.0, 1.0], 2: [0.0] * 4}
    rows = [{"problem": i, "score": s} for i, ss in scores.items() for s in ss]
    monkeypatch.setattr(runner, "generate_samples", lambda *a, **k: list(rows))
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8)
    assert passrate.pass_rates("m", _problems(3), "s.jsonl", params) == [0.75, 0.25, 0.0]
    assert passrate.pass_rates("m", _problems(3), "s.jsonl", params, correct_threshold=0.5) == [
        0.75,
        0.5,
        0.0,
    ]
    rows.pop()  # problem 2 has 3 of its 4 samples
    with pytest.raises(RuntimeError, match=r"s.jsonl: problems \[2\] lack samples"):
        passrate.pass_rates("m", _problems(3), "s.jsonl", params)
    rows[:] = [{"problem": 0, "score": 1.0}] * 4
    with pytest.raises(RuntimeError, match=r"problems \[1, 2, 3, 4, 5\] lack samples"):  # the first five
        passrate.pass_rates("m", _problems(7), "s.jsonl", params)


def test_the_rate_column_is_added_to_every_row_and_counts_must_match():
    rows = [{"a": 1}, {"a": 2}]
    assert passrate.add_pass_rate_column(rows, "m_pass_rate", [0, 0.5]) == [
        {"a": 1, "m_pass_rate": 0.0}, {"a": 2, "m_pass_rate": 0.5}]  # fmt: skip
    with pytest.raises(ValueError):
        passrate.add_pass_rate_column(rows, "m_pass_rate", [0.5])


@pytest.mark.parametrize(
    "spec, want",
    [("m=0:1", ("m", 0.0, 1.0)), ("m=0.25:0.25", ("m", 0.25, 0.25)), ("a=b=0:0.5", None), ("m=0.5:0.25", None),
     ("m=-0.1:0.5", None), ("m=0:1.5", None), ("=0:1", None), ("m0:1", None), ("m=0-1", None), ("m=x:1", None)],
)  # fmt: skip
def test_range_parsing(spec, want):
    if want is None:
        with pytest.raises(InputError, match=r"expected COLUMN=LOW:HIGH with 0 <= LOW <= HIGH <= 1"):
            passrate.parse_range(spec)
    else:
        assert passrate.parse_range(spec) == want


def test_filter_keeps_rows_inside_every_range_bounds_included_and_counts_the_first_range_each_fails():
    rows = [{"s": 0.0, "w": 0.0}, {"s": 0.2, "w": 0.9}, {"s": 0.5, "w": 0.95}, {"s": 1.0, "w": 1.0},
            {"s": 0.1, "w": 0.1}]  # fmt: skip
    kept, stats = passrate.filter_rows(rows, [("s", 0.1, 1.0), ("w", 0.0, 0.9)], "f.parquet")
    assert kept == [rows[1], rows[4]]  # s = 0.1 and w = 0.9 are inside
    assert stats == {"rows_in": 5, "rows_out": 2,
                     "dropped": {"s outside [0.1, 1.0]": 1, "w outside [0.0, 0.9]": 2}}  # fmt: skip
    with pytest.raises(
        InputError, match=r"^f.parquet: no column 'x'; pass-rate columns: a_pass_rate, b_pass_rate$"
    ):
        passrate.filter_rows([{"b_pass_rate": 0.5, "a_pass_rate": 0.5, "q": 1}], [("x", 0, 1)], "f.parquet")
    with pytest.raises(InputError, match=r"no column 'x'; pass-rate columns: none$"):
        passrate.filter_rows([{"q": 1}], [("x", 0, 1)], "f.parquet")
    for bad in (None, "0.5", 1.5, -0.1):
        with pytest.raises(InputError, match=r"^f.parquet row 1: column 's' has no pass rate in \[0, 1\]"):
            passrate.filter_rows([{"s": 0.5}, {"s": bad}], [("s", 0, 1)], "f.parquet")
    assert passrate.filter_rows([], [("s", 0, 1)], "f.parquet")[1]["rows_in"] == 0


def test_length_filter_keeps_prompts_at_exactly_the_limit():
    problems = [Problem([{"role": "user", "content": "x" * n}], "1", "math") for n in (3, 4, 5)]
    rows = [{"n": 3}, {"n": 4}, {"n": 5}]
    assert passrate.length_filter(rows, problems, Chars(), 4) == ([{"n": 3}, {"n": 4}], 1)
    with pytest.raises(ValueError):  # rows and problems must be the same file's
        passrate.length_filter(rows, problems[:2], Chars(), 4)


def test_solutions_keep_distinct_solving_samples_the_model_ended():
    rows = [  # problem 0: two solving texts, one repeated, one cut at max tokens; problem 1: none solves
        {"problem": 0, "sample": 0, "score": 0.0, "completion": "wrong", "finish_reason": "stop"},
        {"problem": 0, "sample": 1, "score": 1.0, "completion": "right A", "finish_reason": "stop"},
        {"problem": 0, "sample": 2, "score": 1.0, "completion": "right A", "finish_reason": "stop"},
        {"problem": 0, "sample": 3, "score": 1.0, "completion": "right but cut", "finish_reason": "length"},
        {"problem": 0, "sample": 4, "score": 1.0, "completion": "right B", "finish_reason": "stop"},
        {"problem": 1, "sample": 0, "score": 0.5, "completion": "half", "finish_reason": "stop"},
        {"problem": 2, "sample": 1, "score": 1.0, "completion": "  ", "finish_reason": "stop"},  # empty: none
        {"problem": 2, "sample": 0, "score": 1.0, "completion": "first", "finish_reason": "stop"},
    ]
    probs = _problems(3)
    out, counts = passrate.solutions(probs, rows, per_problem=2, model="teacher")
    assert [(p.uid, p.extra_info["response"]) for p in out] == [("p0", "right A"), ("p0#2", "right B"),
                                                                ("p2", "first")]  # fmt: skip
    assert counts == {"solutions": 3, "problems_solved": 2, "solved_but_truncated": 1}
    assert all(
        p.extra_info["response_model"] == "teacher" and p.prompt == probs[int(p.uid[1])].prompt for p in out
    )
    assert probs[0].extra_info == {}  # the input problems untouched
    one, _ = passrate.solutions(probs, rows, per_problem=1)
    assert [p.uid for p in one] == ["p0", "p2"]
    half, counts = passrate.solutions(probs, rows, per_problem=1, threshold=0.5)
    assert [p.extra_info["response"] for p in half] == ["right A", "half", "first"]
