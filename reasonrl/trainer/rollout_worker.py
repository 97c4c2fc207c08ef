"""The asynchronous rollout worker: a separate process with its own policy copy, rollout engine, reward
runner and prompt sampler, generating and scoring whole steps ahead of the trainer.

Owns: the worker's main loop (`worker_main`) and its message protocol, and packing a policy into one
flat shared-memory tensor per dtype (`pack_weights` / `unpack_weights`), so a weight push is one
buffer, not one per parameter. Messages to the worker, handled strictly in order:
  ("weights", version, packed)  load this policy version into the worker's model and engine
  ("rollouts", step, version)   generate step `step` from policy `version` (the latest weights
                                 received must be that version: the trainer sends them first)
  ("stop",)
Messages back: ("ready", pid), ("rollouts", step, StepRollouts), ("error", phase, traceback).
The worker's current phase ("loading policy 4", "generating step 7 from policy 5") is kept in shared
memory so the trainer can name it when the worker hangs or dies. The worker dies with its parent
(PR_SET_PDEATHSIG), so a killed trainer leaves no process behind.
Does not own: when to ask for what (`trainer.rollout_source`) or generating a step
(`trainer.sampling.step_rollouts`).
"""

from __future__ import annotations

import traceback

import torch


def pack_weights(model) -> dict:
    """{dtype name: (flat tensor in shared memory, [(name, shape, offset)])} of the policy's weights
    under their Hugging Face names (`engines.weights.hf_weight_groups`: a LoRA policy's merged, an
    FSDP2 policy's gathered one tensor at a time, so every rank must call this in lock-step)."""
    from reasonrl.engines.weights import hf_weight_groups

    by_dtype: dict[torch.dtype, list[tuple[str, torch.Tensor]]] = {}
    for group in hf_weight_groups(model):
        for name, t in group:
            by_dtype.setdefault(t.dtype, []).append((name, t))
    packed = {}
    for dtype, items in by_dtype.items():
        flat = torch.empty(sum(t.numel() for _, t in items), dtype=dtype)
        index, offset = [], 0
        for name, t in items:
            flat[offset : offset + t.numel()].copy_(t.reshape(-1).cpu())
            index.append((name, tuple(t.shape), offset))
            offset += t.numel()
        packed[str(dtype)] = (flat.share_memory_(), index)
    return packed


def unpack_weights(packed: dict) -> dict[str, torch.Tensor]:
    out = {}
    for flat, index in packed.values():
        for name, shape, offset in index:
            n = 1
            for d in shape:
                n *= d
            out[name] = flat[offset : offset + n].view(shape)
    return out


def _set_phase(phase, text: str) -> None:
    data = text.encode()[: len(phase) - 1]
    phase[: len(data)] = data
    phase[len(data)] = 0


def worker_main(cfg_dict: dict, sampler, sampler_state: dict, threads: int, inbox, outbox, phase,
                share: tuple[int, int, int] = (0, 1, 0), group: tuple | None = None) -> None:  # fmt: skip
    """share: (rank, world size, local rank) of the trainer process this worker serves; group: where
    the workers of all ranks meet to form their own process group (`distributed.side_group_address`),
    when a step's decisions need every rank's rollouts."""
    import signal

    from reasonrl import distributed as dist
    from reasonrl.rewards.worker import die_with_parent

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's: it checkpoints, then stops us
    dist.set_share(share[0], share[1])  # this rank's prompts of every step
    if torch.cuda.is_available():
        torch.cuda.set_device(share[2])  # the rank's GPU, as the trainer's process uses
    try:
        if group is not None:
            _set_phase(phase, "joining the other ranks' rollout workers")
            dist.join_side_group(group, share[0], share[1], cfg_dict["rollout"]["worker_timeout_s"])
        _serve(cfg_dict, sampler, sampler_state, threads, inbox, outbox, phase)
    except BaseException:  # noqa: BLE001 - reported to the trainer, which names the phase
        outbox.put(("error", bytes(phase[:]).split(b"\0")[0].decode(), traceback.format_exc()))
    finally:
        dist.shutdown()


def _serve(cfg_dict, sampler, sampler_state, threads, inbox, outbox, phase) -> None:
    import os

    from reasonrl.config import from_dict, import_plugins
    from reasonrl.engines.weights import load_hf_weights
    from reasonrl.models.loading import load_policy
    from reasonrl.rollout.factory import build_rollout_engine
    from reasonrl.rollout.interaction import make_interaction
    from reasonrl.trainer.rollouts import make_scorer
    from reasonrl.trainer.sampling import step_rollouts
    from reasonrl.trainer.setup import Run
    from reasonrl.trainer.step import estimator_needs

    torch.set_num_threads(threads)
    _set_phase(phase, "starting")
    cfg = from_dict(cfg_dict)
    import_plugins(cfg.plugins)
    model, tokenizer = load_policy(cfg.model.path, cfg.model.dtype, cfg.model.device, log=lambda *a: None)
    model.eval().requires_grad_(False)
    sampler.load_state_dict(sampler_state)
    sampler.bind(tokenizer)
    engine = build_rollout_engine(cfg.rollout.engine, model, tokenizer, cfg.rollout.engine_kwargs, cfg.rollout.tools,
                                  dict(cfg.data.chat_template_kwargs), cfg.rollout.agent)  # fmt: skip
    scorer = make_scorer(cfg)
    run = Run(model, tokenizer, engine, None, scorer, sampler, [], [], cfg.data.max_prompt_tokens,
              think_from_prompt=cfg.reward.think_from_prompt)  # fmt: skip
    run.interaction = make_interaction(cfg, tokenizer)
    run.pseudo_label = cfg.reward.pseudo_label if cfg.reward.pseudo_label.enabled else None
    needs = estimator_needs(cfg.algo)
    version = None
    outbox.put(("ready", os.getpid()))
    try:
        while True:
            msg = inbox.get()
            if msg[0] == "stop":
                return
            if msg[0] == "weights":
                _set_phase(phase, f"loading policy {msg[1]}")
                load_hf_weights(model, unpack_weights(msg[2]))
                engine.sync_weights(model, msg[1])
                version = msg[1]
                continue
            _, step, want = msg
            if version != want:
                raise RuntimeError(f"asked for step {step} from policy {want}, but holds policy {version}")
            _set_phase(phase, f"generating step {step} from policy {version}")
            out = step_rollouts(run, cfg, step, needs, version)
            _set_phase(phase, f"idle after step {step}")
            outbox.put(("rollouts", step, out))
    finally:
        scorer.close()
        engine.close()
        if run.interaction is not None:
            run.interaction.close()
