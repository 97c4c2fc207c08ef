"""Shared by the converter tests: rows written as a jsonl file and converted."""

from __future__ import annotations

import json

from reasonrl.data.prepare import convert_files


def convert_jsonl(tmp_path, name: str, rows: list, options: dict | None = None):
    """(problems, path) of `rows` written to `<tmp_path>/<name>.jsonl` and converted by converter `name`."""
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return convert_files(name, [str(src)], options)[0], str(src)
