"""Every recipe in recipes/ on the same tiny task for the same number of steps: a results table.

Owns: running each recipe as written (same model, task, data seed, batch, learning rate as the recipe
says) with only the step count, validation size and run directory overridden, then reporting held-out
greedy accuracy before / after, mean training reward (the verifier score, before any
reward_map or overlong shaping, so recipes compare) on the first step and over the last K steps, and
wall time (total, including the two validations, and the median seconds per step).
Does not own: the recipes or the trainer. Runs one recipe after another in this process.

Usage:  python bench/compare_recipes.py [--steps 100] [--recipes grpo dapo ...] [--val-size 200]
                                        [--last 10] [--batch N] [--model demo:addsub] [--out runs/compare]
  --batch N scales train.global_batch to N sequences, keeping each recipe's mini-batch / batch ratio
  (for quick smoke runs; leave it out for comparable figures).
Prints a table, then one JSON line (the last line of output).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--recipes", nargs="*", help="recipe names (default: every recipes/*.yaml)")
    ap.add_argument("--val-size", type=int, default=200, help="held-out problems for greedy accuracy")
    ap.add_argument("--last", type=int, default=10, help="mean training reward over the last K steps")
    ap.add_argument("--batch", type=int, default=0, help="scale global_batch to N sequences (smoke runs)")
    ap.add_argument("--model", default="demo:addsub")
    ap.add_argument("--out", default="runs/compare_recipes")
    return ap.parse_args(argv)


def recipe_paths(names: list[str] | None) -> list[Path]:
    found = sorted((ROOT / "recipes").glob("*.yaml"))
    if not names:
        return found
    by_name = {p.stem: p for p in found}
    missing = [n for n in names if n not in by_name]
    if missing:
        sys.exit(f"unknown recipe(s) {missing}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]


def overrides(args, recipe: Path) -> list[str]:
    from reasonrl.config import load_config

    out = [
        f"train.steps={args.steps}",
        f"model.path={args.model}",
        f"val.size={args.val_size}",
        f"data.val_size={args.val_size}",
        "val.every=0",
        "val.n=1",
        "checkpoint.every=0",
        "checkpoint.keep_last=1",
        "log.progress=false",
        "log.tensorboard=false",
        f"log.run_dir={Path(args.out) / recipe.stem}",
    ]
    if args.batch:
        cfg = load_config(recipe)
        n = cfg.rollout.n
        batch = max(n, args.batch // n * n)
        mini = max(n, batch * cfg.train.mini_batch // cfg.train.global_batch // n * n)
        micro = min(mini, cfg.train.micro_batch)
        while mini % micro:
            micro -= 1
        out += [f"train.global_batch={batch}", f"train.mini_batch={mini}", f"train.micro_batch={micro}"]
    return out


def run_one(args, recipe: Path) -> dict:
    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    cfg = load_config(recipe, overrides(args, recipe))
    t0 = time.perf_counter()
    history = train(cfg, log=lambda *_: None)["history"]
    seconds = time.perf_counter() - t0
    steps = [r for r in history if r["step"] >= 1]
    last = steps[-args.last :]
    step_s = [r["perf/step_seconds"] for r in steps]
    return {
        "recipe": recipe.stem,
        "acc_before": history[0].get("eval/accuracy"),
        "acc_after": history[-1].get("eval/accuracy"),
        "reward_first": steps[0].get("reward/mean") if steps else None,
        "reward_last": statistics.fmean(r["reward/mean"] for r in last) if last else None,
        "seconds": seconds,
        "step_seconds_median": statistics.median(step_s) if step_s else None,
    }


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    args = parse_args(argv)
    from reasonrl.models.loading import resolve_model_path

    args.model = resolve_model_path(args.model)  # build the demo model now, outside the timings
    rows = []
    for recipe in recipe_paths(args.recipes):
        print(f"[compare_recipes] {recipe.stem}: {args.steps} steps ...", file=sys.stderr, flush=True)
        rows.append(run_one(args, recipe))
    head = f"{'recipe':<16} {'acc before':>10} {'acc after':>10} {'reward 1st':>10} {'reward last':>11} {'s/step':>7} {'total s':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['recipe']:<16} {fmt(r['acc_before'], '10.3f')} {fmt(r['acc_after'], '10.3f')} "
            f"{fmt(r['reward_first'], '10.3f')} {fmt(r['reward_last'], '11.3f')} "
            f"{fmt(r['step_seconds_median'], '7.2f')} {fmt(r['seconds'], '8.1f')}"
        )
    print(json.dumps({"steps": args.steps, "val_size": args.val_size, "last": args.last, "results": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
