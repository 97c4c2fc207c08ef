"""Data files: Guru-shaped parquet (plain and compressed extra_info) loads and routes every row, a wrong
data_source fails at load naming the row; rows we write keep extra_info a mapping (what verl reads)
and come back identical; datasets directories and gzip JSON lines read; --skip-bad-rows reports."""

from __future__ import annotations

import base64
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonrl.data.files import read_rows, write_rows
from reasonrl.data.schema import read_problems, write_problems
from reasonrl.errors import InputError
from reasonrl.rewards import check_routable, score
from reasonrl.types import Problem


def _pack(obj) -> str:
    return base64.b64encode(gzip.compress(json.dumps(obj).encode())).decode()


def _guru_rows():
    return [
        {"data_source": "math__merged_deduped_dapo_or1_dataset", "prompt": [{"role": "user", "content": "1+1?"}],
         "ability": "math", "apply_chat_template": True, "reward_model": {"style": "rule", "ground_truth": "2"},
         "extra_info": {"split": "train", "index": 0, "reward_metric": None, "original_question": "1+1?"}},
        {"data_source": "logic__zebra_puzzle_dataset", "prompt": [{"role": "user", "content": "zebra"}],
         "ability": "logical_reasoning", "apply_chat_template": True,
         "reward_model": {"style": "rule", "ground_truth": json.dumps({"header": ["House"], "rows": [["1"]]})},
         "extra_info": {"split": "train", "index": 1, "reward_metric": None, "original_question": None}},
    ]  # fmt: skip


def test_guru_plain_and_compressed_packagings_load_and_route(tmp_path):
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.Table.from_pylist(_guru_rows()), plain)
    compressed_rows = []
    for r in _guru_rows():
        blob = _pack({k: v for k, v in r["extra_info"].items() if v is not None})
        parts = {f"part_{i + 1}": blob[i * 40 : (i + 1) * 40] for i in range((len(blob) + 39) // 40)}
        compressed_rows.append({**r, "extra_info": parts,
                                "reward_model": {"style": "rule", "compressed": _pack(r["reward_model"]["ground_truth"])}})  # fmt: skip
    width = max(len(r["extra_info"]) for r in compressed_rows)
    for r in compressed_rows:  # one schema across rows, as the released files have
        r["extra_info"] = {f"part_{i + 1}": r["extra_info"].get(f"part_{i + 1}") for i in range(width)}
    packed = tmp_path / "compressed.parquet"
    pq.write_table(pa.Table.from_pylist(compressed_rows), packed)
    a, b = read_problems(plain), read_problems(packed)
    assert (
        [p.ground_truth for p in a]
        == [p.ground_truth for p in b]
        == ["2", json.dumps({"header": ["House"], "rows": [["1"]]})]
    )
    assert b[0].extra_info["original_question"] == "1+1?" and b[1].extra_info["index"] == 1
    check_routable(a + b, "guru")
    assert score("\\boxed{2}", b[0]).score == 1.0
    bad = tmp_path / "bad.parquet"
    pq.write_table(
        pa.Table.from_pylist([_guru_rows()[0], {**_guru_rows()[0], "data_source": "mystery__x"}]), bad
    )
    with pytest.raises(InputError, match=r"bad.parquet row 1: no verifier for data_source 'mystery__x'"):
        check_routable(read_problems(bad), str(bad))


def test_written_parquet_keeps_extra_info_a_mapping_and_round_trips(tmp_path):
    problems = [
        Problem([{"role": "user", "content": "a"}], "1", "math__x", "math", {"index": 0, "tags": ["x"], "meta": {"k": 1}}, uid="a0"),
        Problem([{"role": "user", "content": "b"}], {"header": ["H"], "rows": [["1"]]}, "logic__zebra_puzzle_dataset",
                "logic", {"index": "b1", "split": "test"}, uid="z1"),
        Problem([{"role": "user", "content": "c"}], "3", "math__x", uid="c", apply_chat_template=False),
    ]  # fmt: skip
    path = tmp_path / "rows.parquet"
    write_problems(path, problems)
    table = pq.read_table(path)
    assert pa.types.is_struct(table.schema.field("extra_info").type)  # verl's extra_info.get(...) works
    extra = table.column("extra_info").to_pylist()
    assert extra[0]["tags"] == ["x"] and extra[1]["split"] == "test"
    back = read_problems(path)
    assert [p.to_row() for p in back] == [p.to_row() for p in problems]
    assert back[2].apply_chat_template is False and back[1].ground_truth == {"header": ["H"], "rows": [["1"]]}


def test_datasets_directory_and_gzip_json_lines(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"question": "q1", "answer": "x\n#### 1"}, {"question": "q2", "answer": "y\n#### 2"}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    assert read_rows(tmp_path / "ds") == rows
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows), "test": datasets.Dataset.from_list(rows[:1])}
                         ).save_to_disk(str(tmp_path / "dd"))  # fmt: skip
    with pytest.raises(InputError, match=r"has splits \['test', 'train'\]; give one of them as"):
        read_rows(tmp_path / "dd")
    assert read_rows(tmp_path / "dd" / "test") == rows[:1]
    gz = tmp_path / "rows.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert read_rows(gz) == rows
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match="broken.jsonl.gz: not a readable gzip file"):
        read_rows(tmp_path / "broken.jsonl.gz")


def test_skip_bad_rows_reports_file_row_and_field(tmp_path):
    good = Problem([{"role": "user", "content": "a"}], "1", "math__x").to_row()
    path = tmp_path / "mixed.jsonl"
    write_rows(path, [good, {**good, "reward_model": {"style": "rule"}}, good])
    with pytest.raises(InputError, match=r"mixed.jsonl row 1: field 'reward_model' has no 'ground_truth'"):
        read_problems(path)
    report: list = []
    assert len(read_problems(path, skip_bad=True, report=report)) == 2
    assert report == [(1, f"{path} row 1: field 'reward_model' has no 'ground_truth'")]


def test_atomic_writes_keep_the_old_file_when_writing_fails_and_fsync_before_and_after_the_rename(
    tmp_path, monkeypatch
):
    import os

    from reasonrl.data import files

    path = tmp_path / "out.jsonl"
    write_rows(path, [{"a": 1}])
    with pytest.raises(TypeError):  # a value JSON cannot hold, found mid-write
        write_rows(path, [{"a": 2}, {"a": object()}])
    assert read_rows(path) == [{"a": 1}]  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temp file left behind

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))[1])  # fmt: skip
    monkeypatch.setattr(files.os, "replace", lambda a, b: (events.append(("replace", str(b))), real_replace(a, b))[1])  # fmt: skip
    files.write_text(tmp_path / "sub" / "notes.md", "héllo\n")
    assert (tmp_path / "sub" / "notes.md").read_text(encoding="utf-8") == "héllo\n"
    kinds = [e[0] for e in events]
    assert kinds == ["fsync", "replace", "fsync"], events  # the data, then the rename, then the directory
    assert events[0][1].startswith(str(tmp_path / "sub" / ".notes.md."))  # a temp file beside the target
    assert events[2][1] == str(tmp_path / "sub")
