"""Recipes of other trainers as reasonrl recipes: what the verl and TRL readers share.

Owns: `Converted` (the recipe being built and the notes on what was left out or derived), value
conversions (`choice`, `parse_value`: a Hydra / YAML value as Python), `read_source`, and `convert`
(dispatch by trainer). Does not own: each trainer's keys (`config.from_verl`, `config.from_trl`), the
config itself (`config.sections`), checking the result (`load_config`) or writing it (`cli.convert`).
docs/porting.md is the user's side of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasonrl.errors import InputError

SOURCES = ("verl", "trl")


@dataclass
class Converted:
    recipe: dict[str, Any] = field(default_factory=dict)  # nested, as a recipe file holds it
    notes: list[str] = field(default_factory=list)  # what was left out or derived, one line each

    def set(self, dotted: str, value: Any) -> None:
        node = self.recipe
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value


def choice(table: dict[str, Any], what: str) -> Callable[[Any], Any]:
    def convert(value):
        key = str(value).lower() if isinstance(value, str) else value
        if key not in table:
            raise ValueError(
                f"{what} {value!r} has no reasonrl equivalent (known: {', '.join(map(str, table))})"
            )
        return table[key]

    return convert


def off_if_negative(value):  # verl's -1 = "not set" for frequencies and counts
    return 0 if value is None or int(value) < 0 else int(value)


def as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def parse_value(text: str) -> Any:
    """A Hydra override's value: bool / null / int / float / [list] / a string."""
    import yaml

    t = text.strip()
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", t):
        return float(t) if any(c in t for c in ".eE") else int(t)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.lower() in ("null", "none", "~"):
        return None
    if t.startswith("[") and t.endswith("]"):
        try:
            return [parse_value(str(x)) if isinstance(x, str) else x for x in yaml.safe_load(t)]
        except yaml.YAMLError:
            pass
    return t


def read_source(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    return p.read_text(encoding="utf-8", errors="replace")


def convert(source: str, path: str | Path) -> Converted:
    """The recipe for `path`, a verl launch script (source "verl") or a TRL config file ("trl")."""
    if source == "verl":
        from reasonrl.config.from_verl import convert_verl

        return convert_verl(read_source(path))
    if source == "trl":
        from reasonrl.config.from_trl import convert_trl

        return convert_trl(path)
    raise InputError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")
