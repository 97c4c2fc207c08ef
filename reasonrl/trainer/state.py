"""Exact resume: what a checkpoint holds of a run, and putting it back.

Owns: `save_state` (policy in HF format, optimizer / scheduler / critic state, sampler position, RNG,
config, and an async run's pending rollouts) and `restore_state` (the newest checkpoint that verifies,
falling back past corrupt or unloadable ones; the policy weights copied in place one tensor at a time,
so no second copy of the model is ever held; a checkpoint of another model, or a PPO resume without
the critic's state, is an error; config changes refused or applied, see `trainer.rundir`). Does not
own: the checkpoint files' layout and integrity (`engines.checkpoint`).
"""

from __future__ import annotations

import math
from pathlib import Path

from reasonrl.config import ConfigError, RunConfig, migrate, to_dict
from reasonrl.engines.checkpoint import (
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
    verify_checkpoint,
)
from reasonrl.trainer.rundir import check_resume_config


def save_state(run, critic, cfg: RunConfig, step: int, pending: list[dict] | None = None) -> Path:
    """pending: async rollouts asked for and not yet trained on ([{step, rollouts}], see
    trainer.rollout_source); saved with the sampler position after them, replayed on resume."""
    from reasonrl.distributed import all_gather_objects, barrier, is_main, world_size

    sampler = pending[-1]["rollouts"].sampler_state if pending else run.sampler.state_dict()
    state = {"sampler": sampler, "config": to_dict(cfg), "best": run.best, "world_size": world_size()}
    if run.entropy_control is not None and run.entropy_control.enabled:
        state["entropy_control"] = run.entropy_control.state_dict()
    if run.kl_control is not None and run.kl_control.adaptive:
        state["kl_control"] = run.kl_control.state_dict()
    sharded = cfg.checkpoint.sharded
    tmp = None
    if sharded:  # rank 0 makes the directory; every rank writes its optimizer shards into it
        from reasonrl.engines.checkpoint import new_checkpoint_dir

        tmp = all_gather_objects(str(new_checkpoint_dir(cfg.log.run_dir, step)) if is_main() else None)[0]
        run.train_engine.save_sharded_optimizer(Path(tmp) / "dcp")
    # the optimizer state in engine.pt, gathered in full (every rank), unless it went to the shards
    engine_state = run.train_engine.state_dict(optimizer=not sharded)
    if critic is not None:
        engine_state["critic"] = critic.state_dict()
    if world_size() > 1:  # every rank's own pending batches (each rank's worker generated its share)
        by_rank = all_gather_objects(pending or [])
        if any(by_rank):
            engine_state["rollouts_by_rank"] = by_rank
    elif pending:
        engine_state["rollouts"] = pending
    weights = lora = None
    from reasonrl.engines.fsdp2 import is_sharded

    sharded_model = is_sharded(run.model)  # FSDP2, also on one rank
    from reasonrl.engines.hf_shards import save_hf_from_shards, writable_from_shards

    # the weights' HF files too, written from the shards (no rank gathers the model), unless they are
    # saved in another layout than the model holds (then gathered, below)
    from_shards = (
        sharded
        and sharded_model
        and not hasattr(run.model, "peft_config")
        and writable_from_shards(run.model)
    )
    if from_shards:
        save_hf_from_shards(run.model, tmp)
    elif sharded_model:  # full tensors of a sharded model, gathered one at a time on every rank
        from reasonrl.engines.weights import full_weights

        weights = full_weights(run.model)  # a LoRA policy's merged weights
        if hasattr(run.model, "peft_config"):  # and its live state (base + adapters), for resume
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            lora = get_model_state_dict(
                run.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
    path = None
    if is_main():
        protect = [run.best["step"]] if run.best else []
        from reasonrl.trainer.manifest import build_manifest

        path = save_checkpoint(cfg.log.run_dir, step, run.model, run.tokenizer, engine_state, state,
                               cfg.checkpoint.keep_last, protect, model_state=weights, tmp=tmp,
                               manifest=build_manifest(cfg, step), lora_state=lora,
                               weights_written=from_shards)  # fmt: skip
        if run.best and run.best["step"] == step:
            _write_best(path.parent, run.best)
    barrier("checkpoint")  # no rank goes on (or exits) before the checkpoint is complete
    return path


def is_new_best(run, cfg: RunConfig, step: int, metrics: dict) -> bool:
    """checkpoint.keep_best: does this step's validation improve the best value (recorded in run.best)?"""
    key = cfg.checkpoint.keep_best
    if key is None or step == 0 or metrics.get(key) is None:
        return False
    value, best = float(metrics[key]), run.best
    if math.isnan(value):  # no measurement (a first NaN would otherwise stay "best" for good)
        return False
    better = best is None or (
        value > best["value"] if cfg.checkpoint.best_mode == "max" else value < best["value"]
    )
    if better:
        run.best = {"metric": key, "step": step, "value": value}
    return better


def _write_best(root: Path, best: dict) -> None:
    import json

    from reasonrl.data.files import write_text

    write_text(root / "best.json", json.dumps({**best, "checkpoint": f"step_{best['step']:06d}"}))


def restore_state(run, critic, cfg: RunConfig, allow_config_change: bool = False, log=print) -> int:
    """Load the newest valid checkpoint of cfg.log.run_dir into the run; returns its step (0: none)."""
    run_dir = Path(cfg.log.run_dir)
    for ckpt in reversed(list_checkpoints(run_dir)):
        problem = verify_checkpoint(ckpt)
        if problem is None:
            try:
                state, engine_state, rng = load_checkpoint(ckpt)
                _check_weights(run.model, ckpt)
            except ConfigError:  # readable, but not this model's: never silently fall back past it
                raise
            except Exception as e:  # noqa: BLE001 - an unreadable file: fall back like a bad manifest
                problem = f"cannot be loaded ({type(e).__name__}: {str(e)[:200]})"
        if problem is not None:
            log(f"warning: skipping checkpoint {ckpt.name}: {problem}")
            continue
        if critic is not None and "critic" not in engine_state:
            raise ConfigError(f"checkpoint {ckpt} has no critic state, but algo.adv_estimator=gae needs one")
        changed = check_resume_config(migrate(state.get("config", {})), to_dict(cfg), allow_config_change, run_dir,
                                      state["step"], log)  # fmt: skip
        _load_in_place(run.model, ckpt)
        if (ckpt / "dcp").is_dir():  # optimizer shards: read back on any number of ranks
            run.train_engine.load_sharded_optimizer(ckpt / "dcp")
        run.train_engine.load_state_dict(engine_state, keep_hyperparams=changed)
        if critic is not None:
            critic.load_state_dict(engine_state["critic"])
        run.sampler.load_state_dict(state["sampler"])
        run.replay_rollouts = _pending_rollouts(engine_state, state.get("world_size", 1), log)
        run.best = state.get("best")
        if run.entropy_control is not None:
            run.entropy_control.load_state_dict(state.get("entropy_control"))
        if run.kl_control is not None and run.kl_control.adaptive:
            run.kl_control.load_state_dict(state.get("kl_control"))
        set_rng_state(rng)
        log(f"resumed from {ckpt} (step {state['step']})")
        return int(state["step"])
    log(f"no usable checkpoint in {run_dir}; starting from scratch")
    return 0


def _pending_rollouts(engine_state: dict, saved_world: int, log) -> list | None:
    """This rank's batches an async checkpoint holds (asked for, not yet trained on), or None. Saved by
    another number of ranks they are another split of the steps: dropped, so the resumed run is valid
    but not bit-exact."""
    from reasonrl.distributed import rank, world_size

    by_rank = engine_state.get("rollouts_by_rank")
    pending = by_rank[rank()] if by_rank and saved_world == world_size() else None
    if by_rank is None and saved_world == world_size():
        pending = engine_state.get("rollouts")
    if pending is None and (by_rank or engine_state.get("rollouts")):
        log(f"warning: the checkpoint's pending rollouts were generated for {saved_world} rank(s), this run "
            f"has {world_size()}: they are generated again (the resumed run is not bit-exact)")  # fmt: skip
    return pending


def _weight_files(ckpt: Path) -> list[Path]:
    files = sorted(ckpt.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {ckpt}")
    return files


def _check_weights(model, ckpt: Path) -> None:
    """The checkpoint's tensor names and shapes (read from the file headers) fit the model; only tied
    weights may be absent. Checked before anything is loaded or recorded (a shape that differs would
    otherwise fail half-way through the copy, or broadcast into the model)."""
    from safetensors import safe_open

    own = model.state_dict()
    shapes: dict[str, tuple] = {}
    for f in _weight_files(ckpt):
        with safe_open(str(f), framework="pt") as st:
            shapes.update({k: tuple(st.get_slice(k).get_shape()) for k in st.keys()})
    present = {_ptr(own[k]) for k in shapes if k in own}
    untied = [k for k in own if k not in shapes and _ptr(own[k]) not in present]
    unexpected = sorted(shapes.keys() - own.keys())
    if untied or unexpected:
        raise ConfigError(
            f"checkpoint {ckpt} does not match the model: missing {untied[:3]}, unexpected {unexpected[:3]}"
        )
    resized = [
        f"{k} {list(v)} (model: {list(own[k].shape)})" for k, v in shapes.items() if v != tuple(own[k].shape)
    ]
    if resized:
        raise ConfigError(
            f"checkpoint {ckpt} does not match the model: other shapes, {'; '.join(resized[:3])}"
        )


def _ptr(t) -> int:
    return getattr(t, "_local_tensor", t).data_ptr()


def _load_in_place(model, ckpt: Path) -> None:
    """Copy the checkpoint's tensors into the live policy one at a time (no second copy of the model);
    an FSDP2-sharded parameter takes its own shard of the full tensor."""
    import torch
    from safetensors import safe_open

    own = model.state_dict()
    with torch.no_grad():
        for f in _weight_files(ckpt):
            with safe_open(str(f), framework="pt") as st:
                for name in st.keys():
                    src, dst = st.get_tensor(name), own[name]
                    if hasattr(dst, "device_mesh"):  # a DTensor shard
                        from torch.distributed.tensor import distribute_tensor

                        src = distribute_tensor(src.to(dst.dtype), dst.device_mesh, dst.placements)
                    dst.copy_(src)
