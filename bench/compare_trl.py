"""Seconds per RL step and reward: TRL's GRPOTrainer vs reasonrl on the same work, in one run.

Owns: building the same setting for both trainers and timing them one after the other in this
process: the same tiny model (the cached "demo" model unless --model says otherwise), the same pool
of procedural problems (`reasonrl.data.tasks.generate`), the same verifier (`reasonrl.rewards.score`),
one optimizer step per generation batch of `prompts x generations` sequences (one forward/backward
micro-batch), the same max new tokens, learning rate (constant, no warm-up), AdamW betas, weight
decay 0, gradient clipping 1.0, temperature 1.0, clip epsilon 0.2, no KL term / reference model,
group z-score advantages and token-mean ("dapo") loss aggregation, fp32, no gradient checkpointing,
and the same prompts at every step: TRL's dataset is the sequence of prompts reasonrl's
`PromptSampler` draws, in order, with TRL's shuffling off (checked against reasonrl's
rollouts.jsonl). The completions differ (each trainer has its own sampling RNG).
Does not own: either trainer.

Timing: TRL steps are timed with a TrainerCallback (on_step_begin -> on_step_end: generation,
scoring, forward/backward and optimizer step); reasonrl's `perf/step_seconds` covers the same work
(validation and logging are outside it). The first `--warmup` steps of each are left out; both the
median and the mean are reported. The headline ratio uses medians. Both run with `--threads`
torch threads (default 1: on a busy 2-core machine two OpenMP threads per process made steps up
to 10x slower and the timings meaningless; pass 0 for torch's default on an idle machine).
`--repeats R` alternates the two R times: step times are pooled, rewards averaged over repeats
(same prompts, a different sampling seed per repeat).

Usage:  python bench/compare_trl.py [--steps 20] [--prompts 16] [--generations 8] [--max-tokens 48]
                                    [--lr 1e-4] [--model demo] [--only both|trl|reasonrl]
                                    [--threads N] [--repeats R] [--async K] [--set KEY=VALUE ...]
--async K adds reasonrl with rollout.max_staleness=K: a rollout worker process generates the next
step (on the second core) while the trainer updates; its sec/step is the trainer's wait + update.
--set adds a reasonrl override to both reasonrl runs, e.g. `--set model.remove_padding=true --set
train.micro_batch=32` (length-sorted micro-batches without padding: the same update, computed faster).
Needs the optional `bench` extra: pip install trl datasets (pip install -e '.[bench]').
Prints a table, then one JSON line (the last line of output).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _require_trl():
    try:
        import datasets  # noqa: F401
        import trl  # noqa: F401
    except ImportError as e:
        sys.exit(
            f"bench/compare_trl.py needs TRL and datasets ({e.name} is not installed).\n"
            "Install the optional extra:  pip install -e '.[bench]'   (or: pip install trl datasets)"
        )


def add_setting_args(ap: argparse.ArgumentParser) -> None:
    """The arguments both comparisons (this one, compare_trl_sft.py) take: model, task, pool, lr, seed,
    threads (read by `bench_setting`)."""
    ap.add_argument(
        "--model", default="demo:addsub", help="'demo' (cached tiny model) or an HF model directory"
    )
    ap.add_argument("--task", default="addsub")
    ap.add_argument("--difficulty", type=int, default=2)
    ap.add_argument("--pool", type=int, default=4000, help="problems both trainers draw from")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads for both (0: torch's default)"
    )


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_setting_args(ap)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--generations", type=int, default=8, help="completions per prompt (group size)")
    ap.add_argument("--max-tokens", type=int, default=48, help="max new tokens per completion")
    ap.add_argument("--warmup", type=int, default=1, help="first steps left out of the timing")
    ap.add_argument("--last", type=int, default=5, help="also report mean reward over the last K steps")
    ap.add_argument("--only", choices=("both", "trl", "reasonrl"), default="both")
    ap.add_argument("--order", choices=("trl-first", "reasonrl-first"), default="trl-first")
    ap.add_argument("--repeats", type=int, default=1, help="alternate the two trainers this many times")
    ap.add_argument("--out-dir", default=None, help="where run directories go (default: a temp dir)")
    ap.add_argument(
        "--async", dest="async_k", type=int, default=0, metavar="K",
        help="also run reasonrl with rollout.max_staleness=K (a rollout worker on its own core, TIS cap 2)",
    )  # fmt: skip
    ap.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="an extra reasonrl override for both reasonrl runs (repeatable), e.g. model.pack_tokens=2048",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error(f"--steps ({args.steps}) must be larger than --warmup ({args.warmup})")
    return args


# ----------------------------------------------------------------------------- TRL


def schedule(args, pool) -> list[list]:
    """The prompts reasonrl trains on at each step (its own sampler, same seed), so TRL sees them too."""
    from reasonrl.data.sampler import PromptSampler

    sampler = PromptSampler(pool, args.prompts, seed=args.seed, shuffle=True)
    return [sampler.next() for _ in range(args.steps)]


def run_trl(args, model_path: str, steps: list[list], out_dir: Path, seed: int) -> dict:
    import warnings

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from reasonrl.rewards import score

    batch = args.prompts * args.generations
    problems = [p for step in steps for p in step]  # row k*prompts.. (k+1)*prompts-1 = step k+1
    dataset = Dataset.from_list(
        [
            {"prompt": p.prompt, "ground_truth": str(p.ground_truth), "problem_index": i}
            for i, p in enumerate(problems)
        ]
    )

    seen: list[set[int]] = []  # dataset rows scored at each step

    def reasonrl_verifier(prompts, completions, problem_index, **kwargs):
        """Our routed verifier; completions are chat messages (conversational dataset)."""
        seen.append(set(problem_index))
        out = []
        for completion, idx in zip(completions, problem_index):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            out.append(score(text, problems[idx]).score)
        return out

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds: list[float] = []
            self.rewards: list[float] = []
            self.lengths: list[float] = []
            self.zero_std: list[float] = []
            self._t0 = 0.0

        def on_step_begin(self, targs, state, control, **kw):
            self._t0 = time.perf_counter()

        def on_step_end(self, targs, state, control, **kw):
            self.seconds.append(time.perf_counter() - self._t0)

        def on_log(self, targs, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                self.rewards.append(float(logs["reward"]))
                self.lengths.append(float(logs.get("completions/mean_length", float("nan"))))
                self.zero_std.append(float(logs.get("frac_reward_zero_std", float("nan"))))

    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning)
    config = GRPOConfig(
        output_dir=str(out_dir / "trl"),
        max_steps=args.steps,
        per_device_train_batch_size=batch,  # one micro-batch = the whole generation batch
        gradient_accumulation_steps=1,
        steps_per_generation=1,  # one generation batch per optimizer step
        num_generations=args.generations,
        num_iterations=1,
        shuffle_dataset=False,  # the dataset is already in reasonrl's sampling order
        max_completion_length=args.max_tokens,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        max_grad_norm=1.0,
        beta=0.0,
        epsilon=0.2,
        loss_type="dapo",  # token-mean over the global batch, like reasonrl's loss_agg=token_mean
        scale_rewards="group",  # group z-score, like reasonrl's adv_estimator=grpo
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reasonrl_verifier,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    for cb in (PrinterCallback, ProgressCallback):  # keep stdout to our table
        trainer.remove_callback(cb)
    if getattr(trainer.model, "is_activation_checkpointing", False):
        raise RuntimeError("TRL turned on activation checkpointing; the comparison assumes it is off")
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    if len(timer.rewards) != args.steps or len(timer.seconds) != args.steps:
        raise RuntimeError(
            f"TRL logged {len(timer.rewards)} rewards and {len(timer.seconds)} step times for {args.steps} steps"
        )
    want = [set(range(k * args.prompts, (k + 1) * args.prompts)) for k in range(args.steps)]
    if seen != want:
        raise RuntimeError("TRL did not train on the scheduled prompts in order (did its sampler change?)")
    return {
        "seconds": timer.seconds,
        "rewards": timer.rewards,
        "lengths": timer.lengths,
        "zero_std": timer.zero_std,
        "wall": wall,
    }


# ----------------------------------------------------------------------------- reasonrl


def run_reasonrl(args, model_path: str, out_dir: Path, seed: int, staleness: int = 0) -> dict:
    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    batch = args.prompts * args.generations
    overrides = [
        f"model.path={model_path}",
        "model.dtype=float32",
        "model.device=cpu",
        "model.gradient_checkpointing=false",
        f"data.task={args.task}",
        f"data.difficulty={args.difficulty}",
        f"data.train_size={args.pool}",
        f"data.seed={args.seed}",
        "data.val_size=1",
        f"train.steps={args.steps}",
        f"train.global_batch={batch}",
        f"train.mini_batch={batch}",
        f"train.micro_batch={batch}",
        "train.epochs=1",
        f"train.lr={args.lr}",
        "train.warmup_steps=0",
        "train.weight_decay=0.0",
        "train.grad_clip=1.0",
        f"train.seed={seed}",  # sampling RNG; the prompts depend on data.seed only
        f"rollout.n={args.generations}",
        f"rollout.max_new_tokens={args.max_tokens}",
        "rollout.temperature=1.0",
        "rollout.top_p=1.0",
        "rollout.top_k=0",
        "algo.adv_estimator=grpo",
        "algo.policy_loss=ppo_clip",
        "algo.clip_low=0.2",
        "algo.clip_high=0.2",
        "algo.loss_agg=token_mean",
        "algo.kl.coef=0.0",
        "algo.entropy_coef=0.0",
        "val.size=1",
        "val.n=1",
        "checkpoint.every=0",
        "checkpoint.keep_last=1",
        f"log.run_dir={out_dir / 'reasonrl'}",
        "log.progress=false",
        "log.tensorboard=false",
        "log.rollouts_per_step=4",  # their uids show which prompts each step used
    ]
    if staleness:  # the worker generates the next step while this process trains on the current one
        overrides += [
            f"rollout.max_staleness={staleness}",
            "algo.off_policy.tis_cap=2.0",
            "rollout.worker_threads=1",
        ]
    cfg = load_config(None, overrides + list(args.overrides))
    t0 = time.perf_counter()
    out = train(cfg, log=lambda *a, **k: None)
    wall = time.perf_counter() - t0
    uids: dict[int, set] = {}
    rollouts = Path(out["run_dir"]) / "rollouts.jsonl"
    if rollouts.is_file():
        for line in rollouts.read_text().splitlines():
            row = json.loads(line)
            uids.setdefault(int(row.get("step", 0)), set()).add(row.get("uid"))
    steps = [h for h in out["history"] if "perf/step_seconds" in h]
    if len(steps) != args.steps:
        raise RuntimeError(f"reasonrl logged {len(steps)} steps, expected {args.steps}")
    perf = {k: [h[k] for h in steps] for k in ("perf/generate_seconds", "perf/train_seconds")}
    return {
        "seconds": [h["perf/step_seconds"] for h in steps],
        "rewards": [h["reward/mean"] for h in steps],
        "lengths": [h.get("rollout/response_length", float("nan")) for h in steps],
        # groups whose rewards are all equal: zero advantage, no gradient (with kl_coef = 0)
        "zero_std": [
            h.get("reward/solved_all_frac", float("nan")) + h.get("reward/solved_none_frac", float("nan"))
            for h in steps
        ],
        "wall": wall,
        "uids": uids,
        "generate_seconds": perf["perf/generate_seconds"],
        "train_seconds": perf["perf/train_seconds"],
    }


# ----------------------------------------------------------------------------- report


def check_schedule(steps: list[list], uids: dict[int, set]) -> str:
    """Did reasonrl train on the prompts TRL was given at each step? (from its sampled rollouts)"""
    if not uids:
        return "unchecked (reasonrl wrote no rollouts.jsonl)"
    bad = [k for k, got in uids.items() if 1 <= k <= len(steps) and not got <= {p.uid for p in steps[k - 1]}]
    if bad:
        return f"MISMATCH at steps {bad[:5]} (reasonrl's sampler changed? per-step rewards not comparable)"
    return f"yes ({len(uids)} steps checked)"


def summarize(runs: list[dict], warmup: int, last: int) -> dict:
    """Step times after warm-up pooled over repeats; rewards averaged over repeats, step by step."""
    timed = [x for r in runs for x in r["seconds"][warmup:]]
    rewards = [statistics.fmean(col) for col in zip(*(r["rewards"] for r in runs))]
    s = {
        "median": statistics.median(timed),
        "mean": statistics.fmean(timed),
        "reward_first": rewards[0],
        "reward_last": rewards[-1],
        "reward_lastk": statistics.fmean(rewards[-last:]),
        "length_mean": statistics.fmean(x for r in runs for x in r["lengths"]),
        "zero_std": statistics.fmean(x for r in runs for x in r["zero_std"]),
        "wall": statistics.fmean(r["wall"] for r in runs),
    }
    for k in ("generate_seconds", "train_seconds"):
        if k in runs[0]:
            s[k] = statistics.median(x for r in runs for x in r[k][warmup:])
    return s


def print_table(args, summaries: dict[str, dict]) -> None:
    batch = args.prompts * args.generations
    print(
        f"\nsetting: {args.prompts} prompts x {args.generations} generations = {batch} sequences/step, "
        f"max_new_tokens={args.max_tokens}, lr={args.lr}, {args.steps} steps x {args.repeats} repeat(s) "
        f"(first {args.warmup} step(s) of each run left out of timing)"
    )
    cols = ("sec/step med", "sec/step mean", "reward@1", "reward@last", f"reward last{args.last}", "resp len")
    cols += ("0-std groups",)
    print(f"{'trainer':<15}" + "".join(f"{c:>15}" for c in cols) + f"{'run wall s':>12}")
    for name, s in summaries.items():
        vals = (
            s["median"],
            s["mean"],
            s["reward_first"],
            s["reward_last"],
            s["reward_lastk"],
            s["length_mean"],
            s["zero_std"],
        )
        print(f"{name:<15}" + "".join(f"{v:>15.3f}" for v in vals) + f"{s['wall']:>12.1f}")
    rr = summaries.get("reasonrl")
    if rr and "generate_seconds" in rr:
        print(
            f"reasonrl step (median): generate+score {rr['generate_seconds']:.3f} s, "
            f"train {rr['train_seconds']:.3f} s"
        )
    t = summaries.get("trl")
    for name in ("reasonrl", "reasonrl-async"):
        r = summaries.get(name)
        if t and r:
            print(
                f"speedup (TRL / {name} sec per step): median {t['median'] / r['median']:.2f}x, "
                f"mean {t['mean'] / r['mean']:.2f}x"
            )


def json_line(args, summaries: dict[str, dict]) -> dict:
    t, r = summaries.get("trl"), summaries.get("reasonrl")
    line: dict = {
        "trl_sec_per_step": round(t["median"], 4) if t else None,
        "reasonrl_sec_per_step": round(r["median"], 4) if r else None,
        "speedup": round(t["median"] / r["median"], 3) if t and r else None,
        "trl_reward_last": round(t["reward_last"], 4) if t else None,
        "reasonrl_reward_last": round(r["reward_last"], 4) if r else None,
    }
    a = summaries.get("reasonrl-async")
    if a:
        line["async_k"] = args.async_k
        line["reasonrl_async_sec_per_step"] = round(a["median"], 4)
        line["async_speedup_vs_trl"] = round(t["median"] / a["median"], 3) if t else None
        line["async_speedup_vs_sync"] = round(r["median"] / a["median"], 3) if r else None
    for name, s in summaries.items():
        line[f"{name}_sec_per_step_mean"] = round(s["mean"], 4)
        line[f"{name}_reward_last{args.last}"] = round(s["reward_lastk"], 4)
        line[f"{name}_zero_std_groups"] = round(s["zero_std"], 4)
    if r and "generate_seconds" in r:
        line["reasonrl_generate_sec"] = round(r["generate_seconds"], 4)
        line["reasonrl_train_sec"] = round(r["train_seconds"], 4)
    batch = args.prompts * args.generations
    line.update(steps=args.steps, repeats=args.repeats, batch=batch, max_tokens=args.max_tokens, lr=args.lr)
    return line


def bench_setting(args) -> tuple[str, list]:
    """What both comparisons (this one, compare_trl_sft.py) set up first: TRL installed, `--threads` torch
    threads, no progress bars, the model's path and the pool of problems (`--task`, `--pool`, `--seed`)."""
    _require_trl()
    import torch
    from transformers.utils import logging as hf_logging

    from reasonrl.data.tasks import generate
    from reasonrl.models.loading import resolve_model_path

    if args.threads:
        torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()
    pool = generate(args.task, args.pool, seed=args.seed, difficulty=args.difficulty, split="train")
    return resolve_model_path(args.model), pool


def main(argv=None) -> int:
    args = parse_args(argv)
    model_path, pool = bench_setting(args)
    import torch

    steps = schedule(args, pool)
    print(f"model: {model_path}\ntorch {torch.__version__}, {torch.get_num_threads()} threads")

    names = ["trl", "reasonrl"] if args.order == "trl-first" else ["reasonrl", "trl"]
    if args.only != "both":
        names = [args.only]
    if args.async_k:
        names.append("reasonrl-async")
    results: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="compare_trl-") as tmp:
        root = Path(args.out_dir) if args.out_dir else Path(tmp)
        for rep in range(args.repeats):
            for name in names:
                print(f"running {name} (repeat {rep + 1}/{args.repeats}) ...", flush=True)
                out_dir = root / f"{name}-{rep}"
                seed = args.seed + rep  # same prompts each repeat, fresh sampling noise
                torch.manual_seed(seed)
                if name == "trl":
                    results[name].append(run_trl(args, model_path, steps, out_dir, seed))
                else:
                    k = args.async_k if name == "reasonrl-async" else 0
                    results[name].append(run_reasonrl(args, model_path, out_dir, seed, staleness=k))
    if "reasonrl" in results:
        print("same prompts at every step:", check_schedule(steps, results["reasonrl"][0]["uids"]))
    summaries = {
        n: summarize(results[n], args.warmup, args.last)
        for n in ("trl", "reasonrl", "reasonrl-async")
        if n in results
    }
    print_table(args, summaries)
    print(json.dumps(json_line(args, summaries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
