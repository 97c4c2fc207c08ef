"""`reasonrl eval MODEL --benchmarks a,b,...`: the benchmark side of the eval command.

Owns: its command-line options and turning them into `eval.runner.run_benchmarks` arguments, with
every bad input (unknown benchmark, missing file, bad --file / option) an InputError before any
model is loaded. Prints the results table and the output directory. Does not own: the runner, the
registry or the metrics (`eval/`).
"""

from __future__ import annotations

import argparse


def add_benchmark_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmarks", default=None,
                   help="comma list of benchmarks or suites (reasoning360, r1); see --list-benchmarks")  # fmt: skip
    p.add_argument("--data-dir", default=None, help="directory holding each benchmark's standard file")
    p.add_argument("--file", action="append", default=[], metavar="NAME=PATH",
                   help="the file of one benchmark (repeatable)")  # fmt: skip
    p.add_argument("--out", default=None, help="output directory (default: eval_out/<model name>)")
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    p.add_argument("--chunk-size", type=int, default=32, help="problems per generation call (and commit)")


def eval_benchmarks(args, model_path) -> int:
    import json
    from pathlib import Path

    from reasonrl.errors import InputError
    from reasonrl.eval.benchmarks import resolve
    from reasonrl.eval.runner import results_markdown, run_benchmarks
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    benches = resolve([b.strip() for b in args.benchmarks.split(",") if b.strip()])
    files = {}
    for item in args.file:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise InputError(f"--file {item!r}: expected NAME=PATH")
        if name not in {b.name for b in benches}:
            raise InputError(f"--file {item!r}: {name!r} is not among --benchmarks")
        if not Path(path).is_file():
            raise InputError(f"--file {item!r}: file not found: {path}")
        files[name] = path
    if args.engine not in ROLLOUT_ENGINES:
        raise InputError(
            f"--engine {args.engine!r} is not a rollout engine; known: {', '.join(ROLLOUT_ENGINES.names())}"
        )
    for key in ("n", "max_new_tokens", "limit", "chunk_size"):
        value = getattr(args, key)
        if value is not None and value < 1:
            raise InputError(f"--{key.replace('_', '-')} must be >= 1, got {value}")
    model = model_path(args.model)
    out = args.out or str(Path("eval_out") / Path(model.rstrip("/")).name)
    overrides = {"n": args.n, "temperature": args.temperature, "top_p": args.top_p,
                 "max_new_tokens": args.max_new_tokens}  # fmt: skip
    results = run_benchmarks(model, benches, out, data_dir=args.data_dir, files=files, overrides=overrides,
                             engine=args.engine, device=args.device, seed=args.seed, limit=args.limit,
                             chunk_size=args.chunk_size)  # fmt: skip
    print(results_markdown(results))
    print(json.dumps({"out": out, "macro": results["macro"]}))
    return 0
