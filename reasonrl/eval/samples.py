"""An eval's samples file and its setup record: the rows written, and reading them back on a resume.

Owns the format of
  samples.jsonl   one line per sample (`sample_rows`: benchmark, problem index, uid, sample index,
                  prompt, completion, extracted answer, score, reason, completion tokens, finish
                  reason; with tool calls also answer_text, the text scored, and tool_calls), written one chunk of problems at a time; a chunk is committed by a marker line
                  {"committed": benchmark, "chunk": first problem index} written (and fsynced) after
                  its samples. `committed_samples` keeps the committed chunks and cuts a torn or
                  uncommitted tail (what a kill leaves); anything else wrong in the file (a line that
                  is not a JSON object before its end, a sample without its fields, a chunk committed
                  twice, a marker for samples of another benchmark) is damage no kill makes: an
                  InputError names the line and the file is left as it is, instead of tables computed
                  from half a file or from samples counted twice.
  samples.setup.json   what the samples are of (`check_setup`): a resume with another setup is refused.
Does not own: generating the samples or the table computed from them (`eval.runner`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from reasonrl.data.files import write_text
from reasonrl.errors import InputError

# the fields the table is computed from (`eval.runner.summarize`) and their JSON types
_FIELDS: dict[str, tuple[type, ...]] = {"benchmark": (str,), "problem": (int,), "sample": (int,),
                                        "score": (int, float), "finish_reason": (str, type(None)),
                                        "reason": (str, type(None))}  # fmt: skip


def sample_rows(bench: str, first: int, groups) -> list[dict]:
    """The samples.jsonl rows of a chunk whose first problem has index `first`. A sample's score is its
    correctness, not the training reward: in-training validation scores with the run's runner, whose
    `reward.weights` may add shaping terms (a length penalty would make a solved sample fail pass@k)."""
    return [{"benchmark": bench, "problem": first + i, "uid": g.problem.uid, "sample": j,
             "prompt": g.problem.user_text, "completion": comp.text, "extracted": res.extracted,
             "score": float(res.correctness), "reason": res.info.get("reason"), "tokens": len(comp.token_ids),
             "finish_reason": comp.finish_reason,
             # with tool calls: the model's own text, which the verifiers scored, and the calls' statuses
             **({"answer_text": comp.model_text, "tool_calls": list(comp.tool_calls)} if comp.tool_calls else {}),
             # after feedback (rollout.interaction): the attempts, and the last one's text, which was scored
             **({"answer_text": comp.model_text, "turns": comp.turns} if comp.turns > 1 else {}),
             # an environment's episode (rollout.tools.environment): its reward, which a rescore takes again
             **({"env_reward": comp.env_reward, "env_reason": comp.env_reason} if comp.env_reason else {}),
             **({"tool_rewards": list(comp.tool_rewards)} if comp.tool_rewards else {}),
             # what TRL reward functions taking environments= gave beside the instance (a rescore reads it)
             **({"env_functions": comp.env_functions} if comp.env_functions is not None else {})}
            for i, g in enumerate(groups)
            for j, (comp, res) in enumerate(zip(g.completions, g.results))]  # fmt: skip


def problem_groups(samples: list[dict]) -> dict[str, list[list[dict]]]:
    """Per benchmark, each problem's samples in sample order (problems in index order), every group cut
    to the n samples all of its benchmark's problems have: what the table counts (`runner.summarize`)
    and what `eval compare` pairs."""
    by_bench: dict[str, dict[int, list[dict]]] = {}
    for s in samples:
        by_bench.setdefault(s["benchmark"], {}).setdefault(int(s["problem"]), []).append(s)
    out = {}
    for name, problems in by_bench.items():
        groups = [sorted(g, key=lambda s: s["sample"]) for _, g in sorted(problems.items())]
        n = min(len(g) for g in groups)
        out[name] = [g[:n] for g in groups]
    return out


def commit_marker(bench: str, first: int) -> dict:
    return {"committed": bench, "chunk": first}


def _problem(row: Any) -> str | None:
    """What is wrong with a samples.jsonl row (None: a sample or a marker as written)."""
    if not isinstance(row, dict):
        return f"not a JSON object: {json.dumps(row)[:60]}"
    if "committed" in row:
        if not isinstance(row["committed"], str):
            return "field 'committed': must be a benchmark name"
        chunk = row.get("chunk")
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 0:
            return f"field 'chunk': must be a problem index, got {chunk!r}"
        return None
    for name, types in _FIELDS.items():
        if name not in row:
            return f"field {name!r}: missing"
        value = row[name]
        if not isinstance(value, types) or isinstance(value, bool):
            return f"field {name!r}: must be {' or '.join(t.__name__ for t in types)}, got {value!r}"
    if not math.isfinite(row["score"]):
        return f"field 'score': must be a finite number, got {row['score']!r}"
    if min(row["problem"], row["sample"]) < 0:
        return "fields 'problem' and 'sample': indices must not be negative"
    return None


def committed_samples(path: Path, mend: bool = True) -> tuple[list[dict], set[tuple[str, int]]]:
    """The samples of committed chunks and the set of (benchmark, chunk) done; rewrites the file
    without a torn or uncommitted tail (unless `mend` is False: readers that only read). InputError
    (the file untouched) on damage a kill cannot make."""
    if not path.is_file():
        return [], set()
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    kept, pending, samples, done = [], [], [], set()
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line) if line.endswith("\n") else None
        except json.JSONDecodeError:
            row = None
        if row is None and n == len(lines):
            break  # a torn last line: the kill came mid-write
        problem = "not a complete JSON line" if row is None else _problem(row)
        if problem is None and "committed" in row:
            key = (row["committed"], row["chunk"])
            others = sorted({s["benchmark"] for _, s in pending} - {key[0]})
            if key in done:
                problem = f"benchmark {key[0]!r} chunk {key[1]} is committed twice"
            elif others:
                problem = f"the chunk committed for {key[0]!r} holds samples of {others[0]!r}"
        if problem is not None:
            raise InputError(f"{path} line {n}: {problem}; the file is damaged (no interrupted eval "
                             "leaves this): mend it, or move it away to generate its samples again")  # fmt: skip
        if "committed" in row:
            done.add(key)
            samples.extend(s for _, s in pending)
            kept.extend([*(x for x, _ in pending), line])
            pending = []
        else:
            pending.append((line, row))
    if mend and len(kept) != len(lines):
        write_text(path, "".join(kept))
    return samples, done


def check_setup(samples_path: Path, setup: dict) -> None:
    """Refuse to add to `samples_path` if it holds samples of another setup (InputError naming what
    differs); otherwise record `setup` beside it (atomically)."""
    path = samples_path.with_name(samples_path.stem + ".setup.json")
    if samples_path.is_file() and samples_path.stat().st_size and path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            old = e
        if not isinstance(old, dict) or not isinstance(old.get("benchmarks", {}), dict):
            raise InputError(f"{path}: not the setup record an eval writes ({str(old)[:80]}), so the samples "
                             f"beside it cannot be checked; move {samples_path.name} away to start over")  # fmt: skip
        diffs = [
            f"{k}: {old.get(k)!r} there, {setup.get(k)!r} now"
            for k in dict.fromkeys([*setup, *old])  # a key on one side only (verifier options) differs too
            if k != "benchmarks" and old.get(k) != setup.get(k)
        ]
        theirs = old.get("benchmarks", {})
        for name, mine in setup["benchmarks"].items():
            if name in theirs and theirs[name] != mine:
                keys = [
                    k for k in mine if not isinstance(theirs[name], dict) or theirs[name].get(k) != mine[k]
                ]
                diffs.append(f"benchmark {name}: different {' and '.join(keys)}")
        if diffs:
            raise InputError(f"{samples_path}: holds samples of another setup ({'; '.join(diffs)}); resume with "
                             "the same settings, or write to a new output directory")  # fmt: skip
        setup = {**setup, "benchmarks": {**theirs, **setup["benchmarks"]}}  # benchmarks added to an eval
    write_text(path, json.dumps(setup, indent=1))
