"""`reasonrl data stats FILE...`: what a data file holds, before training on it.

Owns: rows per data_source and per ability, the verifier each data_source routes to (or why it does
not route), prompt-length percentiles (tokens after the chat template with `--tokenizer`, else
characters), and a histogram of every pass-rate column (`*pass_rate`) in Reasoning360's bins.
Does not own: reading files (`data.files`, `data.schema`).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from reasonrl.types import Problem

# Reasoning360 model_filtering's difficulty bins
PASS_RATE_BINS = [
    ("impossible (0)", lambda r: r == 0.0),
    ("very hard (0, 0.2)", lambda r: 0.0 < r < 0.2),
    ("hard [0.2, 0.4)", lambda r: 0.2 <= r < 0.4),
    ("medium [0.4, 0.6)", lambda r: 0.4 <= r < 0.6),
    ("easy [0.6, 0.8)", lambda r: 0.6 <= r < 0.8),
    ("very easy [0.8, 1)", lambda r: 0.8 <= r < 1.0),
    ("perfect (1)", lambda r: r == 1.0),
]


def percentiles(values: list[int], qs=(0, 50, 90, 99, 100)) -> dict[str, float]:
    if not values:
        return {}
    s = sorted(values)
    out = {}
    for q in qs:
        k = (len(s) - 1) * q / 100
        lo, hi = int(k), min(int(k) + 1, len(s) - 1)
        out[f"p{q}"] = s[lo] + (s[hi] - s[lo]) * (k - lo)
    out["mean"] = sum(s) / len(s)
    return out


def pass_rate_columns(rows: list[dict]) -> list[str]:
    return sorted({k for r in rows for k in r if k.endswith("pass_rate")})


def pass_rate_histogram(rows: list[dict], column: str) -> dict[str, int]:
    """Rows per bin, "missing" (no value), and "not a rate in [0, 1]" (NaN, out of range, not a number;
    present only when some row is), so the counts always add up to the rows."""
    hist = {name: 0 for name, _ in PASS_RATE_BINS}
    hist["missing"] = invalid = 0
    for r in rows:
        v = r.get(column)
        if v is None:
            hist["missing"] += 1
            continue
        try:
            rate = float(v)
        except (TypeError, ValueError):
            rate = math.nan
        name = next((name for name, test in PASS_RATE_BINS if test(rate)), None)
        if name is None:
            invalid += 1
        else:
            hist[name] += 1
    if invalid:
        hist["not a rate in [0, 1]"] = invalid
    return hist


def stats(rows: list[dict], problems: list[Problem], tokenizer=None) -> dict[str, Any]:
    from reasonrl.rewards.routing import verifier_name

    routes: dict[str, str] = {}
    for p in problems:
        if p.data_source not in routes:
            try:
                routes[p.data_source] = verifier_name(p)
            except ValueError as e:
                routes[p.data_source] = f"NOT ROUTED ({str(e).split(';')[0]})"
    if tokenizer is not None:
        from reasonrl.data.prompts import encode_prompt

        lengths, unit = [len(encode_prompt(tokenizer, p)) for p in problems], "tokens"
    else:
        lengths, unit = [sum(len(str(m.get("content", ""))) for m in p.prompt) for p in problems], "chars"
    return {
        "rows": len(problems),
        "data_source": dict(Counter(p.data_source for p in problems).most_common()),
        "ability": dict(Counter(p.ability or "-" for p in problems).most_common()),
        "routes": routes,
        f"prompt_{unit}": percentiles(lengths),
        "pass_rate": {c: pass_rate_histogram(rows, c) for c in pass_rate_columns(rows)},
    }


def render(s: dict[str, Any]) -> str:
    lines = [f"rows: {s['rows']}", "", "data_source                              rows  verifier"]
    for ds, n in s["data_source"].items():
        lines.append(f"  {ds:<38} {n:>5}  {s['routes'].get(ds, '')}")
    lines += ["", "ability: " + ", ".join(f"{a} {n}" for a, n in s["ability"].items())]
    for key in ("prompt_tokens", "prompt_chars"):
        if key in s:
            lines.append(f"{key.replace('_', ' ')}: " + "  ".join(f"{k} {v:.0f}" for k, v in s[key].items()))
    for col, hist in s["pass_rate"].items():
        lines += ["", f"{col}:"] + [f"  {name:<20} {n:>6}" for name, n in hist.items()]
    return "\n".join(lines)
