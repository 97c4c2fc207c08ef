"""Converters of public reasoning datasets into verl / Reasoning360 rows: `reasonrl data prepare
SOURCE --input PATH... --out FILE`.

Owns: the `CONVERTERS` registry (one small module per source registers itself on import), the
`Converter` record (its row function, where the data comes from, the options it takes), `RowError`
(a bad field, named in the error with file and row), and `convert_file` / `prepare`: read every
input (`data.files`), convert row by row (bad rows fail with file, row index and field, or are
skipped and reported with `skip_bad`), check that every problem routes to a verifier, and write
atomically. Does not own: prompt wording (`prepare.prompts`), file formats (`data.files`), scoring.

A row function is `fn(row, ctx) -> Problem | list[Problem] | None` (None: dropped on purpose, e.g. a
repeat, counted in the report); a row that is a JSON array arrives as {"conversations": [...]};
`ctx.index` is the row's index, `ctx.options` the converter's
options, `ctx.state` a dict kept across the rows of one run (for deduplication).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from math import isfinite  # (`import math` would not do: the submodule `math` takes that name)
from pathlib import Path
from typing import Any

from reasonrl.errors import InputError
from reasonrl.registry import Registry
from reasonrl.types import Problem, missing


class RowError(InputError):
    """A row of a source file lacks a field or has a bad value: `field` names it."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"field {field_name!r}: {message}")
        self.field = field_name


@dataclass
class Context:
    options: dict[str, Any]
    index: int = 0
    source: str = ""  # the file being converted
    state: dict[str, Any] = field(default_factory=dict)
    routed: set[str] = field(default_factory=set)  # verifiers whose options were checked (`check_route`)


RowFn = Callable[[dict, Context], "Problem | list[Problem] | None"]


# options every converter takes: data_source (route the rows elsewhere), system (a system message put
# first in every prompt that has none, e.g. telling the model of a tool: docs/rollouts.md "Tool use")
COMMON_OPTIONS = ("data_source", "system")


@dataclass(frozen=True)
class Converter:
    name: str
    row: RowFn
    source: str  # the public source (HF id / file) and the fields read
    options: dict[str, Any] = field(default_factory=dict)  # option -> default

    def resolve_options(self, given: dict[str, Any] | None) -> dict[str, Any]:
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.options) - set(COMMON_OPTIONS))
        if unknown:
            raise InputError(
                f"converter {self.name}: unknown option(s) {unknown}; "
                f"known: {sorted(self.options) + list(COMMON_OPTIONS)}"
            )
        return {**self.options, **given}


CONVERTERS: Registry[Converter] = Registry("converter")


def register(name: str, source: str, **options: Any) -> Callable[[RowFn], RowFn]:
    def deco(fn: RowFn) -> RowFn:
        CONVERTERS.register(name)(Converter(name, fn, source, options))
        return fn

    return deco


def need(row: dict, *names: str) -> Any:
    """The first of `names` present in `row` (a NaN field was dropped by `convert_rows`); RowError naming
    the first otherwise."""
    for n in names:
        if row.get(n) is not None:
            return row[n]
    alt = f" (or {', '.join(repr(n) for n in names[1:])})" if len(names) > 1 else ""
    raise RowError(names[0], f"missing{alt}")


def text(row: dict, *names: str) -> str:
    value = need(row, *names)
    if not isinstance(value, (str, int, float)) or not str(value).strip():
        raise RowError(names[0], f"must be non-empty text, got {type(value).__name__}")
    if isinstance(value, float) and not isfinite(value):
        raise RowError(names[0], f"must be non-empty text, got {value!r}")
    return str(value).strip()


def load_all() -> None:
    """Import every converter module (each registers itself)."""
    for mod in pkgutil.iter_modules(__path__):
        if mod.name != "prompts":
            importlib.import_module(f"{__name__}.{mod.name}")


@dataclass
class Report:
    rows_in: int = 0
    rows_out: int = 0
    dropped: int = 0  # left out on purpose by the converter (repeats)
    bad: list[tuple[str, int, str]] = field(default_factory=list)  # (file, row, reason)
    counts: dict[str, int] = field(default_factory=dict)  # what a converter counted (`count`), by name

    def as_dict(self) -> dict[str, Any]:
        return {"rows_in": self.rows_in, "rows_out": self.rows_out, "dropped": self.dropped, **self.counts,
                "bad_rows": len(self.bad), "bad_examples": [f"{f} row {i}: {r}" for f, i, r in self.bad[:20]]}  # fmt: skip


def count(ctx: Context, what: str) -> None:
    """Count one `what` (e.g. DAPO's repeats with another answer) for the run's report."""
    counts = ctx.state.setdefault("counts", {})
    counts[what] = counts.get(what, 0) + 1


def convert_rows(conv: Converter, rows: list[dict], where: str, ctx: Context, report: Report,
                 skip_bad: bool = False) -> list[Problem]:  # fmt: skip
    from reasonrl.rewards import VERIFIERS
    from reasonrl.rewards.routing import check_route
    from reasonrl.rewards.verifiers.unverified import NONE

    out: list[Problem] = []
    for i, row in enumerate(rows):
        report.rows_in += 1
        ctx.index = i
        if isinstance(row, list):  # a JSON array row (ORZ's message pairs)
            row = {"conversations": row}
        try:
            if not isinstance(row, dict):
                raise InputError(f"a row must be a mapping, got {type(row).__name__}")
            # a NaN field (pandas' missing value) is an absent one: never the text "nan" of a uid, hint
            # or starter code, nor a value that a converter's `row.get(key, default)` passes on
            row = {k: v for k, v in row.items() if not missing(v)}
            got = conv.row(row, ctx)
            got = [] if got is None else got if isinstance(got, list) else [got]
            for p in got:
                if ctx.options.get("data_source"):
                    p.data_source = ctx.options["data_source"]
                if ctx.options.get("system") and not any(m.get("role") == "system" for m in p.prompt):
                    p.prompt = [{"role": "system", "content": str(ctx.options["system"])}, *p.prompt]
                # (a row with no checkable answer: SFT data, refused where scored; a row routed to a verifier
                # whose options only a run's recipe gives, e.g. trl_function's functions: checked at load)
                own = VERIFIERS.get(p.verifier) if p.verifier and p.verifier != NONE else None
                if p.verifier != NONE and not getattr(own, "configured_by_run", False):
                    # every problem must route to a verifier; its label must work there, unless the converter
                    # was asked for rows without one (option labels=false: reward.pseudo_label votes them)
                    check_route(p, checked=ctx.routed, label=ctx.options.get("labels") is not False)
        except InputError as e:
            msg = str(e).removeprefix("row: ")  # pass-through converters' Problem.from_row(where="row")
            if not skip_bad:
                raise InputError(f"{where} row {i}: {msg}") from None
            report.bad.append((where, i, msg))
            continue
        if not got:
            report.dropped += 1
            continue
        out.extend(got)
    return out


def convert_files(name: str, inputs: list[str], options: dict[str, Any] | None = None,
                  skip_bad: bool = False, limit: int | None = None) -> tuple[list[Problem], Report]:  # fmt: skip
    """Problems converted from `inputs` by converter `name`, and the report. Every problem is
    checked to route to a registered verifier (a bad one fails, or is skipped with `skip_bad`)."""
    from reasonrl.data.files import read_rows

    load_all()
    conv = CONVERTERS.get(name)
    ctx = Context(conv.resolve_options(options))
    report = Report()
    problems: list[Problem] = []
    for path in inputs:
        rows = read_rows(path)
        ctx.source = str(path)
        problems.extend(convert_rows(conv, rows, str(path), ctx, report, skip_bad))
        if limit and len(problems) >= limit:
            problems = problems[:limit]
            break
    report.rows_out = len(problems)
    report.counts = dict(ctx.state.get("counts", {}))
    return problems, report


def prepare(name: str, inputs: list[str], out: str | Path, options: dict[str, Any] | None = None,
            skip_bad: bool = False, limit: int | None = None) -> dict[str, Any]:  # fmt: skip
    """Convert `inputs` with converter `name` and write `out` atomically; returns the report."""
    from reasonrl.data.files import check_output
    from reasonrl.data.schema import write_problems

    if not inputs:
        raise InputError(f"data prepare {name}: give at least one --input file")
    out = check_output(out, inputs)
    problems, report = convert_files(name, inputs, options, skip_bad, limit)
    if not problems:
        raise InputError(f"data prepare {name}: no rows converted from {', '.join(map(str, inputs))}")
    write_problems(out, problems)
    return {"source": name, "out": str(out), **report.as_dict()}
