"""Seconds per SFT step and the loss: TRL's SFTTrainer vs reasonrl (`algo.objective: sft`) on the same
work, in one run.

Owns: building the same setting for both trainers and timing them one after the other in this process:
the same tiny model (the cached "demo" model unless --model says otherwise), the same rows in the same
order (the procedural task's problems, each with its worked solution as the response; TRL's dataset is
the sequence of rows reasonrl's `PromptSampler` draws, read in order), prompt-completion data (the prompt
rendered by the chat template, the completion the solution and the end-of-text token, no loss on the
prompt), one optimizer step per batch of `--batch` rows in one micro-batch, the same learning rate
(constant, no warm-up), AdamW betas, weight decay 0, gradient clipping 1.0, fp32, no gradient
checkpointing, no packing. Both losses are the token mean over the batch's completion tokens, so the
first step's losses must agree (the same rows through the same model): printed as a check.
Does not own: either trainer.

Timing: TRL steps with a TrainerCallback (on_step_begin -> on_step_end: forward, backward, optimizer
step; TRL tokenises the dataset before training, outside the steps); reasonrl's `perf/step_seconds`
(building the batch: tokenising its rows; forward, backward, optimizer step; validation and logging
outside it), with its batch-building share printed apart. The first `--warmup` steps are left out; medians are the headline. Both run
with `--threads` torch threads (default 1; see bench/compare_trl.py). Needs the optional `bench` extra.

Usage:  python bench/compare_trl_sft.py [--steps 30] [--batch 64] [--lr 1e-4] [--model demo:addsub]
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

from compare_trl import add_setting_args, bench_setting


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_setting_args(ap)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64, help="rows per optimizer step")
    ap.add_argument("--warmup", type=int, default=2, help="first steps left out of the timing")
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error(f"--steps ({args.steps}) must be larger than --warmup ({args.warmup})")
    return args


def run_trl(args, model_path: str, rows: list, out_dir: Path) -> dict:
    import torch
    from datasets import Dataset
    from torch.utils.data import SequentialSampler
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    render = lambda p: tokenizer.apply_chat_template(p.prompt, tokenize=False, add_generation_prompt=True)  # noqa: E731
    dataset = Dataset.from_list([{"prompt": render(p), "completion": p.extra_info["solution"]} for p in rows])

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds, self.losses, self._t0 = [], [], 0.0

        def on_step_begin(self, targs, state, control, **kw):
            self._t0 = time.perf_counter()

        def on_step_end(self, targs, state, control, **kw):
            self.seconds.append(time.perf_counter() - self._t0)

        def on_log(self, targs, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                self.losses.append(float(logs["loss"]))

    class InOrder(SFTTrainer):  # the rows in reasonrl's sampling order, not reshuffled
        def _get_train_sampler(self, *a, **k):
            return SequentialSampler(self.train_dataset)

    config = SFTConfig(
        output_dir=str(out_dir / "trl"), max_steps=args.steps, per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=1, learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999, max_grad_norm=1.0, max_length=None, packing=False,
        completion_only_loss=True, use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False,
        logging_steps=1, report_to="none", save_strategy="no", seed=args.seed, dataloader_num_workers=0,
        disable_tqdm=True,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    timer = StepTimer()
    trainer = InOrder(
        model=model, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[timer]
    )
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    trainer.train()
    return {"seconds": timer.seconds, "losses": timer.losses}


def run_reasonrl(args, model_path: str, out_dir: Path) -> dict:
    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    b = args.batch
    cfg = load_config(None, [
        f"model.path={model_path}", "model.dtype=float32", "model.device=cpu", "model.gradient_checkpointing=false",
        f"data.task={args.task}", f"data.difficulty={args.difficulty}", f"data.train_size={args.pool}",
        f"data.seed={args.seed}", "data.response_key=extra_info.solution", "algo.objective=sft", "rollout.n=1",
        "rollout.max_new_tokens=96", f"train.steps={args.steps}", f"train.global_batch={b}", f"train.mini_batch={b}",
        f"train.micro_batch={b}", f"train.lr={args.lr}", "train.lr_schedule=constant", "train.warmup_steps=0",
        "train.weight_decay=0.0", "train.betas=[0.9,0.999]", "train.grad_clip=1.0", f"train.seed={args.seed}",
        "val.size=1", "val.every=0", "checkpoint.every=0", f"log.run_dir={out_dir / 'reasonrl'}", "log.progress=false",
        "log.tensorboard=false",
    ])  # fmt: skip
    steps = [h for h in train(cfg, log=lambda *a, **k: None)["history"] if "perf/step_seconds" in h]
    return {"seconds": [h["perf/step_seconds"] for h in steps], "losses": [h["loss/nll"] for h in steps],
            "batch_seconds": [h["perf/generate_seconds"] for h in steps]}  # fmt: skip


def main(argv=None) -> int:
    args = parse_args(argv)
    model_path, pool = bench_setting(args)
    import torch

    from reasonrl.data.sampler import PromptSampler

    sampler = PromptSampler(pool, args.batch, seed=args.seed, shuffle=True)
    rows = [p for _ in range(args.steps) for p in sampler.next()]  # the rows reasonrl trains on, in order
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="compare_trl_sft-") as tmp:
        print("running trl ...", flush=True)
        torch.manual_seed(args.seed)
        out["trl"] = run_trl(args, model_path, rows, Path(tmp))
        print("running reasonrl ...", flush=True)
        torch.manual_seed(args.seed)
        out["reasonrl"] = run_reasonrl(args, model_path, Path(tmp))
    med = {n: statistics.median(r["seconds"][args.warmup :]) for n, r in out.items()}
    first = {n: r["losses"][0] for n, r in out.items()}
    last = {n: statistics.fmean(r["losses"][-5:]) for n, r in out.items()}
    print(
        f"\n{args.steps} steps of {args.batch} rows, lr {args.lr}; first {args.warmup} steps left out of timing"
    )
    print(f"{'trainer':<10}{'sec/step med':>14}{'loss@1':>10}{'loss last5':>12}")
    for n in out:
        print(f"{n:<10}{med[n]:>14.3f}{first[n]:>10.4f}{last[n]:>12.4f}")
    building = statistics.median(out["reasonrl"]["batch_seconds"][args.warmup :])
    print(f"reasonrl step (median): {building:.3f} s building the batch (tokenising the rows: TRL does that before "
          f"training), {med['reasonrl'] - building:.3f} s the update")  # fmt: skip
    agree = abs(first["trl"] - first["reasonrl"]) / first["trl"]
    print(f"speedup (TRL / reasonrl sec per step): {med['trl'] / med['reasonrl']:.2f}x; first-step losses differ by "
          f"{agree:.2e} (relative; the same rows through the same model)")  # fmt: skip
    print(json.dumps({"trl_sec_per_step": round(med["trl"], 4), "reasonrl_sec_per_step": round(med["reasonrl"], 4),
                      "speedup": round(med["trl"] / med["reasonrl"], 3), "trl_loss_first": round(first["trl"], 5),
                      "reasonrl_loss_first": round(first["reasonrl"], 5), "first_loss_rel_diff": agree,
                      "trl_loss_last5": round(last["trl"], 5), "reasonrl_loss_last5": round(last["reasonrl"], 5),
                      "reasonrl_batch_building_sec": round(building, 4), "steps": args.steps, "batch": args.batch,
                      "lr": args.lr}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
