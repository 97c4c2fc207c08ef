"""The `luffy` converter: LUFFY's openr1.parquet rows (verl rows plus `target`, the demonstration) keep their
prompt and ground truth and carry the trace as `extra_info.response` (what algo.guidance and SFT read); a
data_source that routes nowhere goes to math; a row without a target is named, or kept when asked."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from reasonrl.data.prepare import convert_files
from reasonrl.errors import InputError

TRACE = "<think>\nSo 6*7 = 42.\n</think>\nThe answer is \\boxed{42}."


def _row(i: int, target=None, source="openr1"):
    return {"data_source": source, "ability": "math",
            "prompt": [{"role": "system", "content": "Think first."}, {"role": "user", "content": f"What is 6*7? ({i})"}],
            "target": [{"role": "assistant", "content": TRACE}] if target is None else target,
            "reward_model": {"style": "rule", "ground_truth": "42"}, "extra_info": {"index": i, "split": "default"}}  # fmt: skip


def _parquet(tmp_path, rows) -> str:
    path = tmp_path / "openr1.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def test_rows_keep_their_prompt_and_answer_and_carry_the_demonstration(tmp_path):
    rows = [_row(0), _row(1, source="math_dapo")]
    (a, b), report = convert_files("luffy", [_parquet(tmp_path, rows)])
    assert a.prompt[1]["content"] == "What is 6*7? (0)" and a.prompt[0]["role"] == "system"
    assert (a.ground_truth, a.extra_info["response"], a.uid) == ("42", TRACE, "luffy/0")
    assert (a.data_source, b.data_source) == ("math", "math_dapo")  # openr1 routes nowhere: math
    assert report.counts == {"routed to math": 1}


def test_a_row_without_its_demonstration_is_named_or_kept_when_asked(tmp_path):
    import pytest

    path = _parquet(tmp_path, [_row(0), _row(1, target=[])])
    with pytest.raises(InputError, match=r"row 1: field 'target': missing \(the demonstration"):
        convert_files("luffy", [path])
    (a, b), _ = convert_files("luffy", [path], {"require_target": False})
    assert "response" in a.extra_info and "response" not in b.extra_info
    bad = _parquet(tmp_path, [_row(0, target=[{"role": "assistant", "content": " "}])])
    with pytest.raises(InputError, match="field 'target': must be a list of messages whose first has"):
        convert_files("luffy", [bad])
