"""Reading and writing problems as verl / Reasoning360 (Guru) rows.

Owns: `read_problems(path)`, `write_problems(path, problems)` (atomic, `extra_info` kept a mapping),
`load_problems(paths)`, `problems_from_rows` (rows -> Problems, errors naming the file, row and
field; `skip_bad=True` leaves bad rows out and returns what was skipped and why) and
`decode_guru_row` (Guru's second packaging, `LLM360/guru-RL-92k-extra-info-compressed`: `extra_info`
as string chunks `part_1..part_N` of base64(gzip(JSON)), `reward_model.ground_truth` as
{`compressed`: base64(gzip(JSON))}). Does not own: file formats (`data.files`) or the row <->
Problem mapping itself (`types.Problem.to_row/from_row`).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

from reasonrl.data.files import read_rows, write_rows
from reasonrl.errors import InputError
from reasonrl.types import Problem

_PART = re.compile(r"part_(\d+)$")


def write_problems(path: str | Path, problems: list[Problem]) -> None:
    rows = [p.to_row() for p in problems]
    if Path(path).suffix == ".parquet":
        for r in rows:  # ground truths of mixed types are JSON strings (as Reasoning360 does for code tests)
            gt = r["reward_model"]["ground_truth"]
            if not isinstance(gt, str):
                r["reward_model"]["ground_truth"] = json.dumps(gt)
                r["extra_info"] = {**r["extra_info"], "ground_truth_json": True}
    write_rows(path, rows)


def read_problems(path: str | Path, skip_bad: bool = False, report: list | None = None) -> list[Problem]:
    """Problems of one data file (see `data.files.read_rows` for the formats). Every error names
    the file, and the row and field where there is one. With `skip_bad`, bad rows are left out and
    (row index, reason) pairs appended to `report`."""
    return problems_from_rows(read_rows(path), path, skip_bad=skip_bad, report=report)


def _unpack(blob: str, where: str, field: str):
    try:
        return json.loads(gzip.decompress(base64.b64decode(blob)))
    except (ValueError, OSError, EOFError) as e:
        raise InputError(f"{where}: field {field!r} is not base64(gzip(JSON)) ({e})") from None


def decode_guru_row(row: dict, where: str = "row") -> dict:
    """A row of Guru's compressed packaging decoded to the plain form; other rows unchanged."""
    extra = row.get("extra_info")
    rm = row.get("reward_model")
    out = row
    if isinstance(extra, dict) and extra and all(_PART.match(k) for k in extra):
        parts = sorted(((int(_PART.match(k).group(1)), v) for k, v in extra.items() if v is not None))
        out = {**out, "extra_info": _unpack("".join(v for _, v in parts), where, "extra_info")}
    if isinstance(rm, dict) and set(rm) - {"style"} == {"compressed"} and isinstance(rm["compressed"], str):
        gt = _unpack(rm["compressed"], where, "reward_model.ground_truth.compressed")
        out = {**out, "reward_model": {**rm, "ground_truth": gt}}
        out["reward_model"].pop("compressed")
    return out


_VERL_FIELDS = {"data_source", "prompt", "raw_prompt", "reward_model"}  # none of them: another format


def problems_from_rows(rows: list[dict], path: str | Path, skip_bad: bool = False,
                       report: list | None = None) -> list[Problem]:  # fmt: skip
    """verl / Reasoning360 rows -> Problems; errors name `path` and the row."""
    out = []
    for i, row in enumerate(rows):
        where = f"{path} row {i}"
        try:
            p = Problem.from_row(decode_guru_row(row, where) if isinstance(row, dict) else row, where=where)
            if p.extra_info.pop("ground_truth_json", False):
                try:
                    p.ground_truth = json.loads(p.ground_truth)
                except (TypeError, json.JSONDecodeError):
                    raise InputError(
                        f"{where}: field 'reward_model.ground_truth' is not valid JSON"
                    ) from None
        except InputError as e:
            if not skip_bad:
                if isinstance(row, dict) and not _VERL_FIELDS & set(row):
                    raise InputError(f"{e} (a dataset in its own format? convert it first: reasonrl data prepare "
                                     f"CONVERTER --input {path} --out FILE.parquet; converters: reasonrl data "
                                     "list)") from None  # fmt: skip
                raise
            if report is not None:
                report.append((i, str(e)))
            continue
        out.append(p)
    return out


def load_problems(paths: list[str], skip_bad: bool = False) -> list[Problem]:
    out: list[Problem] = []
    for p in paths:
        out.extend(read_problems(p, skip_bad=skip_bad))
    return out
