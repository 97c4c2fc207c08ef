"""Decoding a row's `ground_truth` (and other row fields) into plain Python, once for every verifier.

Rows arrive from parquet (numpy arrays and scalars), JSON files, or Reasoning360 / verl preprocessing
that stores structures as JSON strings. Owns: `plain` (numpy arrays / scalars -> lists / Python
scalars, recursively through dicts and lists), `single` (a one-element list -> its element),
`decoded` (plain, and a string that looks like a JSON list / object parsed, else left as it is) and
`json_value` (strict: a string must be JSON, else ValueError). Verifiers add only their own meaning
(an option letter, a gold number's text, table cells). Does not own: parsing model answers
(`rewards.extract`, `rewards.verifiers.logic.parse_structured`).
"""

from __future__ import annotations

import json
from typing import Any


def plain(x: Any) -> Any:
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def single(x: Any) -> Any:
    x = plain(x)
    return x[0] if isinstance(x, list) and len(x) == 1 else x


def decoded(x: Any) -> Any:
    x = plain(x)
    if isinstance(x, str) and x.strip()[:1] in ("[", "{"):
        try:
            return plain(json.loads(x))
        except ValueError:
            return x
    return x


def json_value(x: Any) -> Any:
    """`x` decoded when it is a JSON string (bytes too); anything else as plain Python."""
    if isinstance(x, (str, bytes)):
        try:
            return json.loads(x)
        except json.JSONDecodeError as e:
            raise ValueError(f"ground_truth is not JSON ({e.msg})") from None
    return plain(x)
