"""The `reasonrl` command: demo, train, eval, data. Parses config once, at the edge (rule 6).

Owns: argument parsing and turning config errors into a one-line message with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _train(args) -> int:
    from reasonrl.config import load_config, to_yaml

    if args.recipe and "=" in args.recipe and not os.path.exists(args.recipe):  # overrides only, no recipe
        args.recipe, args.overrides = None, [args.recipe, *args.overrides]
    cfg = load_config(args.recipe, args.overrides)
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0
    from reasonrl.trainer.loop import train

    out = train(
        cfg, resume=args.resume, overwrite=args.overwrite, allow_config_change=args.allow_config_change
    )
    last = out["history"][-1] if out["history"] else {}
    summary = {k: last[k] for k in ("step", "eval/accuracy", "reward/mean") if k in last}
    print(json.dumps({**summary, "run_dir": out["run_dir"], "plot": out["plot"]}))
    return 0


def _eval(args) -> int:
    from reasonrl.data.schema import load_problems
    from reasonrl.data.tasks import generate
    from reasonrl.eval.accuracy import evaluate
    from reasonrl.models.loading import load_policy
    from reasonrl.rewards import check_routable
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    if args.data:
        problems = load_problems(args.data)
    else:
        problems = generate(args.task, args.size, seed=args.seed, difficulty=args.difficulty, split="test")
    check_routable(problems, "eval data")
    model, tok = load_policy(args.model, device=args.device)
    params = SamplingParams(
        n=args.n, temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    acc, _ = evaluate(HFRolloutEngine(model, tok), tok, problems, params)
    print(json.dumps({"model": args.model, "problems": len(problems), "n": args.n, "mean_score": acc}))
    return 0


def _data(args) -> int:
    from reasonrl.data.schema import write_problems
    from reasonrl.data.tasks import generate

    problems = generate(args.task, args.size, seed=args.seed, difficulty=args.difficulty, split=args.split)
    write_problems(args.out, problems)
    print(json.dumps({"task": args.task, "rows": len(problems), "out": args.out}))
    return 0


def _demo(args) -> int:
    from reasonrl.cli.demo import run_demo

    print(json.dumps(run_demo(args.run_dir, args.overrides)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reasonrl", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="train the tiny model with GRPO on CPU and show it learning")
    d.add_argument("--run-dir", default="runs/demo")
    d.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.steps=50")
    d.set_defaults(fn=_demo)

    t = sub.add_parser("train", help="train from a YAML recipe plus dotted overrides")
    t.add_argument("recipe", nargs="?", default=None)
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

    e = sub.add_parser("eval", help="mean score of a model on held-out problems")
    e.add_argument("model", help="HF model directory, hub id, or 'demo'")
    e.add_argument("--data", nargs="*", default=None, help="parquet/jsonl files (default: a built-in task)")
    e.add_argument("--task", default="arithmetic")
    e.add_argument("--difficulty", type=int, default=2)
    e.add_argument("--size", type=int, default=200)
    e.add_argument("--n", type=int, default=1)
    e.add_argument("--temperature", type=float, default=0.0)
    e.add_argument("--max-new-tokens", type=int, default=64)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--device", default="auto")
    e.set_defaults(fn=_eval)

    g = sub.add_parser("data", help="write a procedural task as verl-format parquet/jsonl")
    g.add_argument("task")
    g.add_argument("out")
    g.add_argument("--size", type=int, default=1000)
    g.add_argument("--difficulty", type=int, default=2)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--split", default="train", choices=["train", "test"])
    g.set_defaults(fn=_data)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # dotted overrides may also come after flags: `train recipe.yaml --resume train.lr=1e-6`
        if not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    from reasonrl.config import ConfigError
    from reasonrl.trainer.signals import Interrupted

    try:
        return args.fn(args)
    except (ConfigError, FileNotFoundError) as e:
        print(f"reasonrl: error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"reasonrl: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
