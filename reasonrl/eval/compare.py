"""Comparing two evaluations: `reasonrl eval compare A/results.json B/results.json`.

Owns: `compare_results` (per benchmark present in both: each side's mean@n, the difference B - A,
the combined 95% interval half-width 1.96 * sqrt(se_A^2 + se_B^2), and whether the difference
exceeds it) and its markdown table. Benchmarks found in only one file are listed, not compared.
results.json holds the standard error of mean@n only: compared on another metric (pass@k, maj@n),
the rows carry no interval (`ci95` None, `significant` None, "n/a" in the table) rather than borrow
mean@n's. Where the evaluations' `samples.setup.json` files sit beside their results, a benchmark
evaluated on different problems (the problems' fingerprint) or with different sampling settings on the
two sides is named under the table ("not like for like"): its difference measures the setup as much as
the model; so is a benchmark whose samples on either side hold verifier errors or timeouts (scored 0
without a verdict: `verifier_errors`).
Where both evaluations' samples.jsonl sit beside their results and hold the same problems (index and uid)
with per-problem scores that reproduce each table's mean@n, mean@n rows also carry the paired interval:
1.96 * the standard error of the per-problem differences (B - A). Two models scored on the same
problems are correlated (both solve the easy ones), so the paired interval is the narrower, right one
for "is B better on this benchmark"; the combined interval above treats the sides as independent
samples and is kept beside it.
Does not own: computing the results (`eval.runner.summarize`), the samples file's format (`eval.samples`).
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
    for name, row in data["benchmarks"].items():
        if not isinstance(row, dict):
            raise InputError(f"{p}: benchmark {name!r}: not a row of metrics")
        for key, value in row.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise InputError(f"{p}: benchmark {name!r}: {key!r} is not a number ({value!r})")
    return data


def load_setup(path: str | Path) -> dict | None:
    """The `samples.setup.json` beside a results file (or in an output directory); None when absent
    or unreadable (results copied without their samples)."""
    p = Path(path)
    setup = (p if p.is_dir() else p.parent) / "samples.setup.json"
    try:
        data = json.loads(setup.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("benchmarks"), dict) else None


def load_problem_scores(path: str | Path) -> dict[str, dict[str, float]] | None:
    """{benchmark: {"index:uid": mean score of its first n samples}} from the samples.jsonl beside a
    results file (n: the fewest samples any of the benchmark's problems has, as the table counts);
    committed chunks only, the file left as it is. None when absent or damaged."""
    from reasonrl.eval.samples import committed_samples, problem_groups

    p = Path(path)
    try:
        rows, _ = committed_samples((p if p.is_dir() else p.parent) / "samples.jsonl", mend=False)
    except (OSError, InputError):
        return None
    return {
        name: {f"{g[0]['problem']}:{g[0].get('uid')}": sum(s["score"] for s in g) / len(g) for g in groups}
        for name, groups in problem_groups(rows).items()
    }


def paired_interval(
    x: dict[str, float] | None, y: dict[str, float] | None, mean_x: float, mean_y: float
) -> float | None:
    """1.96 * the standard error of the per-problem differences y - x, or None where the two sides do not
    hold the same problems, or where their scores do not reproduce the tables' means (samples that
    belong to another results file)."""
    from reasonrl.eval.metrics import standard_error

    if not x or not y or set(x) != set(y):
        return None
    if abs(sum(x.values()) / len(x) - mean_x) > 1e-9 or abs(sum(y.values()) / len(y) - mean_y) > 1e-9:
        return None
    return 1.96 * standard_error([y[k] - x[k] for k in sorted(x)])


def setup_differences(sa: dict | None, sb: dict | None, name: str) -> list[str]:
    """How benchmark `name` was evaluated differently on the two sides: "problems" (another problem
    set), "KEY A vs B" per sampling setting; [] when alike or when either side's setup is unknown."""
    x = (sa or {}).get("benchmarks", {}).get(name)
    y = (sb or {}).get("benchmarks", {}).get(name)
    if not isinstance(x, dict) or not isinstance(y, dict):
        return []
    out = ["problems"] if x.get("fingerprint") != y.get("fingerprint") else []
    px, py = (s if isinstance(s := side.get("sampling"), dict) else {} for side in (x, y))
    out += [
        f"{k} {px.get(k)!r} vs {py.get(k)!r}" for k in sorted(set(px) | set(py)) if px.get(k) != py.get(k)
    ]
    return out


def compare_results(
    a: dict, b: dict, metric: str = "mean@n", setups: tuple = (None, None), scores: tuple = (None, None)
) -> dict:
    """`setups`: the two sides' samples.setup.json contents (`load_setup`), where known; `scores`: their
    per-problem scores (`load_problem_scores`), where known."""
    ra, rb = a["benchmarks"], b["benchmarks"]
    rows = {}
    for name in [n for n in ra if n in rb]:
        x, y = ra[name], rb[name]
        if metric not in x or metric not in y:
            continue
        diff = y[metric] - x[metric]
        half = significant = paired = None
        if metric == "mean@n":
            half = 1.96 * math.sqrt(x.get("se", 0.0) ** 2 + y.get("se", 0.0) ** 2)
            significant = abs(diff) > half
            sx, sy = ((s or {}).get(name) for s in scores)
            paired = paired_interval(sx, sy, x[metric], y[metric])
        rows[name] = {"a": x[metric], "b": y[metric], "diff": diff, "ci95": half, "significant": significant,
                      "paired_ci95": paired, "paired_significant": None if paired is None else abs(diff) > paired,
                      "differs": setup_differences(*setups, name),
                      "verifier_errors": (x.get("verifier_errors", 0.0), y.get("verifier_errors", 0.0))}  # fmt: skip
    only = sorted(set(ra) ^ set(rb))
    return {"metric": metric, "rows": rows, "only_in_one": only}


def _interval_cells(half: float | None, beyond: bool | None) -> list[str]:
    return ["n/a", "n/a"] if half is None else [f"{half:.4f}", "yes" if beyond else "no"]


def comparison_markdown(c: dict) -> str:
    """The table; the paired columns only where some row has a paired interval."""
    paired = any(r.get("paired_ci95") is not None for r in c["rows"].values())
    head = ["benchmark", f"A {c['metric']}", f"B {c['metric']}", "B - A", "±ci95", "beyond ci"]
    head += ["±paired ci95", "beyond paired ci"] if paired else []
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, r in c["rows"].items():
        cells = [name, f"{r['a']:.4f}", f"{r['b']:.4f}", f"{r['diff']:+.4f}"]
        cells += _interval_cells(r["ci95"], r["significant"])
        if paired:
            cells += _interval_cells(r.get("paired_ci95"), r.get("paired_significant"))
        lines.append("| " + " | ".join(cells) + " |")
    unlike = {name: r["differs"] for name, r in c["rows"].items() if r.get("differs")}
    if unlike:
        lines += ["", "not like for like: " + "; ".join(f"{n} ({', '.join(d)})" for n, d in unlike.items())]
    # samples scored 0 without a verdict: part of a difference may be the verifier's, not the model's
    failing = {n: r["verifier_errors"] for n, r in c["rows"].items() if any(r.get("verifier_errors") or ())}
    if failing:
        lines += ["", "verifier errors or timeouts (scored 0, not measured; rerun the eval to score errors again): "
                  + "; ".join(f"{n} (A {a:.1%}, B {b:.1%})" for n, (a, b) in failing.items())]  # fmt: skip
    if c["only_in_one"]:
        lines += ["", "only in one file: " + ", ".join(c["only_in_one"])]
    return "\n".join(lines) + "\n"
