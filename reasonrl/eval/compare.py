"""Comparing two evaluations: `reasonrl eval compare A/results.json B/results.json`.

Owns: `compare_results` (per benchmark present in both: each side's mean@n, the difference B - A,
the combined 95% interval half-width 1.96 * sqrt(se_A^2 + se_B^2), and whether the difference
exceeds it) and its markdown table. Benchmarks found in only one file are listed, not compared.
results.json holds the standard error of mean@n only: compared on another metric (pass@k, maj@n),
the rows carry no interval (`ci95` None, `significant` None, "n/a" in the table) rather than borrow
mean@n's.
Does not own: computing the results (`eval.runner.summarize`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from reasonrl.errors import InputError

RESULT_FILES = ("results.json", "checkpoints.json")


def find_result_files(root: str | Path, depth: int = 4) -> list[Path]:
    """Every eval output (`results.json`, `checkpoints.json`) at most `depth` directories under root."""
    found = []
    for d in range(depth + 1):
        for name in RESULT_FILES:
            found.extend(Path(root).glob("/".join(["*"] * d + [name])))
    return sorted(found)


def load_results(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.is_file():
        raise InputError(f"results file not found: {p}")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), dict):
        raise InputError(f"{p}: not a reasonrl results.json (no 'benchmarks' table)")
    return data


def compare_results(a: dict, b: dict, metric: str = "mean@n") -> dict:
    ra, rb = a["benchmarks"], b["benchmarks"]
    rows = {}
    for name in [n for n in ra if n in rb]:
        x, y = ra[name], rb[name]
        if metric not in x or metric not in y:
            continue
        diff = y[metric] - x[metric]
        half = significant = None
        if metric == "mean@n":
            half = 1.96 * math.sqrt(x.get("se", 0.0) ** 2 + y.get("se", 0.0) ** 2)
            significant = abs(diff) > half
        rows[name] = {"a": x[metric], "b": y[metric], "diff": diff, "ci95": half, "significant": significant}
    only = sorted(set(ra) ^ set(rb))
    return {"metric": metric, "rows": rows, "only_in_one": only}


def comparison_markdown(c: dict) -> str:
    lines = [
        f"| benchmark | A {c['metric']} | B {c['metric']} | B - A | ±ci95 | beyond ci |",
        "|---" * 6 + "|",
    ]
    for name, r in c["rows"].items():
        half, beyond = (
            ("n/a", "n/a") if r["ci95"] is None else (f"{r['ci95']:.4f}", "yes" if r["significant"] else "no")
        )
        lines.append(f"| {name} | {r['a']:.4f} | {r['b']:.4f} | {r['diff']:+.4f} | {half} | {beyond} |")
    if c["only_in_one"]:
        lines += ["", "only in one file: " + ", ".join(c["only_in_one"])]
    return "\n".join(lines) + "\n"
