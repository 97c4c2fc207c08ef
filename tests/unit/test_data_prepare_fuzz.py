"""Malformed rows never crash a converter: every field of every converter's fixture row (nested
mappings included) is removed or replaced by a value of each other JSON type, and the conversion
either succeeds or fails with the one-line `FILE row N: ...` InputError, never a traceback."""

from __future__ import annotations

import copy
import json

import pytest
from _prepare import convert_or_error
from test_data_prepare import SOURCES

from reasonrl.data.prepare import convert_files, load_all
from reasonrl.errors import InputError

load_all()
GONE = object()
ODD = [GONE, None, 5, 2.5, True, -1, "", " ", "x", [], [None], [5], ["x"], {}, {"a": 1}, [[1]], [{"a": 1}]]
GPQA = {"Question": "Which gas is noble?", "Correct Answer": "Argon", "Incorrect Answer 1": "Iron",
        "Incorrect Answer 2": "Sodium", "Incorrect Answer 3": "Carbon", "Record ID": "rec1"}  # fmt: skip


def _paths(row: dict, prefix: tuple = ()):
    for key, value in row.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))


def _with(row: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(row)
    at = out
    for key in path[:-1]:
        at = at[key]
    if value is GONE:
        del at[path[-1]]
    else:
        at[path[-1]] = value
    return out


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_malformed_field_is_a_bad_row_not_a_crash(name, tmp_path):
    rows, options = SOURCES[name][1], SOURCES[name][2]
    row = GPQA if rows is None else rows[0]
    if not isinstance(row, dict):  # ORZ's rows are message pairs: a list
        row = {"conversations": row}
    src = tmp_path / f"{name}.jsonl"
    failed = 0
    for path in _paths(row):
        for value in ODD:
            src.write_text(json.dumps(_with(row, path, value)) + "\n")
            try:
                convert_files(name, [str(src)], options)
            except InputError as e:
                assert str(e).startswith(f"{src} row 0: ") and "\n" not in str(e), (path, value, str(e))
                failed += 1
            except Exception as e:  # noqa: BLE001 - the point: name the field, not crash
                pytest.fail(f"{name}: {'.'.join(path)} = {value!r} raised {type(e).__name__}: {e}")
    assert failed > 0  # the fixture's required fields were found missing


def _convert(name: str, row: dict, tmp_path) -> list | str:
    got = convert_or_error(tmp_path, name, [row], SOURCES[name][2])
    return got if isinstance(got, str) else [p.to_row() for p in got]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_nan_field_converts_as_a_missing_one(name, tmp_path):
    """pandas writes a missing value in a float column as NaN: no converter may read it as the text
    "nan" (a uid `x/nan`, a hint or starter code "nan") or as a value; the row converts exactly as it
    does without that field."""
    rows = SOURCES[name][1]
    row = GPQA if rows is None else rows[0]
    if not isinstance(row, dict):
        return  # ORZ's rows are message pairs: no fields
    for key in row:
        without = {k: v for k, v in row.items() if k != key}
        assert _convert(name, {**row, key: float("nan")}, tmp_path) == _convert(name, without, tmp_path), key
