"""Synchronous vs asynchronous rollouts on one recipe: held-out accuracy against training wall time.

Runs the recipe twice in this process, one after the other: as written (rollout.max_staleness=0: the
trainer generates, then updates, with all torch threads) and with rollout.max_staleness=K (a rollout
worker process generates up to K policy versions ahead on its own core; the trainer keeps the other;
algo.off_policy.tis_cap=2 corrects the loss for the older sampling policy, or with `--correction bypass`
verl's bypass mode: the sampler's log-probs are the old ones, the clip bounds the ratio to them). Training wall time is the sum of
`perf/step_seconds` (generation or waiting for it, scoring, update; validation excluded) up to each
validation. Prints both curves, the held-out accuracy of each at the synchronous run's total time
(interpolated) and averaged over the training time both ran (the area under each curve up to the
faster run's end, divided by that time: every validation counts), the step-time ratio, writes a PNG of both curves, and ends with one JSON line.
With `--seeds 0,1,2` each seed (train.seed: sampling and shuffling) runs both, one after the other,
and the figures are also given as mean and standard deviation over the seeds: one run's held-out
accuracy moves by several points with nothing but float order changed, so one pair decides nothing.

    python bench/async_curve.py [--recipe recipes/demo.yaml] [--steps 900] [--every 100] [--k 1] [--seeds 0]
                                [--val-size N] [--set KEY=VALUE ...]   (overrides applied to both runs)
                                [--correction tis|bypass]            (the asynchronous run's)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path


def run(recipe: str, steps: int, every: int, run_dir: Path, extra: list[str]) -> list[dict]:
    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    overrides = [f"train.steps={steps}", f"val.every={every}", f"log.run_dir={run_dir}", "log.progress=false",
                 "log.tensorboard=false", "checkpoint.every=0", *extra]  # fmt: skip
    return train(load_config(recipe, overrides), log=lambda *a, **k: None)["history"]


def curve(history: list[dict]) -> tuple[list[tuple[float, float, int]], list[float]]:
    """[(training seconds so far, held-out accuracy, step)] at each validation, and step times."""
    wall, points, times = 0.0, [], []
    for row in history:
        wall += row.get("perf/step_seconds", 0.0)
        if row["step"]:
            times.append(row["perf/step_seconds"])
        if "eval/accuracy" in row:
            points.append((wall, row["eval/accuracy"], row["step"]))
    return points, times


def at_time(points: list[tuple[float, float, int]], t: float) -> float:
    """Accuracy at training time t, linearly interpolated (the last value past the end)."""
    prev = points[0]
    for p in points[1:]:
        if p[0] >= t:
            return prev[1] + (p[1] - prev[1]) * (t - prev[0]) / max(p[0] - prev[0], 1e-9)
        prev = p
    return points[-1][1]


def mean_over_time(points: list[tuple[float, float, int]], t: float, grid: int = 200) -> float:
    """Mean held-out accuracy over training time [0, t] (the interpolated curve's area / t): every
    validation counts, so it is far less noisy than the accuracy at one time."""
    return sum(at_time(points, t * (i + 0.5) / grid) for i in range(grid)) / grid


def compare(sync, asyn) -> dict:
    """One seed's figures: step times, and accuracies at the end and at equal training time."""
    (ps, ts), (pa, ta) = sync, asyn
    t_end = ps[-1][0]
    t_common = min(t_end, pa[-1][0])
    return {
        "sync_sec_per_step": round(statistics.median(ts), 4), "async_sec_per_step": round(statistics.median(ta), 4),
        "step_time_ratio": round(statistics.median(ts) / statistics.median(ta), 3),
        "sync_acc_start": ps[0][1], "sync_acc_end": ps[-1][1], "async_acc_end": pa[-1][1],
        "sync_train_seconds": round(t_end, 1), "async_train_seconds": round(pa[-1][0], 1),
        "acc_at_sync_end_time": {"sync": ps[-1][1], "async": round(at_time(pa, t_end), 4)},
        # the faster run's end: both at the same training time, neither past its last validation
        "acc_at_async_end_time": {"sync": round(at_time(ps, pa[-1][0]), 4), "async": pa[-1][1]},
        "acc_at_half_time": {"sync": round(at_time(ps, t_end / 2), 4), "async": round(at_time(pa, t_end / 2), 4)},
        # over the time both ran (up to the faster run's end)
        "mean_acc_over_time": {"sync": round(mean_over_time(ps, t_common), 4),
                               "async": round(mean_over_time(pa, t_common), 4)},
    }  # fmt: skip


def over_seeds(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Mean, standard deviation and standard error of the mean over seeds of the figures that decide
    the comparison."""
    picks = {
        "sync_acc_end": lambda r: r["sync_acc_end"],
        "async_acc_end": lambda r: r["async_acc_end"],
        "sync_acc_at_sync_end_time": lambda r: r["acc_at_sync_end_time"]["sync"],
        "async_acc_at_sync_end_time": lambda r: r["acc_at_sync_end_time"]["async"],
        "sync_acc_at_async_end_time": lambda r: r["acc_at_async_end_time"]["sync"],
        "async_minus_sync_at_async_end_time": lambda r: r["acc_at_async_end_time"]["async"] - r["acc_at_async_end_time"]["sync"],
        "async_minus_sync_at_half_time": lambda r: r["acc_at_half_time"]["async"] - r["acc_at_half_time"]["sync"],
        "async_minus_sync_mean_acc_over_time": lambda r: r["mean_acc_over_time"]["async"] - r["mean_acc_over_time"]["sync"],
        "step_time_ratio": lambda r: r["step_time_ratio"],
    }  # fmt: skip
    out = {}
    for name, pick in picks.items():
        xs = [pick(r) for r in rows]
        sd = statistics.stdev(xs)
        out[name] = {
            "mean": round(statistics.mean(xs), 4),
            "sd": round(sd, 4),
            "se": round(sd / len(xs) ** 0.5, 4),
        }
    return out


# the asynchronous run's correction for samples from an older policy: truncated importance weights (the
# decoupled loss), or verl's bypass mode (the sampler's log-probs as the old ones: PPO's clip bounds it)
CORRECTIONS = {"tis": ["algo.off_policy.tis_cap=2.0"], "bypass": ["algo.off_policy.bypass=true"]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="recipes/demo.yaml")
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--k", type=int, default=1, help="rollout.max_staleness of the asynchronous run")
    ap.add_argument("--plot", default="async_curve.png")
    ap.add_argument("--seeds", default="", help="comma-separated train.seed values (default: the recipe's)")
    ap.add_argument("--val-size", type=int, default=None,
                    help="held-out problems per validation (sets val.size and data.val_size)")  # fmt: skip
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a recipe override for both runs, e.g. --set model.compile=true (repeatable)")  # fmt: skip
    ap.add_argument("--correction", choices=sorted(CORRECTIONS), default="tis",
                    help="how the asynchronous run corrects for its older sampling policy")  # fmt: skip
    args = ap.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if args.val_size is not None:
        args.set += [f"val.size={args.val_size}", f"data.val_size={args.val_size}"]
    # warm-up: a 2-step run fills the on-disk caches (inductor's compiled graphs with model.compile,
    # the tiny model's build), so no timed run pays a one-time cost the other does not
    with tempfile.TemporaryDirectory(prefix="async-curve-warm-") as tmp:
        run(args.recipe, 2, 0, Path(tmp) / "warm", list(args.set))
    pairs = []
    for seed in seeds or [None]:
        extra = [*args.set, *([] if seed is None else [f"train.seed={seed}"])]
        with tempfile.TemporaryDirectory(prefix="async-curve-") as tmp:
            sync = run(args.recipe, args.steps, args.every, Path(tmp) / "sync", extra)
            asyn = run(args.recipe, args.steps, args.every, Path(tmp) / "async",
                       [*extra, f"rollout.max_staleness={args.k}", *CORRECTIONS[args.correction]])  # fmt: skip
        pairs.append((seed, curve(sync), curve(asyn)))
        if len(seeds) > 1:
            print(json.dumps({"seed": seed, **compare(*pairs[-1][1:])}))
    report = {
        "bench": "async_curve",
        "recipe": args.recipe,
        "steps": args.steps,
        "k": args.k,
        "correction": args.correction,
        "set": args.set,
    }
    if len(pairs) > 1:
        report["seeds"] = seeds
        report["over_seeds"] = over_seeds([compare(a, b) for _, a, b in pairs])
    (ps, ts), (pa, ta) = pairs[0][1], pairs[0][2]
    print(f"{'step':>6} {'sync s':>9} {'sync acc':>9} {'async s':>9} {'async acc':>9}")
    for a, b in zip(ps, pa):
        print(f"{a[2]:>6} {a[0]:>9.1f} {a[1]:>9.3f} {b[0]:>9.1f} {b[1]:>9.3f}")
    t_end = ps[-1][0]
    report.update(compare((ps, ts), (pa, ta)))
    print(f"median step: sync {report['sync_sec_per_step']} s, async {report['async_sec_per_step']} s "
          f"({report['step_time_ratio']}x); accuracy at the sync run's end time {t_end:.0f} s: "
          f"sync {ps[-1][1]:.3f}, async {report['acc_at_sync_end_time']['async']:.3f}")  # fmt: skip
    if "over_seeds" in report:
        print(f"over seeds {seeds} (mean +- sd): " + ", ".join(f"{k} {v['mean']:.3f} +- {v['sd']:.3f}"
                                                  for k, v in report["over_seeds"].items()))  # fmt: skip
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p[0] for p in ps], [p[1] for p in ps], "o-", label="synchronous")
        ax.plot([p[0] for p in pa], [p[1] for p in pa], "s-", label=f"async (max_staleness={args.k})")
        ax.set_xlabel("training wall time (s)")
        ax.set_ylabel("held-out greedy accuracy")
        ax.set_title(Path(args.recipe).stem)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        report["plot"] = args.plot
    except ImportError:
        pass
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
