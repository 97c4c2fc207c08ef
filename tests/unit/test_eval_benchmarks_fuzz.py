"""Malformed benchmark files: every public source's fixture row (test_eval_benchmarks.STANDARD) with each
field removed or replaced by each JSON type loads and routes, or fails with one line naming the file and
the row (an InputError before any generation), never a traceback from inside a loader."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_eval_benchmarks import R360, STANDARD, _jsonl

from reasonrl.errors import InputError
from reasonrl.eval.benchmarks import BENCHMARKS, load_benchmark
from reasonrl.rewards import check_routable

ODD = [None, 5, 2.5, True, -1, "", " ", "x", [], [None], [5], ["x"], {}, {"a": 1}, [[1]], [{"a": 1}]]


def _variants(row: dict) -> list[dict]:
    """`row` with each field removed, and with each field replaced by each ODD value."""
    return [{k: v for k, v in row.items() if k != field} for field in row] + [
        {**row, field: value} for field in row for value in ODD
    ]


def _refused(name: str, fname: str, tmp_path, variant: dict) -> bool:
    """Load and route benchmark `name` from tmp_path: False if it works, True if refused in one line."""
    try:
        check_routable(load_benchmark(BENCHMARKS.get(name), tmp_path), name)
    except InputError as e:
        msg = str(e)
        assert "\n" not in msg and ("row 0" in msg or fname in msg), (variant, msg)
        return True
    return False


@pytest.mark.parametrize("name", sorted(STANDARD))
def test_each_field_malformed_loads_or_names_the_row(name, tmp_path):
    fname, row = STANDARD[name][:2]
    refused = 0
    for variant in _variants(row):
        _jsonl(tmp_path / fname, [variant])
        refused += _refused(name, fname, tmp_path, variant)
    assert refused > 0


@pytest.mark.parametrize("name", sorted(R360))
def test_each_field_of_a_reasoning360_row_malformed_loads_or_names_the_row(name, tmp_path):
    fname, row = R360[name][:2]
    (tmp_path / "offline_eval").mkdir()
    path = tmp_path / "offline_eval" / fname
    variants = _variants(row)
    for inner in ("reward_model", "extra_info"):
        variants += [{**row, inner: v} for v in _variants(row[inner])]
    refused = 0
    for variant in variants:
        try:
            pq.write_table(pa.Table.from_pylist([variant]), path)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            continue  # parquet cannot hold it (an empty struct): no file of this shape exists
        refused += _refused(name, fname, tmp_path, variant)
    assert refused > 0
