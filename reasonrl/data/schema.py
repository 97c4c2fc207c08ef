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
            raise ValueError(f"{path}: unsupported extension (use .parquet or .jsonl)")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_problems(path: str | Path) -> list[Problem]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    elif path.suffix in (".jsonl", ".json"):
        rows = []
        with open(path) as f:
            for i, line in enumerate(f):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{path} line {i + 1}: invalid JSON ({e.msg})") from None
    else:
        raise ValueError(f"{path}: unsupported extension (use .parquet or .jsonl)")
    out = []
    for i, row in enumerate(rows):
        p = Problem.from_row(row, where=f"{path} row {i}")
        if p.extra_info.pop("ground_truth_json", False):
            p.ground_truth = json.loads(p.ground_truth)
        out.append(p)
    return out


def load_problems(paths: list[str]) -> list[Problem]:
    out: list[Problem] = []
    for p in paths:
        out.extend(read_problems(p))
    return out
