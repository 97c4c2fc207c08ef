"""`reasonrl eval`: held-out problems (`eval_problems`) or benchmarks (`eval_benchmarks`).

Owns: the benchmark options and turning them into `eval.runner.run_benchmarks` arguments; the
problems path: a built-in task, data files, or, for a run directory or checkpoint, that run's own
validation data, response length, think-block policy and reward settings (so the number matches
what the run logged as eval/accuracy). Every bad input (unknown benchmark, missing file, bad option)
is an InputError before any model is loaded. Does not own: the runner, the registry or the metrics
(`eval/`).
"""

from __future__ import annotations

import argparse

from reasonrl.cli.eval_rollout import agent_arg, interaction_arg, tool_args, tools_arg


def check_engine(name: str) -> None:
    from reasonrl.errors import InputError
    from reasonrl.rollout.factory import ROLLOUT_ENGINES, check_available

    if name not in ROLLOUT_ENGINES:
        raise InputError(
            f"--engine {name!r} is not a rollout engine; known: {', '.join(ROLLOUT_ENGINES.names())}"
        )
    check_available(name, "--engine")  # a missing package (vLLM): before the model or the data are read


def check_counts(args, counts: tuple[str, ...]) -> None:
    """Each of the options `counts` that is given is >= 1: an InputError naming it otherwise."""
    from reasonrl.errors import InputError

    for key in counts:
        value = getattr(args, key)
        if value is not None and value < 1:
            raise InputError(f"--{key.replace('_', '-')} must be >= 1, got {value}")


def check_run_options(args, counts: tuple[str, ...]) -> None:
    """The given counts >= 1, and the sampling options in range (temperature >= 0, top-p in (0, 1],
    both finite): an InputError naming the option before any model is loaded."""
    import math

    from reasonrl.errors import InputError

    check_counts(args, counts)
    t, top_p = args.temperature, getattr(args, "top_p", None)
    if t is not None and not (math.isfinite(t) and t >= 0):
        raise InputError(f"--temperature must be a number >= 0 (0: greedy), got {t}")
    if top_p is not None and not 0 < top_p <= 1:  # NaN fails this too
        raise InputError(f"--top-p must be in (0, 1], got {top_p}")


def add_verifier_option_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verifier-option", action="append", default=[], metavar="VERIFIER.KEY=VALUE",
                   help="a verifier option, as a recipe's reward.options (repeatable; e.g. "
                        "math.accept_unevaluated=true, code.backend=sandbox_fusion)")  # fmt: skip
    p.add_argument("--verifier", default=None, metavar="NAME",
                   help="score every row of the data file(s) with this verifier unless a row names its own, as a "
                        "recipe's reward.verifier (e.g. verl_function with --verifier-option verl_function.path=F)")  # fmt: skip


def check_verifier_arg(name: str | None) -> None:
    """`--verifier NAME` names a registered verifier (plugins imported first): an InputError listing them."""
    from reasonrl.errors import InputError
    from reasonrl.rewards import VERIFIERS

    if name is not None and name not in VERIFIERS:
        raise InputError(f"--verifier {name!r}: no such verifier; known: {', '.join(VERIFIERS.names())}")


def key_values(pairs: list[str], flag: str, form: str = "KEY=VALUE") -> list[tuple[str, object]]:
    """`KEY=VALUE` items of a repeatable flag -> [(key, value)], the value read as JSON (true, 3, 0.5,
    "text"), else as text; an item without `=` is an InputError naming the flag and the form."""
    import json

    from reasonrl.errors import InputError

    out = []
    for item in pairs:
        key, eq, text = item.partition("=")
        if not eq or not key:
            raise InputError(f"{flag} {item!r}: expected {form}")
        try:
            out.append((key, json.loads(text)))
        except json.JSONDecodeError:
            out.append((key, text))
    return out


def verifier_options(pairs: list[str]) -> dict[str, dict]:
    """`--verifier-option VERIFIER.KEY=VALUE ...` -> {verifier: {key: value}}; the value read as JSON
    (true, 3, 0.5, "text"), else as text. An unknown verifier or option, or a value the option cannot
    take, is an InputError naming the flag, before any model is loaded."""
    from reasonrl.errors import InputError
    from reasonrl.registry import RegistryError
    from reasonrl.rewards.base import VERIFIERS, check_setup

    out: dict[str, dict] = {}
    form = "VERIFIER.KEY=VALUE"
    for (target, value), item in zip(key_values(pairs, "--verifier-option", form), pairs):
        name, dot, key = target.partition(".")
        if not dot or not name or not key:
            raise InputError(f"--verifier-option {item!r}: expected {form}")
        out.setdefault(name, {})[key] = value
    for name, kw in out.items():
        try:
            VERIFIERS.check_kwargs(name, kw)
            check_setup(name, kw)
        except (RegistryError, ValueError) as e:
            raise InputError(f"--verifier-option {name}: {e}") from None
    return out


def add_template_kwarg_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--chat-template-kwarg", action="append", default=[], metavar="KEY=VALUE",
                   help="a chat-template argument for every prompt, as a recipe's data.chat_template_kwargs "
                        "(repeatable; e.g. enable_thinking=false; a run's own are the default)")  # fmt: skip


def template_kwargs_arg(pairs: list[str], model: str | None = None) -> dict:
    """`--chat-template-kwarg KEY=VALUE ...` over the run's own `data.chat_template_kwargs` when `model` is
    one of its checkpoints; an InputError naming the flag for a key that is no template variable."""
    from reasonrl.types import template_kwargs

    cfg = run_config(model) if model is not None else None
    flag = "--chat-template-kwarg"
    given = template_kwargs(dict(key_values(pairs, flag)), flag, label=flag)
    return {**(dict(cfg.data.chat_template_kwargs) if cfg is not None else {}), **given}


def add_benchmark_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmarks", default=None,
                   help="comma list of benchmarks or suites (reasoning360, r1); see --list-benchmarks")  # fmt: skip
    p.add_argument("--data-dir", default=None, help="directory holding each benchmark's standard file")
    p.add_argument("--file", action="append", default=[], metavar="NAME=PATH",
                   help="the file of one benchmark (repeatable)")  # fmt: skip
    p.add_argument("--out", default=None,
                   help="output directory (default: RUN/eval/<checkpoint> for a run, else eval_out/<model name>)")  # fmt: skip
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    p.add_argument("--chunk-size", type=int, default=32, help="problems per generation call (and commit)")
    p.add_argument("--workers", type=int, default=None,
                   help="verifier worker processes (default: the cores but one, 2-16)")  # fmt: skip
    p.add_argument("--all-checkpoints", action="store_true",
                   help="MODEL is a run directory: evaluate every valid checkpoint, one table + a PNG")  # fmt: skip
    add_verifier_option_arg(p)
    add_template_kwarg_arg(p)


def benchmarks_and_files(names: str, file_args: list[str]) -> tuple[list, dict[str, str]]:
    """`--benchmarks a,b,suite` and `--file NAME=PATH ...` -> (benchmarks, {name: path}), checked."""
    from pathlib import Path

    from reasonrl.errors import InputError
    from reasonrl.eval.benchmarks import resolve

    wanted = [b.strip() for b in names.split(",") if b.strip()]
    if not wanted:
        raise InputError("--benchmarks names no benchmark (see --list-benchmarks)")
    benches = resolve(wanted)
    files = {}
    for item in file_args:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise InputError(f"--file {item!r}: expected NAME=PATH")
        if name not in {b.name for b in benches}:
            raise InputError(f"--file {item!r}: {name!r} is not among --benchmarks")
        if not path.startswith("hf:") and not Path(path).exists():
            raise InputError(f"--file {item!r}: not found: {path}")
        files[name] = path
    return benches, files


def default_out(given: str, model: str) -> str:
    """Where results go without --out: a run directory's RUN/eval/<checkpoint> (the viewer and the
    model card find them there), else eval_out/<model name>."""
    from pathlib import Path

    from reasonrl.engines.checkpoint import list_checkpoints

    m = Path(model.rstrip("/"))
    ckpt = m.parent if m.name == "merged" else m  # a LoRA checkpoint's merged model
    if Path(given).is_dir() and list_checkpoints(given):
        return str(Path(given) / "eval" / ckpt.name)
    return str(Path("eval_out") / ckpt.name)


def eval_benchmarks(args, model_path) -> int:
    import json

    from reasonrl.errors import InputError
    from reasonrl.eval.runner import results_markdown, run_benchmarks, timing_line

    if args.verifier is not None:  # (a benchmark's rows route to the verifiers written for it)
        raise InputError("--verifier applies to the rows of --data files, not to --benchmarks")
    benches, files = benchmarks_and_files(args.benchmarks, args.file)
    options = verifier_options(args.verifier_option)
    check_engine(args.engine)
    check_run_options(args, ("n", "max_new_tokens", "limit", "chunk_size", "workers"))
    overrides = {"n": args.n, "temperature": args.temperature, "top_p": args.top_p,
                 "max_new_tokens": args.max_new_tokens}  # fmt: skip
    kw = dict(data_dir=args.data_dir, files=files, overrides=overrides, engine=args.engine, device=args.device,
              seed=args.seed, limit=args.limit, chunk_size=args.chunk_size, workers=args.workers,
              reward_options=options)  # fmt: skip
    template_kwargs_arg(args.chat_template_kwarg)  # checked before any model path is resolved
    tools_arg(
        args.tools, search_url=args.search_url, final=False, **tool_args(args)
    )  # (the run's own: below)
    interaction_arg(args.interaction)  # (checked before any model path is resolved)
    agent_arg(args.agent)
    if args.all_checkpoints:
        return _all_checkpoints(args, benches, kw)
    model = model_path(args.model)
    kw["template_kwargs"] = template_kwargs_arg(args.chat_template_kwarg, model)
    kw["tools"] = tools_arg(args.tools, run_config(model), args.search_url, **tool_args(args))
    kw["interaction"] = interaction_arg(args.interaction, run_config(model))
    kw["agent"] = agent_arg(args.agent, run_config(model), kw["tools"])
    out = args.out or default_out(args.model, model)
    from reasonrl.cli.bars import chunk_progress

    with chunk_progress("eval") as (log, progress):
        results = run_benchmarks(model, benches, out, **kw, log=log, progress=progress)
    print(results_markdown(results))
    if line := timing_line(out):  # after the progress bar is gone, so a terminal shows it too
        print(line)
    print(json.dumps({"out": out, "macro": results["macro"]}))
    return 0


def _all_checkpoints(args, benches, kw) -> int:
    """Every valid checkpoint of a run: its own results under OUT/<checkpoint>, and OUT/checkpoints.md /
    .json / .png with mean@n per benchmark against the training step (the table and the plot with each
    value's 95% interval; the JSON keeps mean@n alone, each checkpoint's results.json the rest)."""
    import json
    from pathlib import Path

    from reasonrl.data.files import write_text
    from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
    from reasonrl.errors import InputError
    from reasonrl.eval.runner import run_benchmarks

    run = Path(args.model)
    ckpts = [c for c in list_checkpoints(run) if verify_checkpoint(c) is None] if run.is_dir() else []
    if not ckpts:
        raise InputError(f"--all-checkpoints: {args.model} is not a run directory with valid checkpoints")
    out = Path(args.out or run / "eval")  # RUN/eval/<checkpoint>/, beside the single-checkpoint default
    table, ci95 = {}, {}  # {step: {benchmark: mean@n}} (checkpoints.json), and its 95% half-widths
    for c in ckpts:
        step = int(c.name.rsplit("_", 1)[-1])
        kw["template_kwargs"] = template_kwargs_arg(args.chat_template_kwarg, str(c))  # the run's own too
        kw["tools"] = tools_arg(args.tools, run_config(str(c)), args.search_url, **tool_args(args))
        kw["interaction"] = interaction_arg(args.interaction, run_config(str(c)))
        kw["agent"] = agent_arg(args.agent, run_config(str(c)), kw["tools"])
        res = run_benchmarks(str(c), benches, out / c.name, **kw)
        table[step] = {name: row["mean@n"] for name, row in res["benchmarks"].items()}
        ci95[step] = {name: row["ci95"] for name, row in res["benchmarks"].items()}
    names = [b.name for b in benches]
    lines = [
        "| step | " + " | ".join(f"{n} (mean@n ±ci95)" for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    lines += [f"| {s} | " + " | ".join(f"{row.get(n, float('nan')):.4f} ±{ci95[s].get(n, float('nan')):.4f}"
                                      for n in names) + " |"
              for s, row in table.items()]  # fmt: skip
    write_text(out / "checkpoints.md", "\n".join(lines) + "\n")
    write_text(out / "checkpoints.json", json.dumps(table, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for n in names:  # each value with its 95% interval
        ax.errorbar(list(table), [table[s].get(n) for s in table], yerr=[ci95[s].get(n) for s in table],
                    fmt="o-", capsize=3, label=n)  # fmt: skip
    ax.set_xlabel("training step")
    ax.set_ylabel("mean@n (±95% interval)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "checkpoints.png", dpi=100)
    plt.close(fig)
    print("\n".join(lines))
    print(json.dumps({"out": str(out), "checkpoints": len(table)}))
    return 0


def run_config(checkpoint: str):
    """The RunConfig a checkpoint was trained with (None for a plain model directory or hub id)."""
    import json
    from pathlib import Path

    from reasonrl.config import from_dict

    state = Path(checkpoint) / "state.json"
    if not state.is_file():
        return None
    cfg = json.loads(state.read_text()).get("config")
    return from_dict(cfg) if cfg else None


def eval_problems(args, model_path) -> int:
    import json
    import sys

    from reasonrl.data.prompts import with_template_kwargs
    from reasonrl.data.schema import load_problems
    from reasonrl.errors import InputError
    from reasonrl.rewards.routing import with_verifier

    if args.data is not None and not args.data:
        raise InputError("--data needs at least one parquet / jsonl / json file")
    if args.verifier is not None and not args.data:  # a built-in task or a run's own data route as they are
        raise InputError("--verifier applies to the rows of --data files")
    check_run_options(args, ("n", "size", "max_new_tokens", "difficulty"))
    interaction_arg(getattr(args, "interaction", None))
    agent_arg(getattr(args, "agent", None))
    check_engine(args.engine)
    if args.task is not None:
        from reasonrl.data.mixture import check_task

        check_task("--task", args.task, f"--benchmarks rg_{args.task}")
    args.model = model_path(args.model)
    from reasonrl.data.tasks import generate
    from reasonrl.eval.accuracy import evaluate
    from reasonrl.models.loading import load_policy
    from reasonrl.rewards import check_routable
    from reasonrl.rewards.services import check_services
    from reasonrl.rewards.verifiers.unverified import checkable
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.environments import check_environment_functions
    from reasonrl.rollout.factory import build_rollout_engine
    from reasonrl.rollout.function_tools import with_function_schemas

    given = template_kwargs_arg(args.chat_template_kwarg)  # over the run's own (its load_data applies them)
    cfg = run_config(args.model) if not args.data and args.task is None else None
    tools = tools_arg(args.tools, cfg, getattr(args, "search_url", None), **tool_args(args))
    agent = agent_arg(getattr(args, "agent", None), cfg, tools)
    scorer, think, max_new = None, True, args.max_new_tokens or 64
    if cfg is not None:  # the run's own held-out set and settings
        from reasonrl.config import import_plugins

        import_plugins(cfg.plugins)
        options = verifier_options(args.verifier_option)  # after the plugins: their verifiers' options too
        for name, kw in options.items():  # on top of the run's own reward.options
            cfg.reward.options[name] = {**cfg.reward.options.get(name, {}), **kw}
        from reasonrl.data.prompts import fit_prompts
        from reasonrl.trainer.rollouts import make_scorer
        from reasonrl.trainer.setup import load_data

        merged = {**cfg.data.chat_template_kwargs, **given}
        cfg.data.chat_template_kwargs = with_function_schemas(merged, tools) if tools is not None else merged
        _, problems = load_data(cfg)
        kept = checkable(problems)  # (an SFT run's rows with no checkable answer left out)
        unchecked, problems = len(problems) - len(kept), kept
        if unchecked and not problems:
            raise InputError(f"{args.model}: its run's validation rows have no checkable answer (verifier none: "
                             "SFT data); evaluate it with --data FILE, --task NAME or --benchmarks NAMES")  # fmt: skip
        if not problems:  # (before: "problems": 0 and a mean score of 0.0)
            raise InputError(f"{args.model}: its run has no validation problems (no data.val_files, and no built-in "
                             "task in its data); evaluate it with --data FILE, --task NAME or --benchmarks NAMES")  # fmt: skip
        check_services(problems, {k: dict(v) for k, v in cfg.reward.options.items()},
                       log=lambda m: print(m, file=sys.stderr))  # fmt: skip
        model, tok = load_policy(args.model, device=args.device)
        problems = fit_prompts(tok, problems, cfg.data.max_prompt_tokens, "validation data",
                               cfg.data.drop_overlong_prompts, lambda *a: None)  # fmt: skip
        scorer, think = make_scorer(cfg), cfg.reward.think_from_prompt
        max_new = args.max_new_tokens or cfg.rollout.max_new_tokens
        skipped = f"; {unchecked} without a checkable answer left out" if unchecked else ""
        print(
            f"evaluating on the run's own validation data ({len(problems)} problems{skipped})",
            file=sys.stderr,
        )
    else:
        if args.data:
            check_verifier_arg(args.verifier)
            problems = with_verifier(load_problems(args.data), args.verifier)
        else:
            task = args.task or "arithmetic"
            problems = generate(task, args.size, seed=args.seed, difficulty=args.difficulty, split="test")
        given = template_kwargs_arg(args.chat_template_kwarg, args.model)
        given = with_function_schemas(given, tools) if tools is not None else given  # the tools' schemas too
        problems = with_template_kwargs(problems, given)
        options = verifier_options(args.verifier_option)
        check_routable(problems, "eval data", options)
        check_environment_functions(options, tools.environment if tools is not None else None)
        check_services(problems, options, log=lambda m: print(m, file=sys.stderr))  # a judge, SandboxFusion
        if options:
            from reasonrl.rewards.runner import RewardRunner

            scorer = RewardRunner(options=options)
        model, tok = load_policy(args.model, device=args.device)
    n = args.n or 1
    temperature = args.temperature or 0.0
    top_p = args.top_p if args.top_p is not None and temperature > 0 else 1.0  # greedy: no nucleus
    params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new, seed=args.seed)
    kwargs = dict(cfg.data.chat_template_kwargs) if cfg is not None else given  # (the tool turns' too)
    engine = build_rollout_engine(args.engine, model, tok, tools=tools, template_kwargs=kwargs, agent=agent)
    batch = cfg.val.batch_size if cfg is not None else 256  # the run's own batching: identical greedy outputs
    inter = None
    try:
        inter = interaction_arg(getattr(args, "interaction", None), cfg)
        if inter is not None:
            from reasonrl.rollout.interaction import Interaction

            inter = Interaction(inter, tok, kwargs)
        ev = evaluate(engine, tok, problems, params, batch_size=batch, think_from_prompt=think, scorer=scorer,
                      interaction=inter)  # fmt: skip
    finally:
        engine.close()
        if hasattr(inter, "close"):  # (an Interaction built: verl's classes' processes)
            inter.close()
        if scorer is not None:
            scorer.close()
    from reasonrl.rewards.health import failed_share, failure_warning

    warning = failure_warning("eval", ev.reasons)
    if warning:
        print(warning, file=sys.stderr)
    out = {"model": args.model, "problems": len(problems), "n": n, "mean_score": ev.accuracy,
           "verifier_errors": failed_share(ev.reasons)}  # fmt: skip
    if inter is not None:  # the last of up to this many attempts was scored
        out["attempts"] = inter.cfg.max_turns
    print(json.dumps({**out, "verifier_options": options} if options else out))
    return 0
