"""The `reasonrl` command: demo, train, plan, eval, export, data, view. Parses config once, at the edge (rule 6).

Owns: argument parsing, checking command-line inputs before any work (`eval`: the model path, --n,
--data), and turning every expected error (`errors.InputError`, a missing file, a full disk) into one
line `reasonrl: error: ...` with exit status 2; real bugs keep their traceback, and `--debug` shows
the traceback of expected errors too. A training run stopped by a signal exits with 128 + signal.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import sys

# OS errors that mean "this path cannot be used", not a bug (missing file, full disk, permissions)
_USER_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.ENOTDIR,
    errno.EISDIR,
}


def _train(args) -> int:
    from reasonrl.config import load_cli, to_yaml

    cfg = load_cli(args.recipe, args.overrides)
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0
    from reasonrl.trainer.loop import train

    out = train(
        cfg, resume=args.resume, overwrite=args.overwrite, allow_config_change=args.allow_config_change
    )
    last = out["history"][-1] if out["history"] else {}
    summary = {k: last[k] for k in ("step", "eval/accuracy", "reward/mean") if k in last}
    stopped = {"stopped": out["stopped"]} if "stopped" in out else {}  # train.stop_when ended it early
    print(json.dumps({**summary, "run_dir": out["run_dir"], "plot": out["plot"], **stopped}))
    return 0


def _eval_model_path(model: str, best: bool = False) -> str:
    """The model to evaluate: a HF directory, a run directory (its newest valid checkpoint, or with
    `best` the one its checkpoints/best.json names), a hub id or "demo" / "demo:<task>". Raises
    InputError naming what is wrong."""
    from pathlib import Path

    from reasonrl.engines.checkpoint import best_checkpoint, run_checkpoint
    from reasonrl.errors import InputError

    if best:
        model = str(best_checkpoint(model))
        print(f"evaluating {model} (the run's best checkpoint)", file=sys.stderr)

    if model == "demo" or model.startswith("demo:"):
        return model
    path = Path(model).expanduser()
    if not path.exists():
        if model.startswith((".", "/", "~")) or model.count("/") != 1:
            raise InputError(f"model path not found: {model}")
        return model  # a hub id (org/name)
    if not path.is_dir():
        raise InputError(
            f"model path {model} is a file; give a Hugging Face model directory or a run directory"
        )
    if (ckpt := run_checkpoint(path, warn=lambda m: print(m, file=sys.stderr))) is not None:
        print(f"evaluating {ckpt}", file=sys.stderr)
        path = ckpt
    if not (path / "config.json").is_file() and (path / "merged" / "config.json").is_file():
        path = path / "merged"  # a LoRA checkpoint: its merged model
    if not (path / "config.json").is_file():
        raise InputError(f"{path} is not a Hugging Face model directory (no config.json)")
    if not any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise InputError(
            f"{path} has no tokenizer (tokenizer.json / tokenizer_config.json); save one beside the model"
        )
    return str(path)


def _eval(args) -> int:
    from reasonrl.errors import InputError

    if args.list_benchmarks:
        from reasonrl.eval.benchmarks import benchmark_table

        print(benchmark_table())
        return 0
    if args.model is None:
        raise InputError("eval needs a MODEL (a HF directory, a run directory, a hub id or 'demo')")
    if args.model == "compare":  # reasonrl eval compare A/results.json B/results.json
        from reasonrl.eval import compare as cmp

        if len(args.rest) != 2:
            raise InputError("eval compare needs two results.json files (or output directories)")
        results = [cmp.load_results(p) for p in args.rest]
        setups = tuple(cmp.load_setup(p) for p in args.rest)
        scores = tuple(cmp.load_problem_scores(p) for p in args.rest)
        print(cmp.comparison_markdown(cmp.compare_results(*results, setups=setups, scores=scores)))
        return 0
    if args.rest:
        raise InputError(f"unexpected arguments: {' '.join(args.rest)}")
    from reasonrl.models.loading import resolve_device

    resolve_device(args.device)  # a device this machine lacks fails before a model is resolved or built
    if args.best and args.all_checkpoints:
        raise InputError("--best and --all-checkpoints: choose one (the best checkpoint, or every one)")
    model_path = functools.partial(_eval_model_path, best=args.best)
    if args.benchmarks is not None:
        from reasonrl.cli.evaluate import eval_benchmarks

        return eval_benchmarks(args, model_path)
    from reasonrl.cli.evaluate import eval_problems

    return eval_problems(args, model_path)


def _demo(args) -> int:
    from reasonrl.cli.demo import run_demo

    print(json.dumps(run_demo(args.run_dir, args.overrides)))
    return 0


class _Parser(argparse.ArgumentParser):
    """No abbreviated flags, in every subcommand (`add_subparsers` makes parsers of this class): with them
    `data filter F --max 100` was `--max-prompt-tokens 100`, a filter nobody asked for."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def recipe_help() -> str:
    """The RECIPE argument's help for train and plan: what it may be, with the shipped recipes' names."""
    from reasonrl.config import builtin_recipes

    return f"a YAML file or a shipped recipe by name ({', '.join(builtin_recipes())}); none: the defaults"


def build_parser() -> argparse.ArgumentParser:
    about = (
        "Reinforcement learning on verifiable rewards for reasoning models: train, evaluate, prepare data."
    )
    p = _Parser(prog="reasonrl", description=about)
    p.add_argument("--debug", action="store_true", help="show tracebacks of expected errors too")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="train the tiny model with GRPO on CPU and show it learning")
    d.add_argument("--run-dir", default="runs/demo", help="where the run writes (default: runs/demo)")
    d.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.steps=50")
    d.set_defaults(fn=_demo)

    t = sub.add_parser("train", help="train from a YAML recipe plus dotted overrides")
    t.add_argument("recipe", nargs="?", default=None, help=recipe_help())
    t.add_argument("overrides", nargs="*", help="dotted overrides, e.g. algo.clip_high=0.28")
    t.add_argument("--resume", action="store_true", help="continue from the run's latest checkpoint")
    t.add_argument("--overwrite", action="store_true", help="start a new run over an old one's files")
    t.add_argument(
        "--allow-config-change",
        action="store_true",
        help="resume with a changed config (applied and recorded in config_changes.jsonl)",
    )
    t.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    t.set_defaults(fn=_train)

    e = sub.add_parser("eval", help="a model, run or checkpoint on benchmarks or held-out problems")
    e.add_argument(
        "model",
        nargs="?",
        default=None,
        help="HF model directory, run directory, hub id, 'demo', or 'compare A B'",
    )
    e.add_argument("rest", nargs="*", default=[], help=argparse.SUPPRESS)
    e.add_argument(
        "--list-benchmarks", action="store_true", help="the registered benchmarks and suites, then exit"
    )
    e.add_argument("--data", nargs="*", default=None, help="parquet/jsonl files (default: a built-in task)")
    e.add_argument(
        "--task", default=None, help="a built-in task (default: a run's own validation data, else arithmetic)"
    )
    e.add_argument("--difficulty", type=int, default=2, help="the built-in task's difficulty (default 2)")
    e.add_argument("--size", type=int, default=200, help="problems generated from the built-in task")
    e.add_argument(
        "--n", type=int, default=None, help="samples per problem (default 1; benchmarks: their own)"
    )
    e.add_argument(
        "--temperature", type=float, default=None, help="default 0 (greedy); benchmarks: their own"
    )
    e.add_argument("--max-new-tokens", type=int, default=None, help="default 64; benchmarks: their own")
    e.add_argument(
        "--seed", type=int, default=0, help="seed of the sampling and of a built-in task's problems"
    )
    e.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (a GPU when there is one)")
    e.add_argument("--engine", default="hf", help="rollout engine (a name in ROLLOUT_ENGINES: hf, vllm, ...)")
    e.add_argument("--tools", default=None, metavar="FORMAT",
                   help="run the tool calls completions write (rollout.tools) in this format: auto (the model's template's), markdown, xml, hermes, "
                   "qwen3_coder, glm4_moe, llama3_json, python_tag, search_r1, mistral, mistral_v7, harmony, muse_glimmer, gemma4, lfm2 or deepseek_v3 (default: a run's own rollout.tools, "
                   "else off); 'off' turns a run's off")  # fmt: skip
    e.add_argument("--tool-function", action="append", default=[], metavar="SPEC",
                   help="a Python function the model may call as a tool (module.function or path.py:name; repeatable; "
                   "rollout.tools.functions), with --tools hermes or a run's own hermes tools")  # fmt: skip
    e.add_argument("--tool-environment", action="append", default=[], metavar="SPEC",
                   help="a TRL environment class whose methods the model may call as tools, an instance per rollout "
                   "(module.Class or path.py:Class, or NAME=SPEC each for rows picking theirs by their environment "
                   "column; rollout.tools.environment), with --tools hermes")  # fmt: skip
    e.add_argument("--tool-verl-config", default=None, metavar="PATH",
                   help="verl's tool config file (tools: [{class_name, config, tool_schema}]): its classes are the tools "
                   "the model may call (rollout.tools.verl_config), with --tools hermes")  # fmt: skip
    e.add_argument("--tool-mcp-servers", default=None, metavar="PATH",
                   help="an MCP servers file ({mcpServers: {name: {command, args, env}}}): their tools are the tools the "
                   "model may call (rollout.tools.mcp_servers), with --tools hermes")  # fmt: skip
    e.add_argument("--search-url", default=None, metavar="URL",
                   help="the search tool's retrieval service (Search-R1's API), for --tools search_r1 or hermes calls "
                   "named search (default: a run's own rollout.tools.search.url)")  # fmt: skip
    e.add_argument("--interaction", type=int, default=None, metavar="TURNS",
                   help="up to TURNS attempts, a wrong answer getting feedback (rollout.interaction: a run's own message "
                   "and turn, else the defaults); the last attempt is scored (default: one attempt)")  # fmt: skip
    e.add_argument("--agent", default=None, metavar="PATH",
                   help="an OpenRLHF agent file (agent_func.py, as --agent_func_path): each sample an episode of its "
                   "AgentInstance (rollout.agent; default: a run's own); 'off' turns a run's off")  # fmt: skip
    e.add_argument("--best", action="store_true",
                   help="MODEL is a run directory: its best checkpoint (checkpoint.keep_best), not its newest")  # fmt: skip
    from reasonrl.cli.evaluate import add_benchmark_args

    add_benchmark_args(e)
    e.set_defaults(fn=_eval)

    from reasonrl.cli.export import add_export_parser

    add_export_parser(sub)

    from reasonrl.cli.data import add_data_parser

    add_data_parser(sub)
    from reasonrl.cli.view import add_view_parser

    add_view_parser(sub)
    from reasonrl.cli.plan import add_plan_parser

    add_plan_parser(sub)
    from reasonrl.cli.convert import add_convert_parser

    add_convert_parser(sub)
    r = sub.add_parser(
        "retriever",
        help="serve BM25 or dense search over a passage corpus for the search tool (Search-R1's API)",
    )
    r.add_argument(
        "corpus", help="JSON lines: {id, contents: 'title\\ntext'} (Search-R1's corpora) or {title, text}"
    )
    r.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    r.add_argument("--port", type=int, default=8000, help="(default: 8000; rollout.tools.search.url is then "
                   "http://127.0.0.1:8000/retrieve)")  # fmt: skip
    d = r.add_argument_group("dense retrieval (instead of BM25)")
    d.add_argument(
        "--dense", metavar="MODEL", help="a text encoder (hub id or directory; e.g. intfloat/e5-base-v2)"
    )
    d.add_argument("--index", help="the passages' embeddings: a FAISS index (Search-R1's e5_Flat.index) or a "
                   ".npy file; built from the corpus and written there when it does not exist")  # fmt: skip
    d.add_argument("--pooling", choices=["mean", "cls", "pooler"], help="(default: by model family: e5 mean, "
                   "bge cls, dpr pooler, others mean)")  # fmt: skip
    d.add_argument("--query-prefix", help="(default: e5 'query: ', bge its instruction, others none)")
    d.add_argument("--passage-prefix", help="(default: e5 'passage: ', others none)")
    d.add_argument("--no-normalize", action="store_true", help="inner products of raw embeddings (default: "
                   "unit-length, except DPR)")  # fmt: skip
    d.add_argument("--max-length", type=int, default=256, help="tokens per text (default: 256)")
    d.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch (default: 128)")
    d.add_argument("--device", default="auto", help="auto (a GPU where there is one), cpu, cuda")
    r.set_defaults(fn=_retriever)
    return p


def _retriever(args) -> int:
    from reasonrl.rollout.retrieval_server import main as serve_corpus

    dense = None
    given = [f for f, v in (("--pooling", args.pooling), ("--query-prefix", args.query_prefix),
             ("--passage-prefix", args.passage_prefix), ("--no-normalize", args.no_normalize)) if v not in (None, False)]  # fmt: skip
    if given and not args.dense:
        from reasonrl.errors import InputError

        raise InputError(f"{', '.join(given)}: settings of the dense retriever; give --dense MODEL too")
    if args.dense:
        from reasonrl.rollout.dense_retrieval import EncoderSpec

        dense = EncoderSpec(args.dense, args.pooling, args.query_prefix, args.passage_prefix,
                            False if args.no_normalize else None, args.max_length, args.batch_size, args.device)  # fmt: skip
    serve_corpus(args.corpus, args.host, args.port, dense, args.index)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # dotted overrides may also come after flags: `train recipe.yaml --resume train.lr=1e-6`
        if not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    from reasonrl.errors import InputError
    from reasonrl.trainer.signals import Interrupted

    try:
        return args.fn(args)
    except Interrupted as e:
        print(f"reasonrl: {e}", file=sys.stderr)
        return e.exit_code
    except (InputError, FileNotFoundError, OSError) as e:
        if args.debug or (isinstance(e, OSError) and not isinstance(e, FileNotFoundError)
                          and e.errno not in _USER_ERRNOS):  # fmt: skip
            raise
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            print(
                f"reasonrl: error: no space left on device while writing {e.filename or 'a file'}",
                file=sys.stderr,
            )
        else:
            print(f"reasonrl: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
