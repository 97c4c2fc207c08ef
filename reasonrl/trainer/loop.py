"""The RL training loop, readable top to bottom.

Each step: sample prompts -> generate n completions per prompt -> score them with the routed
verifiers (refilling zero-variance groups with DAPO dynamic sampling) -> reward shaping -> old /
reference log-probs and critic values when needed -> advantages -> mini-batch policy (and critic)
updates -> metrics. The algorithm choices (`cfg.algo`) are combined here and in `trainer.step`. Periodically: held-out validation (greedy accuracy and mean@n) and a checkpoint.
`train(cfg, resume=True)` continues from the latest valid checkpoint and reproduces an uninterrupted
run. The run directory is locked for the run's duration (`trainer.rundir`); SIGINT / SIGTERM finish
the step, checkpoint and raise `Interrupted` (`trainer.signals`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import yaml

from reasonrl import distributed as dist
from reasonrl.config import RunConfig, to_dict
from reasonrl.data.files import write_text
from reasonrl.distributed import global_normalisers, is_main, reduce_metrics
from reasonrl.trainer import watchdog
from reasonrl.trainer.balance import balanced_minibatches, gather_batch
from reasonrl.trainer.batching import build_batch, minibatches, term_scores, without_inert_rows
from reasonrl.trainer.confidence import confidence_rewards
from reasonrl.trainer.critic import build_critic
from reasonrl.trainer.entropy_control import EntropyControl
from reasonrl.trainer.guidance import guided_prob
from reasonrl.trainer.kl_control import KLControl
from reasonrl.trainer.metrics import MetricsLog, mean_metrics
from reasonrl.trainer.plot import plot_run
from reasonrl.trainer.progress import Progress
from reasonrl.trainer.rollout_source import rollout_source
from reasonrl.trainer.rollouts import rollout_metrics, sample_groups
from reasonrl.trainer.rundir import claim, refuse_config_change_early
from reasonrl.trainer.setup import build_run, step_seed, validate_policy
from reasonrl.trainer.sft import perplexity
from reasonrl.trainer.shaping import shape_batch
from reasonrl.trainer.signals import Interrupted, StopOnSignal
from reasonrl.trainer.state import is_new_best, restore_state, save_state
from reasonrl.trainer.step import (
    attach_cov_selection,
    attach_entropy_mask,
    attach_tis_weights,
    compute_advantages,
    early_stop,
    estimator_needs,
    linear_in_advantage,
    make_loss_fn,
    selects_tokens,
)
from reasonrl.trainer.stop_rules import StopRules
from reasonrl.trainer.verifier_watch import VerifierFailing, VerifierWatch


def train(cfg: RunConfig, resume: bool = False, log=print, overwrite: bool = False,
          allow_config_change: bool = False) -> dict:  # fmt: skip
    # under torchrun: join the process group (gloo on CPU, NCCL on GPU); with one rank only for fsdp2
    created = dist.init_from_env(cfg.train.dist_timeout_s, single_rank=cfg.train.engine == "fsdp2")
    finished = False
    try:
        # rank 0 owns the run directory (exclusive lock; refuses to mix runs); the others wait for it
        lock = claim(cfg.log.run_dir, resume, overwrite, log=log) if dist.is_main() else None
        dist.barrier()
        try:
            with StopOnSignal(log=log) as stop:
                out = _train(cfg, resume, log, allow_config_change, stop)
                finished = True
                return out
        finally:
            if lock is not None:
                lock.release()
    finally:
        if created:
            # a finished run: no rank tears the group down while another may still use it (rank 0 plots and
            # releases the lock after the last checkpoint; a rank whose gloo threads were cut off by its peer's
            # teardown once aborted at exit: "terminate called without an active exception"). A failed run
            # skips this: a peer that died would never reach it
            if finished:
                dist.barrier("teardown")
            dist.shutdown()


def _train(cfg: RunConfig, resume: bool, log, allow_config_change: bool, stop: StopOnSignal) -> dict:
    if resume:  # a changed config is refused before the model loads
        refuse_config_change_early(cfg.log.run_dir, to_dict(cfg), allow_config_change)
    run = build_run(cfg, log=log)  # model, tokenizer, engines, data, sampler, reward scorer
    try:
        # a rank that crashed or hangs: an error naming rank and phase; a stalled phase: stacks, exit 70
        with dist.collective_errors(), watchdog.running(cfg.watchdog, cfg.log.run_dir, log):
            return _loop(run, cfg, resume, log, allow_config_change, stop)
    finally:
        run.close()  # engines, reward workers, the rollout worker: also when a step fails


def _loop(run, cfg: RunConfig, resume: bool, log, allow_config_change: bool, stop: StopOnSignal) -> dict:
    run_dir = Path(cfg.log.run_dir)
    needs = estimator_needs(cfg.algo)  # what the advantage estimator declared it takes
    critic = build_critic(cfg, log=log) if "values" in needs else None  # PPO value model
    run.entropy_control = control = EntropyControl(cfg.algo)  # saved with, restored from, the trainer state
    run.kl_control = KLControl(cfg.algo)  # the KL coefficient (adaptive with algo.kl.target); saved too
    start = restore_state(run, critic, cfg, allow_config_change, log) if resume else 0
    if start:  # an engine with its own weights samples the restored policy
        run.rollout_engine.sync_weights(run.model, start)
    main = is_main()  # only rank 0 writes (logs, rollouts, plots, checkpoints)
    if start >= cfg.train.steps and main:
        log(f"nothing to train: the checkpoint is at step {start}, train.steps={cfg.train.steps} (the run is "
            "complete; raise train.steps to continue it)")  # fmt: skip
    lg = cfg.log
    wandb = dict(project=lg.wandb_project, entity=lg.wandb_entity, mode=lg.wandb_mode, name=cfg.name,
                 config=to_dict(cfg)) if lg.wandb else None  # fmt: skip
    metrics_log = MetricsLog(
        run_dir, lg.tensorboard, resume_step=start if start else None, write=main, wandb=wandb
    )
    if main:
        write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    t, r, algo = cfg.train, cfg.rollout, cfg.algo
    # old log-probs: for off-policy updates, KL-in-reward and TIS (otherwise old == current, exactly)
    # rows with zero advantage contribute nothing unless the loss has other per-token terms
    # (not with several ranks: every rank must run the same number of forward / backward passes)
    skip_inert = (algo.kl.coef == 0 and algo.entropy_coef == 0 and not algo.entropy_control.enabled
                  and not algo.kl.in_reward
                  and dist.world_size() == 1
                  and linear_in_advantage(algo))  # fmt: skip
    mini_rows = t.mini_batch // dist.world_size()  # this rank's rows of each (global) mini-batch
    # several ranks: each global mini-batch re-split by tokens (the rows one process would take); on
    # one process (model.remove_padding) the same split into one part: the mini-batch by length
    balance = (t.balance_tokens and dist.world_size() > 1) or cfg.model.remove_padding or t.micro_tokens > 0
    run.train_engine.trim_padding = balance  # length-ordered micro-batches: cut their unused padding
    for engine in [run.train_engine] + ([critic.engine] if critic is not None else []):
        engine.micro_tokens = t.micro_tokens  # micro-batches by tokens: rows of similar length fill each
    # (TIS with one update per step takes its weights inside the loss, from those same log-probs)
    # (and clip_cov / kl_cov, which choose their tokens from them)
    needs_old = t.epochs > 1 or t.mini_batch < t.global_batch or algo.kl.in_reward or selects_tokens(algo)
    # (normalised weights: their mean over the whole batch, so taken before the updates)
    needs_old = needs_old or (algo.off_policy.tis_normalize and not algo.off_policy.bypass)
    sft = algo.objective == "sft"  # the data's responses (trainer.sft): no old log-probs, no reward shaping
    needs_old = needs_old and not sft

    if start == 0:
        watchdog.enter("validation", 0)
        metrics_log.log(0, validate_policy(run, cfg, 0, log if main else None))
    # rollouts generated here between updates, or by a worker process up to max_staleness versions ahead
    source = rollout_source(run, cfg, needs, start, run.replay_rollouts)
    run.closers.insert(0, source.close)
    progress = Progress(cfg.train.steps, start, enabled=cfg.log.progress and main)
    saved, warned_gap = None, False
    verifiers = VerifierWatch(cfg.reward.max_error_rate, cfg.reward.error_patience, log)
    rules = StopRules(t.stop_when)  # train.stop_when: a metric past its bound ends the run
    stopped_early = None
    for step in range(start + 1, t.steps + 1):
        t0 = time.perf_counter()
        watchdog.enter("generation", step)
        # 1. rollouts: n completions for each prompt of this step, scored by the verifiers; with
        #    dynamic sampling, groups whose rewards are all equal are replaced by new prompts
        rollouts, async_metrics = source.get(step)
        groups, reward_metrics, baseline = rollouts.groups, rollouts.metrics, rollouts.baseline
        try:  # a verifier failing on most of its calls for steps on end: stop before this update
            verifiers.check(step, reward_metrics, groups)
        except VerifierFailing:
            progress.close()
            metrics_log.close()
            raise
        t_gen = time.perf_counter()
        batch = build_batch(groups, run.pad_id)
        confident = {}  # reward.confidence: the policy's confidence in each completion is its reward
        if cfg.reward.confidence.measure != "none":
            confident = confidence_rewards(run.train_engine, batch, groups, cfg.reward.confidence.measure,
                                           t.micro_batch, r.temperature)  # fmt: skip
        if "term_rewards" in needs:  # gdpo: every reward term normalised on its own
            from reasonrl.rewards.verifiers.trl_function import TERM, function_weights

            split = function_weights(
                cfg.reward.options.get(TERM)
            )  # TRL's functions, each normalised on its own
            parts = {TERM: split, **({"correctness": split} if cfg.reward.verifier == TERM else {})}
            batch.term_rewards, batch.term_weights = term_scores(groups, cfg.reward.weights, parts)
        step_metrics = {} if sft else shape_batch(batch, algo, r.max_new_tokens)  # reward map, overlong, ...
        step_metrics.update(confident)
        # 2. the log-probs and values the advantages and the loss compare against, then advantages
        watchdog.enter("update", step)  # log-probs, values, advantages, then the updates
        if algo.top_entropy_quantile < 1:  # the tokens the policy gradient trains, by their entropy now
            old, entropy = run.train_engine.outputs(batch, t.micro_batch, with_entropy=True)
            batch.old_logprobs = old if needs_old else None
            step_metrics.update(attach_entropy_mask(batch, entropy, algo.top_entropy_quantile))
        elif needs_old and not algo.off_policy.bypass:
            batch.old_logprobs = run.train_engine.logprobs(batch, t.micro_batch)
        if algo.off_policy.bypass:  # verl's bypass mode: the sampler's log-probs are the old ones
            batch.old_logprobs = batch.sampler_logprobs
        step_metrics.update(
            guided_prob(run.train_engine, batch, t.micro_batch)
        )  # algo.guidance's demonstrations
        if algo.kl.coef > 0:
            batch.ref_logprobs = run.train_engine.logprobs(batch, t.micro_batch, reference=True)
        if critic is not None:
            batch.values = critic.values(batch, t.micro_batch)
        step_metrics.update(compute_advantages(batch, algo, baseline, run.kl_control))
        if selects_tokens(algo):  # clip_cov / kl_cov: their tokens, chosen over the whole batch
            step_metrics.update(attach_cov_selection(batch, algo, step_seed(t.seed, step) + 2))
        if algo.off_policy.tis_cap > 0 and batch.old_logprobs is not None and not algo.off_policy.bypass:
            step_metrics.update(attach_tis_weights(batch, algo.off_policy))  # (bypass: in each update)

        # 3. updates: `epochs` passes over the batch in shuffled mini-batches; a mini-batch that has
        #    drifted too far from the sampling policy is skipped (RLinf early stop)
        shuffle = torch.Generator().manual_seed(step_seed(t.seed, step) + 1)
        updates, stopped, bonus_on = [], 0, []
        frozen = step <= algo.critic.warmup_steps  # critic warm-up: the policy waits for useful values
        whole = gather_batch(batch, run.pad_id) if balance else None  # every rank's rows
        for _ in range(t.epochs):
            minis = (
                balanced_minibatches(whole, t.mini_batch, shuffle)
                if balance
                else minibatches(batch, mini_rows, shuffle)
            )
            for mini in minis:
                if critic is not None:
                    updates.append(critic.train_step(mini, t.micro_batch, algo.critic.value_clip))
                if frozen:
                    continue
                if early_stop(run.train_engine, mini, algo, t.micro_batch):
                    stopped += 1
                    continue
                counts = global_normalisers(mini.mask)  # the same divisor on every rank
                coef = control.applied()  # algo.entropy_coef, or what adaptive entropy control says now
                loss_fn = make_loss_fn(algo, counts["total_tokens"], counts["total_seqs"], r.max_new_tokens,
                                       entropy_coef=coef, kl_coef=run.kl_control.coef)  # fmt: skip
                if skip_inert:  # zero-advantage rows add exactly nothing: skip their forward/backward
                    mini = without_inert_rows(mini)
                updates.append(run.train_engine.train_step(mini, loss_fn, t.micro_batch,
                                                           with_entropy=coef > 0 or lg.entropy or control.enabled,
                                                           entropy_grad=coef > 0))  # fmt: skip
                control.update(updates[-1].get("actor/entropy", 0.0))
                bonus_on.append(coef > 0)
        # the adaptive KL loss coefficient moves with the KL the updates measured (in-reward: above)
        step_metrics.update(run.kl_control.after_updates(updates, len(batch.rewards)))
        if control.enabled:
            step_metrics.update({"actor/entropy_coef": control.coef,
                                 "actor/entropy_bonus_frac": sum(bonus_on) / max(len(bonus_on), 1)})  # fmt: skip
        if algo.kl.ref_sync_steps:  # the reference moves to the policy (ProRL reset / TRL sync_ref_model)
            synced = step % algo.kl.ref_sync_steps == 0
            if synced:
                run.train_engine.sync_reference(algo.kl.ref_sync_alpha)
                if algo.kl.ref_sync_reset_optimizer:  # ProRL: the optimizer starts over with the reference
                    run.train_engine.reset_optimizer()
            step_metrics["actor/ref_synced"] = float(synced)
        watchdog.enter("sync", step)
        source.updated(step)  # push the new policy (version = updates applied) to whoever samples
        t_end = time.perf_counter()

        # 4. metrics, validation, checkpoint
        metrics = {**reward_metrics, **rollout_metrics(batch), **step_metrics, **mean_metrics(updates)}
        if sft:
            metrics.update(perplexity(metrics))
        metrics["actor/early_stopped_minibatches"] = float(stopped)
        if algo.critic.warmup_steps:
            metrics["actor/frozen"] = float(frozen)
        metrics.update(run.rollout_engine.stats())  # weight-sync time and size
        # the policy version (updates applied) the step's samples came from: step - 1 when synchronous
        metrics.update({"rollout/policy_version": float(rollouts.version), **async_metrics})
        metrics.update(
            {
                "perf/step_seconds": t_end - t0,
                "perf/generate_seconds": t_gen - t0,
                "perf/train_seconds": t_end - t_gen,
                "perf/tokens_per_second": float(batch.attention_mask.sum()) / max(t_end - t0, 1e-9),
            }
        )
        if (cfg.val.every and step % cfg.val.every == 0) or step == t.steps:
            watchdog.enter("validation", step)
            metrics.update(validate_policy(run, cfg, step, log if main else None))
        watchdog.enter("checkpoint", step)  # metrics, then the checkpoint when due
        metrics = reduce_metrics(metrics)  # averaged over ranks (maxima maxed); identity on one process
        # (comparable only when the sampler drew from the whole tempered distribution: top-p / top-k
        # renormalise over fewer tokens than the trainer's log-softmax sees)
        plain = r.top_p >= 1.0 and r.top_k <= 0 and r.min_p <= 0
        warned_gap = warned_gap or (main and plain and _warn_gap(metrics, r.warn_logprob_gap, step, log))
        _warn_nonfinite(metrics, step, log if main else None)
        metrics_log.log(step, metrics)
        metrics_log.rollouts(step, sample_groups(groups, cfg.log.rollouts_per_step, step))
        progress.update(step, metrics)
        stopped_early = rules.check(step, metrics)  # (the reduced metrics: every rank decides alike)
        due = (
            (cfg.checkpoint.every and step % cfg.checkpoint.every == 0)
            or step == t.steps
            or bool(stopped_early)
        )
        due = is_new_best(run, cfg, step, metrics) or due  # checkpoint.keep_best: a new best is saved too
        stopping = dist.any_rank(bool(stop.signum))  # one decision for all ranks
        if due or (stopping and cfg.checkpoint.on_signal):  # every rank takes part; rank 0 writes
            saved = save_state(run, critic, cfg, step, source.checkpoint_state())
        if stopping:
            progress.close()
            metrics_log.close()
            raise Interrupted(stop.signum or 15, step, saved if (due or cfg.checkpoint.on_signal) else None)
        if stopped_early:
            if main:
                log(stopped_early)
            break
    progress.close()
    metrics_log.close()
    plot = plot_run(metrics_log.history, run_dir / "training.png", title=cfg.name) if main else None
    out = {"history": metrics_log.history, "plot": str(plot), "run_dir": str(run_dir)}
    if stopped_early:
        out["stopped"] = stopped_early
    if cfg.hub.push and main:  # export the last checkpoint with its model card and upload it
        from reasonrl.publish.hub import push_run

        h = cfg.hub
        out["hub"] = push_run(run_dir, h.repo, h.private, h.with_optimizer, log=log)
    return out


def _warn_nonfinite(metrics: dict, step: int, log) -> None:
    """Each step an update was dropped for a NaN / inf gradient norm says so (its loss and grad_norm are
    logged as null: the numbers of a step whose updates were not applied must not look like progress)."""
    for key, who in (("nonfinite_grad_frac", "policy"), ("critic/nonfinite_grad_frac", "critic")):
        frac = metrics.get(key, 0.0)
        if frac > 0 and log is not None:
            log(f"warning: step {step}: {frac:.0%} of the {who} updates were skipped, the gradient norm was not "
                f"finite (a NaN / inf loss or an overflow; {key}): lower train.lr, check the data and rewards")  # fmt: skip


def _warn_gap(metrics: dict, limit: float, step: int, log) -> bool:
    """Log (once per run: the caller stops asking) that the sampler's log-probs are far from the
    trainer's; True if it did."""
    gap = metrics.get("rollout/logprob_gap_mean")
    if not limit or gap is None or gap <= limit:
        return False
    log(f"warning: step {step}: the rollout engine's log-probs differ from the trainer's by {gap:.3g} per token on "
        f"average (rollout/logprob_gap_mean, above rollout.warn_logprob_gap={limit:g}): it is not sampling the "
        "policy being trained (a weight sync that did not take, another dtype, or an engine computing this model "
        "differently); see docs/rollouts.md, 'Catching a stale engine'")  # fmt: skip
    return True
