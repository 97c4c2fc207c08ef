"""`reasonrl data ...`: every data job on one machine. Inputs are checked (files, rows, options)
before anything is written; outputs are written atomically and never over an input.

  list                         converters, built-in tasks, reasoning-gym datasets
  prepare SOURCE --input P...  convert a public dataset to verl rows (data.prepare)
  generate TASK                a built-in task, or reasoning_gym with --tasks 'a:2,b:1' (data.gym)
  stats FILE...                rows per data_source / ability, routes, prompt lengths, pass rates
  dedup FILE...                exact + MinHash near-duplicate removal (data.dedup)
  decontaminate FILE... --against EVAL... / --benchmarks NAMES [--data-dir D]   n-gram overlap removal
                               against evaluation files or registered benchmarks
  passrate FILE --model M      pass rate per prompt as a column named after the model (data.passrate)
  filter FILE --range COL=LO:HI / --max-prompt-tokens N --tokenizer DIR
  chat-template MODEL_DIR OUT_DIR   a think-aware tokenizer copy (data.chat_template)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reasonrl.errors import InputError


def _print(obj) -> None:
    print(json.dumps(obj))


def _rows_and_problems(paths: list[str], skip_bad: bool = False):
    """(raw rows, problems, names 'file row i') of every input, bad rows failing or left out."""
    from reasonrl.data.files import read_rows
    from reasonrl.data.schema import problems_from_rows

    rows, problems, names, bad = [], [], [], []
    for path in paths:
        raw = read_rows(path)
        report: list = []
        got = problems_from_rows(raw, path, skip_bad=skip_bad, report=report)
        skipped = {i for i, _ in report}
        bad += [f"{path} row {i}: {why}" for i, why in report]
        keep = [i for i in range(len(raw)) if i not in skipped]
        rows += [raw[i] for i in keep]
        names += [f"{path} row {i}" for i in keep]
        problems += got
    return rows, problems, names, bad


def _write_rows(out, rows, inputs) -> None:
    from reasonrl.data.files import check_output, write_rows

    if not rows:
        raise InputError(f"{out}: nothing left to write (every row was removed)")
    write_rows(check_output(out, inputs), rows)


def _options(pairs: list[str]) -> dict:
    from reasonrl.cli.evaluate import key_values

    return dict(key_values(pairs, "--option"))


def cmd_list(args) -> int:
    from reasonrl.data.prepare import CONVERTERS, load_all
    from reasonrl.data.tasks import TASKS

    load_all()
    out = {"converters": {n: CONVERTERS.get(n).source for n in CONVERTERS.names()}, "tasks": sorted(TASKS)}
    try:
        from reasoning_gym.factory import DATASETS

        out["reasoning_gym"] = sorted(set(DATASETS) - {"composite"})
    except ImportError:
        out["reasoning_gym"] = "not installed (pip install 'reasonrl[gym]')"
    print(json.dumps(out, indent=1))
    return 0


def cmd_prepare(args) -> int:
    from reasonrl.cli.evaluate import check_counts
    from reasonrl.data.prepare import prepare

    check_counts(args, ("limit",))  # (before: 0 and negative limits were ignored)
    _print(prepare(args.source, args.input, args.out, _options(args.option), args.skip_bad_rows, args.limit))
    return 0


def cmd_generate(args) -> int:
    from reasonrl.data.files import check_output
    from reasonrl.data.schema import write_problems

    if args.size < 1:
        raise InputError(f"--size must be >= 1, got {args.size}")
    out = check_output(args.out, [])
    if args.task == "reasoning_gym":
        from reasonrl.data.gym import generate

        if not args.tasks:
            raise InputError("generate reasoning_gym needs --tasks 'name:weight,...'")
        problems = generate(args.tasks, args.size, args.seed, args.config)
    else:
        from reasonrl.data.tasks import TASKS, generate

        if args.tasks or args.config:
            raise InputError("--tasks / --config are for reasoning_gym")
        try:
            problems = generate(
                args.task, args.size, seed=args.seed, difficulty=args.difficulty, split=args.split
            )
        except ValueError as e:
            from reasonrl.data.gym import task_hint

            way = f"reasonrl data generate reasoning_gym --tasks '{args.task}:1'"
            raise InputError(f"{e}{task_hint(args.task, way) if args.task not in TASKS else ''}") from None
    write_problems(out, problems)
    _print({"task": args.task, "rows": len(problems), "out": str(out)})
    return 0


def _tokenizer(path: str | None):
    if path is None:
        return None
    from transformers import AutoTokenizer

    if not Path(path).is_dir():
        raise InputError(f"--tokenizer {path}: not a directory")
    return AutoTokenizer.from_pretrained(path)


def cmd_stats(args) -> int:
    from reasonrl.data.stats import render, stats

    rows, problems, _, _ = _rows_and_problems(args.files)
    s = stats(rows, problems, _tokenizer(args.tokenizer))
    print(json.dumps(s, indent=1) if args.json else render(s))
    return 0


def _report(path: Path, removals, names) -> None:
    from reasonrl.data.files import write_rows

    write_rows(
        path, [r.as_dict(names[r.index]) for r in removals] or [{"row": None, "reason": "none removed"}]
    )


def _check_share(share: float) -> None:
    if not 0 < share <= 1:
        raise InputError(f"--template-share must be in (0, 1], got {share}")


def cmd_dedup(args) -> int:
    from reasonrl.data.dedup import exact_duplicates, near_duplicates, row_text, template_group

    _check_share(args.template_share)
    if not 0 < args.threshold <= 1:  # (2 was "exact only" without a word, 0 an error inside datasketch)
        raise InputError(f"--threshold must be in (0, 1] (1: exact duplicates only), got {args.threshold}")
    rows, problems, names, _ = _rows_and_problems(args.files)
    texts = [row_text(r, n) for r, n in zip(rows, names)]
    removed = exact_duplicates(texts, names)
    if args.threshold < 1:
        removed += near_duplicates(texts, names, args.threshold, skip=[r.index for r in removed],
                                   groups=[template_group(p) for p in problems], template_share=args.template_share)  # fmt: skip
    gone = {r.index for r in removed}
    _write_rows(args.out, [r for i, r in enumerate(rows) if i not in gone], args.files)
    report = Path(args.report or f"{args.out}.removed.jsonl")
    _report(report, sorted(removed, key=lambda r: r.index), names)
    _print({"rows_in": len(rows), "rows_out": len(rows) - len(gone), "exact": sum(r.reason == "exact" for r in removed),
            "near": sum(r.reason == "near" for r in removed), "out": args.out, "report": str(report)})  # fmt: skip
    return 0


def cmd_decontaminate(args) -> int:
    from reasonrl.data.dedup import contaminated, row_text, template_ngrams
    from reasonrl.data.files import read_rows

    if not args.against and not args.benchmarks:
        raise InputError("decontaminate needs --against EVAL_FILE... and / or --benchmarks NAMES")
    from reasonrl.cli.evaluate import check_counts

    # (before: --ngram 0 compared nothing, --min-matches 0 crashed)
    check_counts(args, ("ngram", "min_matches"))
    eval_texts, eval_names, groups = [], [], []
    for path in args.against:
        for i, r in enumerate(read_rows(path)):
            eval_texts.append(row_text(r, f"{path} row {i}"))
            eval_names.append(f"{path} row {i}")
            groups.append(path)
    if args.benchmarks:  # the eval registry's own loaders: the problems `reasonrl eval` would ask
        from reasonrl.cli.evaluate import benchmarks_and_files
        from reasonrl.data.dedup import problem_row_text
        from reasonrl.eval.benchmarks import load_benchmark

        benches, files = benchmarks_and_files(args.benchmarks, args.file)
        for b in benches:
            for i, p in enumerate(load_benchmark(b, args.data_dir, files.get(b.name))):
                eval_texts.append(problem_row_text(p))
                eval_names.append(f"benchmark {b.name} problem {i} ({p.uid})")
                groups.append(b.name)
    _check_share(args.template_share)
    template = template_ngrams(eval_texts, groups, args.ngram, args.template_share)
    rows, _, names, _ = _rows_and_problems(args.files)
    texts = [row_text(r, n) for r, n in zip(rows, names)]
    removed = contaminated(texts, eval_texts, eval_names, args.ngram, args.min_matches, template)
    gone = {r.index for r in removed}
    _write_rows(args.out, [r for i, r in enumerate(rows) if i not in gone], [*args.files, *args.against])
    report = Path(args.report or f"{args.out}.removed.jsonl")
    _report(report, removed, names)
    _print({"rows_in": len(rows), "rows_out": len(rows) - len(gone), "contaminated": len(gone),
            "eval_rows": len(eval_texts), "template_ngrams_ignored": len(template), "out": args.out,
            "report": str(report)})  # fmt: skip
    return 0


def cmd_passrate(args) -> int:
    from reasonrl.cli.main import _eval_model_path
    from reasonrl.data.files import check_output, write_rows
    from reasonrl.data.passrate import add_pass_rate_column, column_name, pass_rates, work_dir
    from reasonrl.rewards.routing import check_routable
    from reasonrl.rollout.base import SamplingParams

    out = check_output(args.out, [args.file])
    solutions_out = check_output(args.solutions, [args.file]) if args.solutions else None
    if solutions_out is not None and solutions_out.resolve() == out.resolve():
        raise InputError(
            f"--solutions {solutions_out}: the same file as --out; write the solutions to another"
        )
    if args.solutions_per_problem < 1:
        raise InputError(f"--solutions-per-problem must be >= 1, got {args.solutions_per_problem}")
    if args.plugins:
        from reasonrl.config import import_plugins

        import_plugins(args.plugins)
    from reasonrl.cli.evaluate import check_engine, check_run_options, verifier_options

    check_run_options(args, ("n", "max_new_tokens", "chunk_size"))  # and temperature / top-p in range
    options = verifier_options(args.verifier_option)  # after the plugins: their verifiers' options too
    check_engine(args.engine)  # registered (plugins imported above) and its package installed
    if not 0 < args.correct_threshold <= 1:  # scores are in [0, 1]: 0 solves everything, above 1 nothing
        raise InputError(f"--correct-threshold must be in (0, 1], got {args.correct_threshold}")
    from reasonrl.cli.evaluate import check_verifier_arg, template_kwargs_arg
    from reasonrl.data.prompts import with_template_kwargs
    from reasonrl.rewards.routing import with_verifier

    check_verifier_arg(args.verifier)
    rows, problems, _, _ = _rows_and_problems([args.file])
    problems = with_template_kwargs(
        with_verifier(problems, args.verifier), template_kwargs_arg(args.chat_template_kwarg)
    )
    check_routable(problems, args.file, options)
    from reasonrl.rewards.services import check_services

    check_services(problems, options, log=lambda m: print(m, file=sys.stderr))  # a judge, SandboxFusion
    model = _eval_model_path(args.model)
    column = args.column or column_name(args.model)
    params = SamplingParams(
        n=args.n, temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens
    )
    samples = work_dir(out, column) / "samples.jsonl"
    from reasonrl.cli.bars import chunk_progress

    plain_log = (lambda m: print(m, file=sys.stderr)) if not args.quiet else (lambda m: None)
    with chunk_progress("pass rates", plain_log, enabled=None if not args.quiet else False) as (
        log,
        progress,
    ):
        rates = pass_rates(model, problems, samples, params, engine=args.engine, device=args.device, seed=args.seed,
                           chunk_size=args.chunk_size, correct_threshold=args.correct_threshold, log=log,
                           plugins=args.plugins, progress=progress, reward_options=options,
                           allow_verifier_errors=args.allow_verifier_errors)  # fmt: skip
    write_rows(out, add_pass_rate_column(rows, column, rates))
    report = {"rows": len(rows), "column": column, "mean_pass_rate": sum(rates) / len(rates), "out": str(out),
              "samples": str(samples)}  # fmt: skip
    if args.solutions:  # rejection sampling: the solving samples as SFT rows (extra_info.response)
        from reasonrl.data.passrate import solutions
        from reasonrl.data.schema import write_problems
        from reasonrl.eval.samples import committed_samples

        rows_out, counts = solutions(problems, committed_samples(samples, mend=False)[0], args.solutions_per_problem,
                                     args.correct_threshold, args.model)  # fmt: skip
        write_problems(solutions_out, rows_out)
        report.update({**counts, "solutions_out": str(solutions_out)})
    _print(report)
    return 0


def cmd_filter(args) -> int:
    from reasonrl.data.passrate import filter_rows, length_filter, parse_range

    if not args.range and args.max_prompt_tokens is None:
        raise InputError("filter needs --range COL=LO:HI and / or --max-prompt-tokens N")
    from reasonrl.cli.evaluate import check_counts

    check_counts(args, ("max_prompt_tokens",))  # (before: every row dropped)
    ranges = [parse_range(r) for r in args.range]
    rows, problems, _, _ = _rows_and_problems([args.file])
    report: dict = {"rows_in": len(rows)}
    if args.max_prompt_tokens is not None and args.tokenizer is None:
        raise InputError(
            "--max-prompt-tokens needs --tokenizer DIR (prompts are counted after its chat template)"
        )
    if ranges:  # checks every row's pass rates before any other work
        keep, got = filter_rows(rows, ranges, args.file)
        report["dropped"] = got["dropped"]
        kept_ids = {id(r) for r in keep}
        problems = [p for p, r in zip(problems, rows, strict=True) if id(r) in kept_ids]
        rows = keep
    if args.max_prompt_tokens is not None:
        rows, report["too_long"] = length_filter(
            rows, problems, _tokenizer(args.tokenizer), args.max_prompt_tokens
        )
    _write_rows(args.out, rows, [args.file])
    _print({**report, "rows_out": len(rows), "out": args.out})
    return 0


def cmd_chat_template(args) -> int:
    from reasonrl.data.chat_template import write_think_tokenizer

    _print(write_think_tokenizer(args.model_dir, args.out_dir, strip_history=not args.keep_history_reasoning))
    return 0


def add_data_parser(sub) -> None:
    d = sub.add_parser("data", help="prepare, generate, filter and inspect training data")
    ds = d.add_subparsers(dest="data_command", required=True)
    ds.add_parser("list", help="converters, built-in tasks and reasoning-gym datasets").set_defaults(
        fn=cmd_list
    )

    p = ds.add_parser("prepare", help="convert a public dataset to verl rows")
    p.add_argument("source", help="converter name (see `reasonrl data list`)")
    p.add_argument(
        "--input", nargs="+", required=True, help="source files, datasets directories or hf:ORG/NAME"
    )
    p.add_argument("--out", required=True, help=".parquet or .jsonl")
    p.add_argument("--option", action="append", default=[], help="converter option KEY=VALUE")
    p.add_argument("--skip-bad-rows", action="store_true", help="skip and report malformed rows")
    p.add_argument("--limit", type=int, default=None, help="convert the first N rows only")
    p.set_defaults(fn=cmd_prepare)

    g = ds.add_parser("generate", help="a built-in task or reasoning_gym as verl rows")
    g.add_argument("task", help="arithmetic, addsub, countdown or reasoning_gym")
    g.add_argument("--out", required=True, help=".parquet or .jsonl")
    g.add_argument("--size", type=int, default=1000, help="rows to write (default 1000)")
    g.add_argument("--seed", type=int, default=0, help="the same seed writes the same rows")
    g.add_argument("--difficulty", type=int, default=2, help="a built-in task's difficulty (default 2)")
    g.add_argument("--split", default="train", choices=["train", "test"],
                   help="which side of the stable held-out split (by a hash of the prompt)")  # fmt: skip
    g.add_argument("--tasks", default=None, help="reasoning_gym mix: 'basic_arithmetic:2,leg_counting:1'")
    g.add_argument(
        "--config", action="append", default=[], help="reasoning_gym TASK.FIELD=VALUE or TASK.level=L"
    )
    g.set_defaults(fn=cmd_generate)

    s = ds.add_parser("stats", help="rows per data_source, routes, prompt lengths, pass rates")
    s.add_argument("files", nargs="+", help="parquet or jsonl files of verl rows")
    s.add_argument(
        "--tokenizer", default=None, help="count prompt tokens with this tokenizer's chat template"
    )
    s.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    s.set_defaults(fn=cmd_stats)

    for name, fn, help_ in (("dedup", cmd_dedup, "remove exact and near duplicates"),
                            ("decontaminate", cmd_decontaminate, "remove rows overlapping evaluation sets")):  # fmt: skip
        x = ds.add_parser(name, help=help_)
        x.add_argument("files", nargs="+", help="parquet or jsonl files of verl rows")
        x.add_argument("--out", required=True, help="the rows kept (.parquet or .jsonl)")
        x.add_argument("--report", default=None, help="removed rows and why (default OUT.removed.jsonl)")
        x.add_argument("--template-share", type=float, default=0.05,
                       help="word n-grams in more than this share of one source's rows (and in 3+) are its "
                            "template, not a problem, and are not compared; 1 turns this off")  # fmt: skip
        if name == "dedup":
            x.add_argument("--threshold", type=float, default=0.8, help="MinHash Jaccard; 1 = exact only")
        else:
            x.add_argument(
                "--against", nargs="+", default=[], help="evaluation files (verl rows or source format)"
            )
            x.add_argument("--benchmarks", default=None,
                           help="registered benchmarks or suites, as for `reasonrl eval` (e.g. r1,gsm8k)")  # fmt: skip
            x.add_argument("--data-dir", default=None, help="where the benchmarks' standard files are")
            x.add_argument("--file", action="append", default=[], metavar="NAME=PATH",
                           help="the file of one benchmark (repeatable)")  # fmt: skip
            x.add_argument("--ngram", type=int, default=8, help="words per compared n-gram (default 8)")
            x.add_argument("--min-matches", type=int, default=1,
                           help="a row goes when it shares this many n-grams with an evaluation row")  # fmt: skip
        x.set_defaults(fn=fn)

    r = ds.add_parser("passrate", help="pass rate per prompt with a model, as a column")
    r.add_argument("file", help="parquet or jsonl file of verl rows")
    r.add_argument("--model", required=True, help="HF model directory, run directory, hub id or 'demo'")
    r.add_argument("--out", required=True, help="the rows with the pass-rate column added")
    r.add_argument("--column", default=None, help="default: <model basename>_pass_rate")
    r.add_argument("--n", type=int, default=16, help="samples per prompt (default 16)")
    r.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    r.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (default 1.0: off)")
    r.add_argument("--max-new-tokens", type=int, default=4096, help="per sample (default 4096)")
    r.add_argument(
        "--correct-threshold", type=float, default=1.0, help="a sample counts as solved at this score"
    )
    r.add_argument("--engine", default="hf", help="rollout engine (a name in ROLLOUT_ENGINES: hf, vllm, ...)")
    r.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (a GPU when there is one)")
    r.add_argument("--seed", type=int, default=0, help="sampling seed")
    r.add_argument("--chunk-size", type=int, default=16, help="prompts per generation call (and commit)")
    r.add_argument(
        "--plugins", nargs="*", default=[], help="modules registering verifiers (as a recipe's plugins)"
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar or progress lines")
    r.add_argument("--solutions", default=None, metavar="FILE", help="also write the solving samples as SFT rows "
                   "(extra_info.response; rejection-sampling fine-tuning, or a teacher's traces)")  # fmt: skip
    r.add_argument(
        "--solutions-per-problem", type=int, default=1, help="distinct solutions kept a problem (default 1)"
    )
    r.add_argument(
        "--allow-verifier-errors",
        action="store_true",
        help="count samples whose verifier call failed (and still fails on a rerun) as unsolved",
    )
    from reasonrl.cli.evaluate import add_template_kwarg_arg, add_verifier_option_arg

    add_verifier_option_arg(r)
    add_template_kwarg_arg(r)
    r.set_defaults(fn=cmd_passrate)

    f = ds.add_parser("filter", help="keep rows by pass-rate ranges and / or prompt length")
    f.add_argument("file", help="parquet or jsonl file of verl rows")
    f.add_argument("--out", required=True, help="the rows kept (.parquet or .jsonl)")
    f.add_argument(
        "--range", action="append", default=[], help="COLUMN=LOW:HIGH (kept when inside, bounds included)"
    )
    f.add_argument("--max-prompt-tokens", type=int, default=None, help="keep prompts of at most N tokens")
    f.add_argument(
        "--tokenizer", default=None, help="model or tokenizer directory whose chat template counts them"
    )
    f.set_defaults(fn=cmd_filter)

    c = ds.add_parser("chat-template", help="a think-aware copy of a model's tokenizer")
    c.add_argument("model_dir", help="a model or tokenizer directory")
    c.add_argument("out_dir", help="where the copy goes")
    c.add_argument("--keep-history-reasoning", action="store_true", help="keep <think> blocks of past turns")
    c.set_defaults(fn=cmd_chat_template)
