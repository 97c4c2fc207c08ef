"""Shared by the converter tests: rows written as a jsonl file and converted."""

from __future__ import annotations

import json
import re

from reasonrl.data.prepare import convert_files
from reasonrl.errors import InputError


def convert_jsonl(tmp_path, name: str, rows: list, options: dict | None = None):
    """(problems, path) of `rows` written to `<tmp_path>/<name>.jsonl` and converted by converter `name`."""
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return convert_files(name, [str(src)], options)[0], str(src)


def convert_or_error(tmp_path, name: str, rows: list, options: dict | None = None) -> list | str:
    """The problems that converter `name` makes of `rows` (written as a jsonl file), or its InputError's
    text without the `FILE row N: ` prefix. json writes NaN as the bare `NaN`, which json reads back."""
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        return convert_files(name, [str(src)], options)[0]
    except InputError as e:
        return re.sub(r"^.* row \d+: ", "", str(e), count=1)
