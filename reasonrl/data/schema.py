"""Reading and writing problems as verl / Reasoning360 parquet or jsonl rows.

Owns: `read_problems(path)`, `write_problems(path, problems)` (atomic: temp file then rename), and
`load_problems(paths)`. Errors name the file and row. Does not own: the row <-> Problem mapping
(`types.Problem.to_row/from_row`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from reasonrl.errors import InputError
from reasonrl.types import Problem


def _atomic_target(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def write_problems(path: str | Path, problems: list[Problem]) -> None:
    path = Path(path)
    rows = [p.to_row() for p in problems]
    tmp = _atomic_target(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            # ground truths of mixed types are stored as JSON strings (as Reasoning360 does for code tests)
            for r in rows:
                gt = r["reward_model"]["ground_truth"]
                if not isinstance(gt, str):
                    r["reward_model"]["ground_truth"] = json.dumps(gt)
                    r["extra_info"] = {**r["extra_info"], "ground_truth_json": True}
                r["extra_info"] = json.dumps(r["extra_info"])
            pq.write_table(pa.Table.from_pylist(rows), tmp)
        elif path.suffix in (".jsonl", ".json"):
            with open(tmp, "w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
        else:
            raise InputError(f"{path}: unsupported extension (use .parquet or .jsonl)")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_problems(path: str | Path) -> list[Problem]:
    """Problems of one .parquet / .jsonl / .json file (a JSON array or JSON lines). Every error names
    the file, and the row (and field) where there is one: a missing file, a directory, an empty file,
    invalid UTF-8 or JSON, a row of the wrong shape (see `Problem.from_row`)."""
    path = Path(path)
    if path.suffix not in (".parquet", ".jsonl", ".json") and path.is_file():
        raise InputError(f"{path}: unsupported extension (use .parquet, .jsonl or .json)")
    return problems_from_rows(read_rows(path), path)


def problems_from_rows(rows: list[dict], path: str | Path) -> list[Problem]:
    """verl / Reasoning360 rows -> Problems; errors name `path` and the row."""
    out = []
    for i, row in enumerate(rows):
        p = Problem.from_row(row, where=f"{path} row {i}")
        if p.extra_info.pop("ground_truth_json", False):
            p.ground_truth = json.loads(p.ground_truth)
        out.append(p)
    return out


def read_rows(path: str | Path) -> list[dict]:
    """The rows of one .parquet / .jsonl / .json / .csv file as dicts, in the file's own columns.
    Errors name the file (and line): missing, a directory, empty, unreadable, invalid JSON."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a data file (give .parquet / .jsonl / .json files)")
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file (no rows)")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as e:
            raise InputError(
                f"{path}: not a readable parquet file ({str(e).splitlines()[0][:200]})"
            ) from None
    elif path.suffix in (".jsonl", ".json"):
        rows = _json_rows(path)
    elif path.suffix == ".csv":
        import csv

        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    else:
        raise InputError(f"{path}: unsupported extension (use .parquet, .jsonl, .json or .csv)")
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def _json_rows(path: Path) -> list:
    data = path.read_bytes()
    lines = data.splitlines()
    texts = []
    for i, raw in enumerate(lines):
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InputError(
                f"{path} line {i + 1}: invalid UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
            ) from None
    first = next((t.lstrip() for t in texts if t.strip()), "")
    if path.suffix == ".json" and first.startswith("["):  # one JSON array of rows
        try:
            rows = json.loads("\n".join(texts))
        except json.JSONDecodeError as e:
            raise InputError(f"{path} line {e.lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(rows, list):
            raise InputError(f"{path}: expected a JSON array of rows")
        return rows
    rows = []
    for i, line in enumerate(texts):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InputError(f"{path} line {i + 1}: invalid JSON ({e.msg})") from None
    return rows


def load_problems(paths: list[str]) -> list[Problem]:
    out: list[Problem] = []
    for p in paths:
        out.extend(read_problems(p))
    return out
