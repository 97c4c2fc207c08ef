"""Running benchmarks: generate with a rollout engine, score with the shared verifiers, write samples and
a results table; resumable.

Owns: `run_benchmarks` and the output directory's files:
  samples.jsonl   the samples, written one chunk of problems at a time and committed by a marker line
                  (format, resume and damage checks: `eval.samples`). A resumed eval keeps the
                  committed chunks and generates only the rest; each chunk's seed depends only on
                  (seed, benchmark, chunk), so the resumed table equals an uninterrupted one.
  samples.setup.json   what the samples are of (model, engine, seed, chunk size, and per benchmark its
                  problems' fingerprint and sampling settings); a resume with any of these changed is
                  refused before generating, naming what differs (its chunks would mix with the old
                  ones into one table, or, with another chunk size, repeat some problems' samples).
  results.json / results.md   `summarize(samples)`: a row per benchmark (see `eval.metrics`).
  timing.json     where this invocation's time went: seconds in total, generating, scoring (on the
                  scoring thread), waiting for scoring, and the rest (loading the model, starting the
                  verifier workers, files); `verifier_ready_s`: from starting the verifier workers to
                  their first answer (their imports); chunks generated and samples per second. Not part of the
                  table (a resumed eval times only what it generated); `timing_line` prints it.
Every input is checked before anything is generated: benchmark names, files, rows, routing.
Does not own: the metrics (`eval.metrics`), the samples file's format (`eval.samples`), benchmark
files (`eval.benchmarks`), the engines or verifiers (`rollout`, `rewards`; generation and scoring go
through `rollout.scored.generate_and_score`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from reasonrl.data.files import write_text
from reasonrl.eval.benchmarks import Benchmark, load_benchmark
from reasonrl.eval.metrics import answer_key, macro_average, maj_at_k, pass_at_k, standard_error
from reasonrl.eval.rescore import common_error, failed_samples, rescore_failed
from reasonrl.eval.samples import check_setup, commit_marker, committed_samples, problem_groups, sample_rows
from reasonrl.rewards.health import failed_share, failure_warning
from reasonrl.rollout.base import SamplingParams


def _chunk_seed(seed: int, bench: str, chunk: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{bench}:{chunk}".encode()).digest()[:6], "little")


def sampling_for(b: Benchmark, overrides: dict) -> SamplingParams:
    p = SamplingParams(n=b.n, temperature=b.temperature, top_p=b.top_p, max_new_tokens=b.max_new_tokens)
    p = replace(p, **{k: v for k, v in overrides.items() if v is not None})
    return replace(p, top_p=1.0) if p.temperature <= 0 else p


def run_benchmarks(model: str, benchmarks: list[Benchmark], out_dir: str | Path, *, data_dir=None,
                   files: dict[str, str] | None = None, overrides: dict | None = None, engine: str = "hf",
                   device: str = "auto", seed: int = 0, limit: int | None = None, chunk_size: int = 32,
                   log=print, progress=None, workers: int | None = None,
                   reward_options: dict | None = None, template_kwargs: dict | None = None,
                   tools=None, interaction=None, agent=None) -> dict:  # fmt: skip
    """`reward_options`: {verifier: {option: value}}, as a recipe's reward.options (recorded in
    samples.setup.json and under the table). `template_kwargs`: chat-template arguments for every prompt
    (a row's own win), as a recipe's data.chat_template_kwargs (in each benchmark's fingerprint).
    `tools`: a `ToolsConfig` (rollout.tools): the code completions write runs, as in training.
    `interaction`: an `InteractionConfig` (rollout.interaction): a wrong first answer gets feedback and
    another attempt; the last attempt is scored (undiscounted: the table says whether it was right).
    `agent`: an `AgentConfig` (rollout.agent): each sample an episode of the OpenRLHF agent, its last turn
    scored by the benchmark's verifier (the agent's reward kept with the sample)."""
    from reasonrl.data.prompts import with_template_kwargs
    from reasonrl.rewards import check_routable
    from reasonrl.rollout.function_tools import with_function_schemas

    if tools is not None:  # the functions' and MCP tools' schemas in every prompt, as in training
        template_kwargs = with_function_schemas(dict(template_kwargs or {}), tools)
    files, overrides = dict(files or {}), dict(overrides or {})
    work = []
    for b in benchmarks:  # every input checked before any generation
        problems = with_template_kwargs(
            load_benchmark(b, data_dir, files.get(b.name), limit), template_kwargs
        )
        check_routable(problems, f"benchmark {b.name}", reward_options)
        work.append((b.name, problems, sampling_for(b, overrides)))
    from reasonrl.rewards.services import check_services
    from reasonrl.rollout.environments import check_environment_functions

    check_environment_functions(reward_options, tools.environment if tools is not None else None)
    check_services([p for _, ps, _ in work for p in ps], reward_options, log=log)  # a judge, SandboxFusion
    out = Path(out_dir)
    timing: dict = {}
    samples = generate_samples(model, work, out / "samples.jsonl", engine=engine, device=device, seed=seed,
                               chunk_size=chunk_size, log=log, progress=progress, timing=timing,
                               workers=workers, reward_options=reward_options, tools=tools,
                               template_kwargs=template_kwargs, interaction=interaction, agent=agent)  # fmt: skip
    failed = failed_samples(samples)
    if failed:  # counted as wrong in the table; a rerun scores just these again
        log(f"warning: {len(failed)} samples ended in a verifier error (e.g. {common_error(failed)!r}), so the "
            "table counts them wrong (verifier_errors); run the same command again once the verifier works: "
            "only those samples are scored again")  # fmt: skip
    results = summarize(samples, {b.name: b.domain for b in benchmarks})
    notes = {b.name: b.note for b in benchmarks if b.note}
    if reward_options:  # a reader comparing tables must see that the verifiers were set otherwise
        notes["verifier options"] = ", ".join(
            f"{name}.{k}={json.dumps(v)}"
            for name, kw in sorted(reward_options.items())
            for k, v in sorted(kw.items())
        )
    if template_kwargs:  # and that the prompts were rendered otherwise
        notes["chat template"] = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(template_kwargs.items()))
    if notes:
        results["notes"] = notes
    write_text(out / "results.json", json.dumps(results, indent=1))
    write_text(out / "results.md", results_markdown(results))
    write_text(out / "timing.json", json.dumps(timing, indent=1))
    return results


def timing_line(out_dir: str | Path) -> str | None:
    """One line from OUT/timing.json (None when this invocation generated nothing)."""
    path = Path(out_dir) / "timing.json"
    t = json.loads(path.read_text()) if path.is_file() else {}
    if not t.get("chunks"):
        return None
    return (f"time: {t['total_s']:.1f}s = generating {t['generate_s']:.1f}s + waiting for scoring "
            f"{t['score_wait_s']:.1f}s + the rest {t['other_s']:.1f}s (scoring itself {t['score_s']:.1f}s; "
            f"verifier workers ready after {t.get('verifier_ready_s', 0.0):.1f}s); "
            f"{t['samples_per_s']:.1f} samples/s")  # fmt: skip


def generate_samples(model: str, work: list[tuple[str, list, SamplingParams]], samples_path: str | Path, *,
                     engine: str = "hf", device: str = "auto", seed: int = 0, chunk_size: int = 32,
                     log=print, reward_options: dict | None = None, plugins=(), progress=None,
                     overlap: bool | None = None, timing: dict | None = None,
                     workers: int | None = None, tools=None, template_kwargs: dict | None = None,
                     interaction=None, agent=None) -> list[dict]:  # fmt: skip
    """Samples of every (name, problems, sampling) work item, generated and scored chunk by chunk into
    `samples_path` (resumable: committed chunks are kept, the rest generated; committed samples whose
    verifier call failed are scored again, `eval.rescore`); the one path of the
    eval suite and the pass-rate filter. `progress(done, total)` (chunks) is called as chunks commit.
    `overlap`: score each chunk beside the next one's generation (default: when the model is not on a
    CPU, where the verifier workers would take generation's cores); the samples are the same.
    `timing`, if given, is filled with where this call's time went (see timing.json above). `workers`:
    verifier worker processes (default `rewards.runner.default_workers()`: the cores but one, 2-16);
    the scores do not depend on it. `tools`: a `ToolsConfig` (rollout.tools), recorded in the setup
    (`template_kwargs`, the prompts' chat-template arguments, render its turns with turn: chat_template)."""
    from reasonrl.rollout.factory import check_available

    check_available(engine, "--engine")  # library callers too: before any file is touched or model loaded
    t0 = time.perf_counter()
    samples_path = Path(samples_path)
    samples_path.parent.mkdir(parents=True, exist_ok=True)
    check_setup(
        samples_path,
        eval_setup(model, work, engine, seed, chunk_size, reward_options, tools, interaction, agent),
    )
    samples, done = committed_samples(samples_path)
    # samples whose verifier call failed (a service that was down) are scored again, not generated again
    rescore_failed(samples_path, samples, work, model, reward_options=reward_options, plugins=plugins,
                   workers=workers, log=log)  # fmt: skip
    todo = [(name, c) for name, ps, _ in work for c in range(0, len(ps), chunk_size) if (name, c) not in done]
    clock = timing if timing is not None else {}
    clock.update(generate_s=0.0, score_s=0.0, score_wait_s=0.0, verifier_ready_s=0.0, chunks=0, samples=0)
    if todo:
        _generate(model, work, todo, samples_path, samples, engine, device, seed, chunk_size, log,
                  reward_options or {}, tuple(plugins), progress, overlap, clock, workers, tools,
                  template_kwargs, interaction, agent)  # fmt: skip
    total = time.perf_counter() - t0
    clock.update(total_s=total, other_s=total - clock["generate_s"] - clock["score_wait_s"],
                 samples_per_s=clock["samples"] / total if total > 0 else 0.0)  # fmt: skip
    return samples


def eval_setup(model, work, engine: str, seed: int, chunk_size: int, reward_options: dict | None = None,
               tools=None, interaction=None, agent=None) -> dict:  # fmt: skip
    """What a samples file is of: everything that decides which samples its chunks hold (and, when
    given, the verifier options that scored them)."""
    benches = {}
    for name, problems, params in work:
        h = hashlib.sha256()
        for p in problems:
            # (a prompt's chat-template arguments only when it has some: older fingerprints stay valid)
            own = [p.chat_template_kwargs] if p.chat_template_kwargs else []
            h.update(json.dumps([p.uid, p.prompt, p.ground_truth, *own], default=str).encode())
        benches[name] = {"problems": len(problems), "fingerprint": h.hexdigest()[:16],
                         "sampling": json.loads(json.dumps(asdict(params), default=str))}  # fmt: skip
    setup = {
        "model": str(model),
        "engine": engine,
        "seed": seed,
        "chunk_size": chunk_size,
        "benchmarks": benches,
    }
    if reward_options:  # only when given: the setup files of evals without options stay as they were
        setup["verifier_options"] = json.loads(json.dumps(reward_options, default=str))
    if tools is not None:  # likewise (and a tool turn from the chat template, other tools: only when asked)
        from reasonrl.config import ToolsConfig

        usual = {k: v for k, v in asdict(ToolsConfig()).items() if k in ("turn", "names", "search")}
        setup["tools"] = {k: v for k, v in asdict(tools).items() if k not in usual or v != usual[k]}
    if interaction is not None:  # likewise
        setup["interaction"] = json.loads(json.dumps(asdict(interaction), default=str))
    if agent is not None:  # likewise
        setup["agent"] = asdict(agent)
    return setup


def _generate(model, work, todo, samples_path, samples, engine_name, device, seed, chunk_size, log,
              reward_options, plugins, progress, overlap, clock: dict, workers: int | None, tools,
              template_kwargs=None, interaction=None, agent=None) -> None:  # fmt: skip

    from reasonrl.models.loading import load_policy
    from reasonrl.rewards.runner import RewardRunner, default_workers, preload_modules
    from reasonrl.rollout.factory import build_rollout_engine
    from reasonrl.rollout.scored import generate_groups, score_groups

    first = [problems[0] for _, problems, _ in work]
    # verifier workers start (and import what their verifiers preload) while the model loads
    t_workers = time.perf_counter()
    scorer = RewardRunner(workers=workers or default_workers(), options=reward_options, modules=plugins,
                          preload=preload_modules(first)).start()  # fmt: skip
    try:
        policy, tok = load_policy(model, device=device, log=log)
        if interaction is not None:  # (its turn from the chat template: refused here, before any generation)
            from reasonrl.rollout.interaction import Interaction

            interaction = Interaction(interaction, tok, template_kwargs)
            overlap = False  # the attempts are scored on the way: one scoring at a time
        engine = build_rollout_engine(engine_name, policy, tok, tools=tools, template_kwargs=template_kwargs,
                                      agent=agent)  # fmt: skip
    except BaseException:
        scorer.close()
        raise
    want = set(todo)
    if overlap is None:  # on a CPU, overlapping measured no gain, often a loss (docs/evaluation.md)
        overlap = next(policy.parameters()).device.type != "cpu"
    t0, finished = time.monotonic(), 0
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reasonrl-eval-score")
    pending = None  # (future of the previous chunk's scoring, what to write for it)

    def timed_score(groups) -> None:
        t = time.perf_counter()
        score_groups(groups, tok, scorer)
        clock["score_s"] += time.perf_counter() - t

    def commit(job) -> None:
        nonlocal finished
        future, (name, c, groups, total) = job
        t = time.perf_counter()
        future.result()
        clock["score_wait_s"] += time.perf_counter() - t
        rows = sample_rows(name, c, groups)
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
        f.write(json.dumps(commit_marker(name, c)) + "\n")
        f.flush()
        os.fsync(f.fileno())
        samples.extend(rows)
        finished += 1
        clock["chunks"] += 1
        clock["samples"] += len(rows)
        spent = time.monotonic() - t0
        eta = spent / finished * (len(want) - finished)
        log(f"{name}: {min(c + chunk_size, total)}/{total} problems "
            f"[{finished}/{len(want)} chunks, {spent:.0f}s, ETA {eta:.0f}s]")  # fmt: skip
        if progress is not None:
            progress(finished, len(want))

    try:
        with scorer, open(samples_path, "a", encoding="utf-8") as f:
            # warm up every routed verifier (lazy imports) by scoring an empty answer to each
            # benchmark's first problem; the one scoring thread keeps it ahead of any chunk's scoring
            def warm_up() -> None:
                scorer.score([""] * len(work), first)
                clock["verifier_ready_s"] = time.perf_counter() - t_workers

            warm = pool.submit(warm_up)
            for name, problems, params in work:
                for c in range(0, len(problems), chunk_size):
                    if (name, c) not in want:
                        continue
                    chunk = problems[c : c + chunk_size]
                    if (name, c) == todo[-1]:  # the verifier pool closes after this chunk
                        scorer.closing_soon()
                    t = time.perf_counter()
                    chunk_params = replace(params, seed=_chunk_seed(seed, name, c))
                    groups = generate_groups(engine, tok, chunk, chunk_params, scoring=(scorer, True))
                    if interaction is not None:  # feedback and the next attempts (the verifiers warmed up)
                        warm.result()
                        interaction.run(engine, scorer, groups, chunk_params)
                    clock["generate_s"] += time.perf_counter() - t
                    if pending is not None:  # the previous chunk was scored while this one generated
                        commit(pending)
                    job = (pool.submit(timed_score, groups), (name, c, groups, len(problems)))
                    if not overlap:
                        commit(job)
                        continue
                    pending = job
            if pending is not None:
                commit(pending)
            warm.result()
    finally:
        pool.shutdown(wait=True)
        engine.close()
        if interaction is not None:
            interaction.close()


def summarize(samples: list[dict], domains: dict[str, str]) -> dict:
    """The results table from samples alone (so anyone can recompute it from samples.jsonl)."""
    rows = {}
    for name, groups in problem_groups(samples).items():
        n = len(groups[0])  # every group is already its problem's first n samples (`problem_groups`)
        per_problem = [sum(s["score"] for s in g) / n for g in groups]
        flat = [s for g in groups for s in g]
        row = {"problems": len(groups), "n": n, "mean@n": sum(per_problem) / len(per_problem)}
        row["se"] = standard_error(per_problem)
        row["ci95"] = 1.96 * row["se"]
        correct = [sum(s["score"] >= 1.0 for s in g) for g in groups]
        k = 1
        while k <= n:
            row[f"pass@{k}"] = sum(pass_at_k(n, c, k) for c in correct) / len(groups)
            k *= 2
        if n > 1:
            row[f"maj@{n}"] = sum(
                maj_at_k([answer_key(s["extracted"]) for s in g], [s["score"] for s in g], n) for g in groups
            ) / len(groups)
            row[f"best@{n}"] = sum(max(s["score"] for s in g) for g in groups) / len(groups)
            row[f"worst@{n}"] = sum(min(s["score"] for s in g) for g in groups) / len(groups)
        if any("turns" in s for s in flat):  # feedback between attempts: how many, and right at the first
            row["turns_mean"] = sum(s.get("turns", 1) for s in flat) / len(flat)
            row["first_attempt"] = sum(s["score"] >= 1.0 and s.get("turns", 1) == 1 for s in flat) / len(flat)
        row["truncated"] = sum(s["finish_reason"] == "length" for s in flat) / len(flat)
        row["verifier_errors"] = failed_share(s.get("reason") for s in flat)
        rows[name] = row
    macro = macro_average({k: v["mean@n"] for k, v in rows.items()}, domains)
    return {"benchmarks": rows, "macro": macro}


def _column_order(c: str):
    """problems, n, mean@n, ci95, then pass@1, pass@2, ..., maj / best / worst @n, then the rates."""
    fixed = ["problems", "n", "mean@n", "ci95"]
    if c in fixed:
        return (0, fixed.index(c), 0)
    if "@" in c:
        name, k = c.split("@")
        return (1, ["pass", "maj", "best", "worst"].index(name), int(k))
    return (2, 0, c)


def results_markdown(results: dict) -> str:
    rows = results["benchmarks"]
    cols = sorted({c for r in rows.values() for c in r} - {"se"}, key=_column_order)
    lines = ["| benchmark | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, r in rows.items():
        cells = [str(r[c]) if c in ("problems", "n") else (f"{r[c]:.4f}" if c in r else "") for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if results.get("macro"):
        lines += ["", "macro average (mean@n per domain, then over domains): "
                  + ", ".join(f"{k} {v:.4f}" for k, v in results["macro"].items())]  # fmt: skip
    lines += [f"{name}: {note}" for name, note in results.get("notes", {}).items()]
    return "\n".join(lines) + "\n"


def benchmark_metric_names(b: Benchmark) -> list[str]:
    """The eval/<benchmark>/<metric> names in-training validation logs for `b` (`benchmark_metrics`),
    read off the table `summarize` makes of one problem with the benchmark's n samples."""
    n = sampling_for(b, {}).n
    one = [{"benchmark": b.name, "problem": 0, "sample": j, "score": 0.0, "extracted": None, "reason": None,
            "finish_reason": "stop"} for j in range(n)]  # fmt: skip
    row = summarize(one, {b.name: b.domain})["benchmarks"][b.name]
    return [f"eval/{b.name}/{k}" for k in row if k not in _NOT_LOGGED]


_NOT_LOGGED = ("problems", "n", "se")


def benchmark_metrics(engine, tokenizer, scorer, loaded, max_new_tokens: int, seed: int,
                      think_from_prompt: bool = True, chunk_size: int = 256, log=None,
                      what: str = "validation") -> dict[str, float]:  # fmt: skip
    """In-training validation on benchmarks: [(Benchmark, problems)] through the run's own engine and
    scorer, each benchmark's sampling capped at the run's max_new_tokens; metrics named
    eval/<benchmark>/<metric> (the same table `reasonrl eval` writes, from the same code). `log` gets one
    warning per benchmark whose verifier failed on some samples (they count as wrong, as in the table)."""
    from reasonrl.rollout.scored import generate_and_score

    samples = []
    for b, problems in loaded:
        params = replace(sampling_for(b, {}), max_new_tokens=max_new_tokens)
        for c in range(0, len(problems), chunk_size):
            p = replace(params, seed=_chunk_seed(seed, b.name, c))
            groups, _ = generate_and_score(engine, tokenizer, scorer, problems[c : c + chunk_size], p,
                                           think_from_prompt=think_from_prompt)  # fmt: skip
            samples += sample_rows(b.name, c, groups)
    for b, _ in loaded:
        warning = failure_warning(
            f"{what} ({b.name})", [s["reason"] for s in samples if s["benchmark"] == b.name]
        )
        if warning and log is not None:
            log(warning)
    res = summarize(samples, {b.name: b.domain for b, _ in loaded})
    return {f"eval/{name}/{k}": float(v) for name, row in res["benchmarks"].items() for k, v in row.items()
            if k not in _NOT_LOGGED}  # fmt: skip
