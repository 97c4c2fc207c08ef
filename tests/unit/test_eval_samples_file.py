"""A damaged samples.jsonl or samples.setup.json on an eval resume: what a kill leaves (a torn or
uncommitted tail) is cut; anything else is a one-line InputError naming the line, the file left byte for
byte as it was, and never a table computed from part of the file or from samples counted twice."""

from __future__ import annotations

import json

import pytest

from reasonrl.errors import InputError
from reasonrl.eval.runner import summarize
from reasonrl.eval.samples import check_setup, committed_samples

ROW = {"benchmark": "a", "problem": 0, "uid": "u0", "sample": 0, "prompt": "p", "completion": "c",
       "extracted": "5", "score": 1.0, "reason": "correct", "tokens": 3, "finish_reason": "stop"}  # fmt: skip
VALUES = [None, 5, 2.5, True, -1, "", "x", [], [5], {}, {"a": 1}, float("nan")]


def _file(tmp_path, rows) -> tuple:
    path = tmp_path / "samples.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path.write_text(text)
    return path, text


def _two_chunks(first_row=ROW):
    return [first_row, {**ROW, "sample": 1, "score": 0.0}, {"committed": "a", "chunk": 0},
            {**ROW, "problem": 1, "uid": "u1"}, {"committed": "a", "chunk": 1}]  # fmt: skip


def _refused(path, text, line: int) -> str:
    with pytest.raises(InputError) as e:
        committed_samples(path)
    msg = str(e.value)
    assert msg.startswith(f"{path} line {line}: ") and "\n" not in msg, msg
    assert path.read_text() == text  # nothing rewritten
    return msg


@pytest.mark.parametrize("field", sorted(ROW))
def test_each_field_of_a_committed_sample_is_checked(tmp_path, field):
    """Removed or replaced by each JSON type: accepted (and then the table computes) or refused naming
    line 1; the fields the table reads refuse every wrong type."""
    variants = [{k: v for k, v in ROW.items() if k != field}, *({**ROW, field: v} for v in VALUES)]
    refused = 0
    for row in variants:
        path, text = _file(tmp_path, _two_chunks(row))
        try:
            samples, done = committed_samples(path)
        except InputError as e:
            refused += 1
            named = (
                f"line 1: field '{field}'",
                "line 1: fields 'problem' and 'sample'",
                "line 3: the chunk committed for 'a'",
            )
            assert any(x in str(e) for x in named), str(e)
            assert path.read_text() == text
            continue
        assert done == {("a", 0), ("a", 1)} and len(samples) == 3
        problems = len({s["problem"] for s in samples})
        assert summarize(samples, {"a": "math"})["benchmarks"]["a"]["problems"] == problems
    read = {"benchmark", "problem", "sample", "score", "reason", "finish_reason"}
    # missing, of a wrong type (None allowed for reason / finish_reason), a negative index, a NaN score
    # (a plugin verifier's negative score is its own), a benchmark other than its chunk commits
    wrong = {"benchmark": 13, "problem": 12, "sample": 12, "score": 10, "reason": 10, "finish_reason": 10}
    assert refused == (wrong[field] if field in read else 0)


def test_a_kill_leaves_a_torn_or_uncommitted_tail_that_is_cut(tmp_path):
    rows = _two_chunks()
    for tail in ('{"benchmark": "a", "pro', '{"committed": "a", "chunk": 1}'):  # no newline: mid-write
        path = tmp_path / "samples.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[:4]) + tail)
        samples, done = committed_samples(path)
        assert done == {("a", 0)} and samples == rows[:2]
        assert path.read_text() == "".join(json.dumps(r) + "\n" for r in rows[:3])


@pytest.mark.parametrize(
    "rows, line, message",
    [
        ([ROW, "x", {"committed": "a", "chunk": 0}], 2, 'not a JSON object: "x"'),
        (
            [ROW, "y" * 99, {"committed": "a", "chunk": 0}],
            2,
            f'not a JSON object: "{"y" * 59}; ',
        ),  # cut at 60
        ([ROW, 5, {"committed": "a", "chunk": 0}], 2, "not a JSON object"),
        ([[ROW], {"committed": "a", "chunk": 0}], 1, "not a JSON object"),
        ([ROW, {"committed": 3, "chunk": 0}], 2, "field 'committed': must be a benchmark name"),
        ([ROW, {"committed": "a"}], 2, "field 'chunk': must be a problem index, got None"),
        ([ROW, {"committed": "a", "chunk": "0"}], 2, "field 'chunk'"),
        ([ROW, {"committed": "a", "chunk": -2}], 2, "field 'chunk'"),
        ([ROW, {"committed": "a", "chunk": True}], 2, "field 'chunk'"),
        (
            [ROW, {"committed": "a", "chunk": 0}, ROW, {"committed": "a", "chunk": 0}],
            4,
            "benchmark 'a' chunk 0 is committed twice",
        ),
        ([ROW, {"committed": "b", "chunk": 0}], 2, "the chunk committed for 'b' holds samples of 'a'"),
        ([{**ROW, "score": -0.5, "problem": -1}, {"committed": "a", "chunk": 0}], 1, "must not be negative"),
        (
            [{**ROW, "score": float("inf")}, {"committed": "a", "chunk": 0}],
            1,
            "must be a finite number, got inf",
        ),
    ],
)
def test_damage_no_kill_makes_is_named_and_kept(tmp_path, rows, line, message):
    path, text = _file(tmp_path, [*rows, ROW])  # an uncommitted tail too: still not rewritten
    assert message in _refused(path, text, line)


def test_a_broken_line_before_the_end_is_damage_not_a_torn_tail(tmp_path):
    path = tmp_path / "samples.jsonl"
    good = "".join(json.dumps(r) + "\n" for r in _two_chunks())
    lines = good.splitlines(keepends=True)
    for text in (
        "".join([*lines[:3], '{"benchmark": "a", "pro\n', *lines[3:]]),
        "".join([*lines[:3], "\n", *lines[3:]]),
    ):
        path.write_text(text)
        assert "not a complete JSON line" in _refused(path, text, 4)
    path.write_text(good)  # the file as written: every chunk kept, nothing rewritten
    assert committed_samples(path)[1] == {("a", 0), ("a", 1)} and path.read_text() == good


def test_a_damaged_setup_record_is_named_and_the_samples_kept(tmp_path):
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"committed": "a", "chunk": 0}\n')
    setup = {"model": "m", "engine": "hf", "seed": 0, "chunk_size": 32, "benchmarks": {"a": {"problems": 3}}}
    record = tmp_path / "samples.setup.json"
    for bad in ('{"model": "m", "seed', "[1, 2]", '{"benchmarks": [1]}', "\xff\xfe"):
        record.write_bytes(bad.encode("latin-1"))
        with pytest.raises(InputError, match=r"samples.setup.json: not the setup record an eval writes") as e:
            check_setup(samples, setup)
        assert "\n" not in str(e.value) and record.read_bytes() == bad.encode("latin-1")
    record.write_text(json.dumps({**setup, "benchmarks": {"a": 5}}))  # a benchmark's entry not a mapping
    with pytest.raises(InputError, match="benchmark a: different problems"):
        check_setup(samples, setup)
    assert samples.read_text() == '{"committed": "a", "chunk": 0}\n'


def test_a_chunks_rows_index_problems_from_its_first_and_score_correctness_not_reward(tmp_path):
    from reasonrl.eval.samples import commit_marker, sample_rows
    from reasonrl.types import Completion, Problem, RewardResult, RolloutGroup

    def group(i):
        p = Problem(
            prompt=[{"role": "user", "content": f"q{i}"}], ground_truth="1", data_source="x", uid=f"u{i}"
        )
        comps = [Completion([1, 2], "a", [0.0, 0.0]), Completion([3], "b", [0.0], finish_reason="length")]
        results = [RewardResult(0.8, {"correctness": 1.0, "reason": "correct", "extracted": "1"}),
                   RewardResult(-0.2, {"reason": "wrong", "extracted": "2"})]  # fmt: skip
        return RolloutGroup(p, [0], comps, rewards=[0.8, -0.2], results=results)

    rows = sample_rows("b", 32, [group(0), group(1)])
    path = tmp_path / "samples.jsonl"  # written as the runner writes a chunk: read back as committed
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, commit_marker("b", 32)]))
    assert committed_samples(path) == (rows, {("b", 32)})
    assert [(r["problem"], r["sample"], r["uid"], r["prompt"]) for r in rows] == [
        (32, 0, "u0", "q0"), (32, 1, "u0", "q0"), (33, 0, "u1", "q1"), (33, 1, "u1", "q1")]  # fmt: skip
    assert [(r["score"], r["reason"], r["extracted"], r["tokens"], r["finish_reason"]) for r in rows[:2]] == [
        (1.0, "correct", "1", 2, "stop"), (-0.2, "wrong", "2", 1, "length")]  # fmt: skip
    assert {r["benchmark"] for r in rows} == {"b"} and rows[1]["completion"] == "b"
