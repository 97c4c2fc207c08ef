"""What the viewer reads from run directories: metric curves, rollout groups and eval tables.

Owns: finding runs (a run directory holds `metrics.jsonl`; a directory of runs is expanded one level),
reading `metrics.jsonl` into columns, `rollouts.jsonl` into searchable group records, and any eval
suite `results.json` / `checkpoints.json` under a run; re-reading a file only when its size or mtime
changed (a live run keeps appending). Read-only: nothing here opens a file for writing, and a torn last
line (a run killed mid-write) is skipped, not an error.
Does not own: serving them (`viewer.server`) or writing them (`trainer.metrics`, `eval.runner`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from reasonrl.errors import InputError
from reasonrl.eval.compare import find_result_files as _eval_files
from reasonrl.trainer.metrics import iter_jsonl


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Run directories named by `paths`: each is a run (it has metrics.jsonl) or a directory whose
    children are runs. A path that is neither is an InputError naming it."""
    runs: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise InputError(f"{p}: not a directory (expected a run directory or a directory of runs)")
        if (p / "metrics.jsonl").is_file() or (p / "rollouts.jsonl").is_file():
            runs.append(p)
            continue
        children = sorted(c for c in p.iterdir() if c.is_dir() and (c / "metrics.jsonl").is_file())
        if not children and not _eval_files(p):
            raise InputError(f"{p}: no metrics.jsonl here or in its subdirectories: not a run directory")
        runs.extend(children or [p])
    seen: set[Path] = set()
    return [r for r in runs if not (r.resolve() in seen or seen.add(r.resolve()))]


def _json_lines(path: Path) -> list[dict]:
    return [row for _, row in iter_jsonl(path) if row is not None]  # a torn last line is skipped


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


@dataclass
class _Cached:
    stamp: tuple[int, int] | None = None
    value: object = None


@dataclass
class Run:
    """One run directory, read lazily and re-read when its files change."""

    path: Path
    name: str
    _cache: dict[str, _Cached] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _read(self, key: str, path: Path, parse):
        stamp = _stamp(path)
        with self._lock:
            c = self._cache.setdefault(key, _Cached())
            if c.stamp != stamp:
                c.value = parse(path) if stamp is not None else parse(None)
                c.stamp = stamp
            return c.value

    def metrics(self) -> dict:
        """{"steps": [...], "series": {key: [value or None per step]}} (columns, one row per logged step)."""
        return self._read("metrics", self.path / "metrics.jsonl", _metric_columns)

    def groups(self) -> list[dict]:
        """rollouts.jsonl's per-group records, each with a lower-cased search text."""
        return self._read("rollouts", self.path / "rollouts.jsonl", _group_records)

    def evals(self) -> list[dict]:
        """Every eval table under the run: {"file": relative path, "kind": results | checkpoints, ...}."""
        out = []
        for f in _eval_files(self.path):
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            rel = str(f.relative_to(self.path))
            if f.name == "results.json" and isinstance(data, dict) and "benchmarks" in data:
                out.append({"file": rel, "kind": "results", "benchmarks": data["benchmarks"],
                            "macro": data.get("macro") or {}})  # fmt: skip
            elif f.name == "checkpoints.json" and (rows := _checkpoint_rows(data)) is not None:
                out.append({"file": rel, "kind": "checkpoints", "rows": rows})
        return out


def _checkpoint_rows(data) -> list[dict] | None:
    """`reasonrl eval --all-checkpoints`' table ({step: {benchmark: mean@n}}) as rows [{"step": s,
    benchmark: mean@n, ...}] in step order; None for anything else."""
    if not isinstance(data, dict) or not all(k.isdigit() and isinstance(v, dict) for k, v in data.items()):
        return None
    return [{"step": int(k), **data[k]} for k in sorted(data, key=int)]


def _metric_columns(path: Path | None) -> dict:
    rows = _json_lines(path) if path is not None else []
    by_step: dict[int, dict] = {}
    for r in rows:  # a resumed step logged twice keeps its last values
        if isinstance(r.get("step"), int):
            by_step.setdefault(r["step"], {}).update(r)
    steps = sorted(by_step)
    keys = sorted({k for r in by_step.values() for k in r if k != "step"})
    series = {}
    for k in keys:
        col = [by_step[s].get(k) for s in steps]
        if any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in col):
            series[k] = [v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in col]
    return {"steps": steps, "series": series}


def _group_records(path: Path | None) -> list[dict]:
    out = []
    for i, r in enumerate(_json_lines(path) if path is not None else []):
        comps = r.get("completions")
        if not isinstance(comps, list):  # an older single-completion row: one completion
            comps = [
                {k: r.get(k) for k in ("text", "reward", "reason", "extracted", "tokens", "finish_reason")}
            ]
        comps = [c for c in comps if isinstance(c, dict)]
        rewards = [float(c["reward"]) for c in comps if isinstance(c.get("reward"), (int, float))]
        text = " ".join([str(r.get("prompt") or ""), str(r.get("ground_truth") or "")]
                        + [str(c.get("text") or "") for c in comps])  # fmt: skip
        out.append({
            "id": i,
            "step": r.get("step"),
            "uid": r.get("uid"),
            "data_source": r.get("data_source") or "",
            "prompt": r.get("prompt") or "",
            "ground_truth": r.get("ground_truth"),
            **({"pseudo_label": r["pseudo_label"]} if "pseudo_label" in r else {}),  # (reward.pseudo_label)
            "completions": comps,
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "_text": text.lower(),
        })  # fmt: skip
    return out


@dataclass
class RolloutQuery:
    step: int | None = None
    data_source: str | None = None
    min_reward: float | None = None  # on the group's mean reward
    max_reward: float | None = None
    text: str | None = None  # case-insensitive substring of prompt, ground truth or any completion
    offset: int = 0
    limit: int = 50

    def matches(self, g: dict) -> bool:
        if self.step is not None and g["step"] != self.step:
            return False
        if self.data_source and g["data_source"] != self.data_source:
            return False
        m = g["mean_reward"]
        if self.min_reward is not None and (m is None or m < self.min_reward):
            return False
        if self.max_reward is not None and (m is None or m > self.max_reward):
            return False
        return not self.text or self.text.lower() in g["_text"]


def query_rollouts(groups: list[dict], q: RolloutQuery) -> dict:
    """One page of the groups that match, newest step first, with the total count and the facets (steps
    and data sources present) the filter form offers."""
    hits = [g for g in groups if q.matches(g)]
    hits.sort(key=lambda g: (-(g["step"] if isinstance(g["step"], int) else -1), g["id"]))
    page = [{k: v for k, v in g.items() if k != "_text"} for g in hits[q.offset : q.offset + q.limit]]
    steps = sorted({g["step"] for g in groups if isinstance(g["step"], int)})
    sources = sorted({g["data_source"] for g in groups if g["data_source"]})
    return {"total": len(hits), "offset": q.offset, "groups": page, "steps": steps, "data_sources": sources}
