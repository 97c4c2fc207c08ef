"""Data files: reading rows from every format a reasoning dataset ships in, and writing rows atomically.

Owns: `read_rows(path)` (.parquet, .jsonl, .json (array or lines), .csv, a Hugging Face `datasets`
directory written by `save_to_disk`, and `hf:ORG/NAME[:CONFIG][@SPLIT]` hub ids through `datasets`,
which is imported only for those), `write_rows(path, rows)` and `write_text(path, text)` (temp file in
the target directory, fsync, rename, fsync of the directory: a crash never leaves a half-written
file; the package's atomic writes of single files go through them) and
`check_output(out, inputs)` (an output must not be one of the inputs). Errors are `InputError`s that
name the file and the line or row. Does not own: what a row means (`data.schema`, `types.Problem`).

Parquet rows keep `extra_info` a mapping (verl reads `extra_info.get(...)`). Keys whose values
parquet cannot store as one column type across rows (mixed types, structures of varying shape,
empty mappings) are written as JSON strings and listed in the file's schema metadata
(`reasonrl.json_keys`), and read back decoded; keys that a row lacks come back absent, not None.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reasonrl.errors import InputError

JSON_KEYS_META = b"reasonrl.json_keys"  # parquet schema metadata: extra_info keys stored as JSON text
ROW_FORMATS = (".parquet", ".jsonl", ".json", ".csv", ".jsonl.gz", ".json.gz")


# ----------------------------------------------------------------------------- reading


def read_rows(path: str | Path) -> list[dict]:
    """The rows of one data file (or `datasets` directory, or `hf:` hub id) as dicts, in the file's
    own columns. Errors name the file (and line): missing, empty, unreadable, invalid JSON."""
    if isinstance(path, str) and path.startswith("hf:"):
        return _hub_rows(path[3:])
    path = Path(path)
    if path.is_dir():
        if _is_hf_dataset_dir(path):
            return _dataset_dir_rows(path)
        raise InputError(
            f"{path} is a directory, not a data file (give .parquet / .jsonl / .json / .csv files "
            "or a directory written by datasets' save_to_disk)"
        )
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file (no rows)")
    if path.suffix == ".parquet":
        rows = _parquet_rows(path)
    elif path.suffix in (".jsonl", ".json") or "".join(path.suffixes[-2:]) in (".jsonl.gz", ".json.gz"):
        rows = _json_rows(path)
    elif path.suffix == ".csv":
        import csv

        # utf-8-sig: a byte-order mark is skipped, not read into the first column's name
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    else:
        raise InputError(f"{path}: unsupported extension (use {', '.join(ROW_FORMATS)})")
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def _parquet_rows(path: Path) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable parquet file ({str(e).splitlines()[0][:200]})") from None
    meta = table.schema.metadata or {}
    json_keys = json.loads(meta[JSON_KEYS_META]) if JSON_KEYS_META in meta else None
    rows = table.to_pylist()
    if json_keys is not None:  # written by us: drop struct-unification nulls, decode JSON-text keys
        for i, r in enumerate(rows):
            extra = r.get("extra_info")
            if isinstance(extra, dict):
                extra = {k: v for k, v in extra.items() if v is not None}
                for k in json_keys:
                    if k in extra:
                        try:
                            extra[k] = json.loads(extra[k])
                        except (TypeError, json.JSONDecodeError):
                            raise InputError(
                                f"{path} row {i}: field 'extra_info.{k}' is not valid JSON"
                            ) from None
                r["extra_info"] = extra
    return rows


def _json_rows(path: Path) -> list:
    data = path.read_bytes()
    if path.suffix == ".gz":  # HumanEval.jsonl.gz and the like
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: not a readable gzip file ({e})") from None
    suffix = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark, as some Windows tools write
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
    if suffix == ".json" and first.startswith("["):  # one JSON array of rows
        try:
            rows = json.loads("\n".join(texts))
        except json.JSONDecodeError as e:
            raise InputError(f"{path} line {e.lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(rows, list):
            raise InputError(f"{path}: expected a JSON array of rows")
        return rows
    if suffix == ".json" and first.startswith("{") and len([t for t in texts if t.strip()]) > 1:
        try:  # one (pretty-printed) JSON object: one row, e.g. an ARC task file
            return [json.loads("\n".join(texts))]
        except json.JSONDecodeError:
            pass  # JSON lines
    rows = []
    for i, line in enumerate(texts):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InputError(f"{path} line {i + 1}: invalid JSON ({e.msg})") from None
    return rows


def _is_hf_dataset_dir(path: Path) -> bool:
    return any((path / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json"))


def _datasets():
    try:
        import datasets
    except ImportError:
        raise InputError(
            "reading a Hugging Face datasets directory or hub id needs the optional package: "
            "pip install 'reasonrl[data]'"
        ) from None
    return datasets


def _dataset_dir_rows(path: Path) -> list[dict]:
    """A `save_to_disk` directory: one Dataset, or a DatasetDict (one split: its rows; several:
    name the split as DIR/SPLIT)."""
    datasets = _datasets()
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - datasets raises many types for a damaged directory
        raise InputError(
            f"{path}: not a readable datasets directory ({str(e).splitlines()[0][:200]})"
        ) from None
    if isinstance(ds, datasets.DatasetDict):
        if len(ds) != 1:
            raise InputError(f"{path}: has splits {sorted(ds)}; give one of them as {path}/SPLIT")
        ds = next(iter(ds.values()))
    rows = ds.to_list()
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def parse_hub_id(spec: str) -> tuple[str, str | None, str]:
    """'org/name[:config][@split]' -> (name, config, split); the split defaults to 'train'."""
    name, _, split = spec.partition("@")
    name, _, config = name.partition(":")
    if name.count("/") != 1 or not all(name.split("/")):
        raise InputError(f"hf:{spec}: a hub id is ORG/NAME[:CONFIG][@SPLIT]")
    return name, (config or None), (split or "train")


def _hub_rows(spec: str) -> list[dict]:
    from reasonrl.models.hub import offline_unless_reachable

    name, config, split = parse_hub_id(spec)
    offline_unless_reachable(name)  # a hub it cannot reach: the local cache only, without retries
    datasets = _datasets()
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # noqa: BLE001
        raise InputError(f"hf:{spec}: could not load from the hub ({str(e).splitlines()[0][:200]})") from None
    return ds.to_list()


# ----------------------------------------------------------------------------- writing


def check_output(out: str | Path, inputs: Iterable[str | Path]) -> Path:
    """`out` as a Path, refusing one of the inputs (a command never overwrites its input) or an
    unsupported extension."""
    out = Path(out)
    if out.suffix not in (".parquet", ".jsonl"):
        raise InputError(f"{out}: output must be .parquet or .jsonl")
    for p in inputs:
        if not str(p).startswith("hf:") and Path(p).exists() and Path(p).resolve() == out.resolve():
            raise InputError(f"{out}: output is also an input; write to a new file")
    return out


def _plain(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    return x


def _json_default(x: Any) -> Any:
    if hasattr(x, "tolist"):  # numpy arrays and scalars from parquet
        return x.tolist()
    raise TypeError(f"a value of type {type(x).__name__} cannot be written as JSON")


def _uniform(values: list[Any]) -> bool:
    """True if parquet can store these values (None allowed) as one column: all the same scalar
    type, or all flat lists of one scalar type."""
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, (str, bool, int, float)):
            kinds.add(type(v))
        elif isinstance(v, list) and all(isinstance(x, (str, bool, int, float)) for x in v):
            kinds.add(("list", *sorted({type(x).__name__ for x in v})) if v else ("list",))
        else:
            return False
    lists = {k for k in kinds if isinstance(k, tuple)}
    if lists:  # an empty list matches any list type
        members = {m for k in lists for m in k[1:]}
        return len(kinds) == len(lists) and len(members) <= 1
    return len(kinds) <= 1


def parquet_table(rows: list[dict]):
    """An arrow table of verl rows with `extra_info` a struct column (see the module doc)."""
    import pyarrow as pa

    rows = [dict(r) for r in rows]
    json_keys: list[str] = []
    if any("extra_info" in r for r in rows):
        extras = [{k: _plain(v) for k, v in (r.get("extra_info") or {}).items()} for r in rows]
        keys = list(dict.fromkeys(k for e in extras for k in e))
        json_keys = [k for k in keys if not _uniform([e.get(k) for e in extras])]
        for r, e in zip(rows, extras):
            for k in json_keys:
                if k in e:
                    e[k] = json.dumps(e[k])
            r["extra_info"] = e if keys else None
    try:
        table = pa.Table.from_pylist(rows)
    except (pa.ArrowException, TypeError) as e:
        raise InputError(f"rows cannot be written as parquet ({str(e).splitlines()[0][:200]})") from None
    return table.replace_schema_metadata({**(table.schema.metadata or {}),
                                          JSON_KEYS_META: json.dumps(json_keys).encode()})  # fmt: skip


def write_rows(path: str | Path, rows: list[dict]) -> None:
    """Write rows to .parquet or .jsonl atomically (temp file, fsync, rename, fsync the directory)."""
    path = Path(path)
    if path.suffix not in (".parquet", ".jsonl", ".json"):
        raise InputError(f"{path}: unsupported extension (use .parquet or .jsonl)")
    table = parquet_table(rows) if path.suffix == ".parquet" else None

    def write(tmp: Path) -> None:
        if table is not None:
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(r, default=_json_default, ensure_ascii=False) + "\n")

    replace_atomically(path, write)


def write_text(path: str | Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) atomically: a reader or a crash sees the old file or the new
    one, never a part (temp file beside it, fsync, rename, fsync the directory)."""
    replace_atomically(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def replace_atomically(path: Path, write) -> None:
    """`write(tmp)` a temp file in path's directory, fsync it, rename it over path, fsync the directory;
    the temp file is removed if anything fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        if tmp.exists():
            tmp.unlink()
