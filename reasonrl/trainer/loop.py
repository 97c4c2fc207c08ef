"""The RL training loop, readable top to bottom.

Each step: sample prompts -> generate n completions per prompt -> score them with the routed
verifiers -> advantages -> (old / reference log-probs when needed) -> one or more mini-batch policy
updates -> metrics. Periodically: held-out validation (greedy accuracy and mean@n) and a checkpoint.
`train(cfg, resume=True)` continues from the latest checkpoint and reproduces an uninterrupted run.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from reasonrl.config import RunConfig, to_dict
from reasonrl.engines.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, set_rng_state
from reasonrl.rollout.base import SamplingParams
from reasonrl.trainer.batching import build_batch, minibatches
from reasonrl.trainer.metrics import MetricsLog, mean_metrics
from reasonrl.trainer.plot import plot_run
from reasonrl.trainer.progress import Progress
from reasonrl.trainer.rollouts import collect_rollouts, rollout_metrics, sample_rows
from reasonrl.trainer.setup import build_run, step_seed, validate_policy
from reasonrl.trainer.step import make_loss_fn, token_advantages


def train(cfg: RunConfig, resume: bool = False, log=print) -> dict:
    run_dir = Path(cfg.log.run_dir)
    run = build_run(cfg, log=log)  # model, tokenizer, engines, data, sampler, reward scorer
    start = 0
    ckpt = latest_checkpoint(run_dir) if resume else None
    if ckpt is not None:
        state, engine_state, rng = load_checkpoint(ckpt)
        run.train_engine.load_state_dict(engine_state)
        run.sampler.load_state_dict(state["sampler"])
        set_rng_state(rng)
        start = state["step"]
        log(f"resumed from {ckpt} (step {start})")
    elif resume:
        log(f"no checkpoint in {run_dir}; starting from scratch")
    metrics_log = MetricsLog(run_dir, cfg.log.tensorboard, resume_step=start if ckpt else None)
    (run_dir / "config.yaml").write_text(__import__("yaml").safe_dump(to_dict(cfg), sort_keys=False))
    t, r, algo = cfg.train, cfg.rollout, cfg.algo
    needs_old = t.epochs > 1 or t.mini_batch < t.global_batch  # otherwise old == current, exactly

    if start == 0:
        metrics_log.log(0, validate_policy(run, cfg))
    progress = Progress(cfg.train.steps, start, enabled=cfg.log.progress)
    for step in range(start + 1, t.steps + 1):
        t0 = time.perf_counter()
        # 1. rollouts: n completions for each prompt of this step, scored by the verifiers
        problems = run.sampler.next()
        params = SamplingParams(
            r.n, r.temperature, r.top_p, r.top_k, r.max_new_tokens, step_seed(t.seed, step)
        )
        groups, reward_metrics = collect_rollouts(run, problems, params)
        t_gen = time.perf_counter()
        batch = build_batch(groups, run.pad_id)

        # 2. advantages, and the log-probs the loss compares against
        batch.advantages = token_advantages(batch, algo)
        if needs_old:
            batch.old_logprobs = run.train_engine.logprobs(batch, t.micro_batch)
        if algo.kl_coef > 0:
            batch.ref_logprobs = run.train_engine.logprobs(batch, t.micro_batch, reference=True)

        # 3. policy updates: `epochs` passes over the batch in shuffled mini-batches
        shuffle = torch.Generator().manual_seed(step_seed(t.seed, step) + 1)
        updates = []
        for _ in range(t.epochs):
            for mini in minibatches(batch, t.mini_batch, shuffle):
                loss_fn = make_loss_fn(algo, mini.mask.sum(), mini.size, r.max_new_tokens)
                updates.append(run.train_engine.train_step(mini, loss_fn, t.micro_batch))
        run.rollout_engine.sync_weights(run.model)
        t_end = time.perf_counter()

        # 4. metrics, validation, checkpoint
        metrics = {**reward_metrics, **rollout_metrics(batch), **mean_metrics(updates)}
        metrics.update(
            {
                "perf/step_seconds": t_end - t0,
                "perf/generate_seconds": t_gen - t0,
                "perf/train_seconds": t_end - t_gen,
                "perf/tokens_per_second": float(batch.attention_mask.sum()) / max(t_end - t0, 1e-9),
            }
        )
        if (cfg.val.every and step % cfg.val.every == 0) or step == t.steps:
            metrics.update(validate_policy(run, cfg))
        metrics_log.log(step, metrics)
        metrics_log.rollouts(step, sample_rows(groups, cfg.log.rollouts_per_step, step))
        progress.update(step, metrics)
        if (cfg.checkpoint.every and step % cfg.checkpoint.every == 0) or step == t.steps:
            state = {"sampler": run.sampler.state_dict(), "config": to_dict(cfg)}
            save_checkpoint(
                run_dir,
                step,
                run.model,
                run.tokenizer,
                run.train_engine.state_dict(),
                state,
                cfg.checkpoint.keep_last,
            )
    progress.close()
    metrics_log.close()
    plot = plot_run(metrics_log.history, run_dir / "training.png", title=cfg.name)
    run.close()
    return {"history": metrics_log.history, "plot": str(plot), "run_dir": str(run_dir)}
