"""Difficulty filtering by pass rate, Reasoning360's model_filtering on one machine:
`reasonrl data passrate FILE --model M --out OUT` and `reasonrl data filter FILE --range COL=LO:HI --out OUT`.

Owns: `pass_rates` (n samples per prompt from a model and engine, scored by the same verifiers as
training, through the eval suite's resumable generate-and-score path `eval.runner.generate_samples`;
a sample counts as solved when its score >= `correct_threshold`, 1.0 as Reasoning360, so partial
credit is a fail; a sample whose verifier call failed is no fail: the rates are refused until a rerun
scores it, `eval.rescore`, or `--allow-verifier-errors` counts it unsolved), `add_pass_rate_column`
(the rate stored in a column named after the model, `<model>_pass_rate`, every other column of the
input kept as it is), and `filter_rows` (keep rows whose rate in each named column lies in [low, high];
Reasoning360's Guru filter `drop if strong <= 1e-5 or weak >= 0.9` is `--range
strong_pass_rate=0.00001:1 --range weak_pass_rate=0:0.9`), plus the
prompt-length filter (tokens after the chat template), and `solutions` (the solving samples as SFT rows:
rejection-sampling fine-tuning, or a teacher's traces distilled). Does not own: generation, scoring, files.

Resumable: samples go to `<out>.work/<column>/samples.jsonl` chunk by chunk (each chunk committed by
an fsynced marker, seeded by (seed, chunk) only), so a killed run resumes where it stopped and ends
with exactly the pass rates of an uninterrupted one.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from reasonrl.errors import InputError
from reasonrl.rollout.base import SamplingParams
from reasonrl.types import Problem


def column_name(model: str) -> str:
    """`<model basename>_pass_rate` with anything but letters, digits, '.', '-' and '_' replaced."""
    base = Path(model.rstrip("/")).name or model
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base) + "_pass_rate"


def work_dir(out: str | Path, column: str) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".work") / column


def pass_rates(model: str, problems: list[Problem], samples_path: str | Path, params: SamplingParams, *,
               engine: str = "hf", device: str = "auto", seed: int = 0, chunk_size: int = 16,
               correct_threshold: float = 1.0, reward_options: dict | None = None, plugins=(),
               log=print, progress=None, allow_verifier_errors: bool = False) -> list[float]:  # fmt: skip
    """The fraction of `params.n` samples that solve each problem (in order). Samples whose verifier call
    failed (and failed again when this call scored them again) refuse the rates, unless
    `allow_verifier_errors` counts them unsolved (a verifier that chokes on some answers for good)."""
    from reasonrl.eval.rescore import common_error, failed_samples
    from reasonrl.eval.runner import generate_samples

    samples = generate_samples(model, [("passrate", problems, params)], samples_path, engine=engine, device=device,
                               seed=seed, chunk_size=chunk_size, log=log, reward_options=reward_options,
                               plugins=plugins, progress=progress)  # fmt: skip
    solved: dict[int, list[bool]] = {}
    for s in samples:
        solved.setdefault(int(s["problem"]), []).append(float(s["score"]) >= correct_threshold)
    missing = [i for i in range(len(problems)) if len(solved.get(i, [])) != params.n]
    if missing:  # never silently a wrong rate
        raise RuntimeError(f"{samples_path}: problems {missing[:5]} lack samples; delete the file and rerun")
    failed = failed_samples(samples)
    what = (
        f"{len(failed)} of {len(samples)} samples ended in a verifier error (e.g. {common_error(failed)!r})"
    )
    if failed and not allow_verifier_errors:  # a failed verifier call is no fail of the model
        raise InputError(
            f"{samples_path}: {what}, so their problems' pass rates are unknown and nothing was written; fix the "
            "verifier (or its service) and run the same command again (the samples are kept, and only those are "
            "scored again), or pass --allow-verifier-errors to count them unsolved"
        )
    if failed:
        log(f"warning: {samples_path}: {what}; counted unsolved (--allow-verifier-errors)")
    return [sum(solved[i]) / params.n for i in range(len(problems))]


def solutions(problems: list[Problem], samples: list[dict], per_problem: int, threshold: float = 1.0,
              model: str = "") -> tuple[list[Problem], dict[str, int]]:  # fmt: skip
    """Rejection sampling for SFT (`--solutions`): each problem's solving samples (score >= `threshold`,
    ended by the model, not cut at max tokens), distinct texts in sample order, at most `per_problem`, as
    copies of the problem whose `extra_info.response` is the sample (what algo.objective=sft trains on),
    `extra_info.response_model` the model; a second solution's uid gets `#2`, and so on. With the counts."""
    by_problem: dict[int, list[dict]] = {}
    for row in sorted(samples, key=lambda r: (int(r["problem"]), int(r["sample"]))):
        by_problem.setdefault(int(row["problem"]), []).append(row)
    out, truncated = [], 0
    for i, p in enumerate(problems):
        texts: list[str] = []
        for row in by_problem.get(i, []):
            if float(row["score"]) < threshold or not row["completion"].strip():
                continue
            if row.get("finish_reason") == "length":  # solved, but cut: no end token to learn
                truncated += 1
            elif row["completion"] not in texts:
                texts.append(row["completion"])
        for j, text in enumerate(texts[:per_problem]):
            extra = {**p.extra_info, "response": text, "response_model": model}
            out.append(replace(p, extra_info=extra, uid=p.uid if j == 0 else f"{p.uid}#{j + 1}"))
    solved = len({p.uid.split("#")[0] for p in out})
    return out, {"solutions": len(out), "problems_solved": solved, "solved_but_truncated": truncated}


def add_pass_rate_column(rows: list[dict], column: str, rates: list[float]) -> list[dict]:
    return [{**r, column: float(v)} for r, v in zip(rows, rates, strict=True)]


def parse_range(spec: str) -> tuple[str, float, float]:
    """'COL=LOW:HIGH' -> (col, low, high)."""
    col, eq, bounds = spec.partition("=")
    low, colon, high = bounds.partition(":")
    try:
        lo, hi = float(low), float(high)
    except ValueError:
        lo = hi = None
    if not eq or not colon or not col or lo is None or not 0 <= lo <= hi <= 1:
        raise InputError(f"--range {spec!r}: expected COLUMN=LOW:HIGH with 0 <= LOW <= HIGH <= 1")
    return col, lo, hi


def filter_rows(
    rows: list[dict], ranges: list[tuple[str, float, float]], where: str
) -> tuple[list[dict], dict[str, Any]]:
    """Rows whose rate in every named column lies in [low, high]; a missing rate is an error naming
    the row and column (checked for every row before anything is kept)."""
    columns = set().union(*(r.keys() for r in rows)) if rows else set()
    for col, _, _ in ranges:
        if rows and col not in columns:
            rates = sorted(c for c in columns if c.endswith("_pass_rate"))
            raise InputError(f"{where}: no column {col!r}; pass-rate columns: {', '.join(rates) or 'none'}")
    for i, r in enumerate(rows):
        for col, _, _ in ranges:
            v = r.get(col)
            if not isinstance(v, (int, float)) or not 0 <= float(v) <= 1:
                raise InputError(f"{where} row {i}: column {col!r} has no pass rate in [0, 1] (got {v!r})")
    kept, dropped = [], {f"{c} outside [{lo}, {hi}]": 0 for c, lo, hi in ranges}
    for r in rows:
        out = next(((c, lo, hi) for c, lo, hi in ranges if not lo <= float(r[c]) <= hi), None)
        if out is None:
            kept.append(r)
        else:
            dropped[f"{out[0]} outside [{out[1]}, {out[2]}]"] += 1
    return kept, {"rows_in": len(rows), "rows_out": len(kept), "dropped": dropped}


def length_filter(
    rows: list[dict], problems: list[Problem], tokenizer, max_tokens: int
) -> tuple[list[dict], int]:
    """Rows whose templated prompt has at most `max_tokens` tokens, and how many were dropped."""
    from reasonrl.data.prompts import encode_prompt

    kept = [r for r, p in zip(rows, problems, strict=True) if len(encode_prompt(tokenizer, p)) <= max_tokens]
    return kept, len(rows) - len(kept)
