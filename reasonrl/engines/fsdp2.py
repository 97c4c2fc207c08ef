"""FSDP2 train engine: the single-device engine's interface on a model sharded with torch's
`fully_shard` over all ranks of a data-parallel run (gloo on CPU, NCCL on GPU).

Owns: wrapping (`fully_shard` on every decoder layer, then the root, on an explicit device mesh:
pytorch#132471), mixed precision on GPU (bf16 parameters, fp32 gradient reduction), optional CPU
offload, the gradient reduction that makes N ranks equal one process, the gradient norm of the
sharded gradients, and full (consolidated) state for checkpoints and weight sync. Does not own:
launching (`torchrun`, `reasonrl train` detects it), the reductions of normalisers and metrics
(`distributed`), what the loss is.

Gradients: each rank's loss is already normalised by the whole mini-batch's counts over all ranks
(`distributed.global_normalisers`), so the true gradient is the SUM of the ranks' gradients. FSDP2
averages over ranks, so the local loss is scaled by the world size before backward. On gloo the
reduction is forced to SUM followed by a division (`set_force_sum_reduction_for_comms`), because
gloo's AVG has summed instead of averaging (pytorch#162338); the 2-rank equivalence test catches
either mistake.
"""

from __future__ import annotations

import torch

from reasonrl.engines.single import LossFn, SingleDeviceEngine
from reasonrl.models.loading import unwrapped
from reasonrl.types import TrainBatch


def decoder_layers(model) -> list[torch.nn.Module]:
    """The model's repeated blocks: the outermost modules whose class is in HF's `_no_split_modules` (Mamba
    lists its MambaBlock and the MambaMixer inside it: sharding the mixer again would fail), or whose
    class name ends in "DecoderLayer" where the model lists none (BioGPT)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    is_layer = (
        (lambda m: type(m).__name__ in names)
        if names
        else (lambda m: type(m).__name__.endswith("DecoderLayer"))
    )
    layers, inside = [], []
    for name, m in model.named_modules():
        if is_layer(m) and not any(name.startswith(p) for p in inside):
            layers.append(m)
            inside.append(name + ".")
    if not layers:
        raise ValueError(
            f"{type(model).__name__}: no decoder layers found (_no_split_modules={sorted(names)})"
        )
    return layers


def is_sharded(model) -> bool:
    """The model (or any part of it) is `fully_shard`-ed: its state dict holds DTensor shards, also
    with one rank (FSDP2 on one device), so saving needs the full tensors gathered."""
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in model.modules())


def shard_model(model, device_type: str, bf16: bool = False, cpu_offload: bool = False):
    """`fully_shard` every decoder layer, then the root (the transformers model, inside a peft wrapper
    if there is one), over all ranks; returns the model."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import (
        CPUOffloadPolicy,
        FSDPModule,
        MixedPrecisionPolicy,
        OffloadPolicy,
        fully_shard,
    )

    mesh = init_device_mesh(device_type, (torch.distributed.get_world_size(),))
    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16
        else MixedPrecisionPolicy()
    )
    offload = CPUOffloadPolicy() if cpu_offload else OffloadPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, mp_policy=mp, offload_policy=offload)
    # the root is the transformers model itself, also under a peft wrapper: peft's generate calls it
    # directly, and FSDP2's root hooks (gathering embeddings, final norm and head) must run there
    root = unwrapped(model)
    fully_shard(root, mesh=mesh, mp_policy=mp, offload_policy=offload)
    if torch.distributed.get_backend() == "gloo":
        for m in model.modules():
            if isinstance(m, FSDPModule):
                m.set_force_sum_reduction_for_comms(True)
    return model


class FSDP2Engine(SingleDeviceEngine):
    """`SingleDeviceEngine` over a `fully_shard`-ed model (see the module doc). The model must be on
    its device and the process group initialised before construction."""

    def __init__(self, model, *, bf16: bool = False, cpu_offload: bool = False, ref_model=None, **kw):
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            raise RuntimeError("FSDP2Engine needs an initialised process group (run under torchrun)")
        device_type = next(model.parameters()).device.type
        self.world = torch.distributed.get_world_size()
        shard_model(model, device_type, bf16=bf16 and device_type == "cuda", cpu_offload=cpu_offload)
        if ref_model is not None:
            shard_model(ref_model, device_type, bf16=bf16 and device_type == "cuda", cpu_offload=cpu_offload)
        super().__init__(model, ref_model=ref_model, bf16=False, **kw)  # FSDP's policy replaces autocast

    def train_step(self, batch: TrainBatch, loss_fn: LossFn, micro_batch: int, with_entropy: bool = True,
                   entropy_grad: bool = True):  # fmt: skip
        world = self.world

        def scaled(micro, *outs):
            loss, metrics = loss_fn(micro, *outs)
            return loss * world, metrics  # FSDP averages over ranks; the global loss is their sum

        return super().train_step(batch, scaled, micro_batch, with_entropy, entropy_grad)

    def clip_gradients(self) -> torch.Tensor:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        return norm.full_tensor() if hasattr(norm, "full_tensor") else norm

    def full_state(self) -> tuple[dict, dict]:
        """(model, optimizer) state dicts with full tensors on CPU, on every rank (a collective)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        return get_state_dict(
            self.model, self.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )

    def state_dict(self, optimizer: bool = True) -> dict:
        """Scheduler state, and (optimizer=True) the full optimizer state gathered on every rank; a synced
        reference's full weights too."""
        out = {"scheduler": self.scheduler.state_dict(), "world_size": self.world}
        if optimizer:
            out["optimizer"] = self.full_state()[1]
        if self.ref_synced:
            out["reference"] = self.reference_state()
        return out

    def reference_state(self) -> dict:
        """The reference's full tensors on CPU, gathered one decoder layer at a time on every rank (a
        collective: every rank calls it)."""
        from reasonrl.engines.weights import full_weights

        return {k: v.clone() for k, v in full_weights(self.ref_model).items()}

    def load_reference(self, state: dict) -> None:
        """Full tensors in (every rank, the same dict), each rank keeps its own shards (any number of ranks)."""
        from reasonrl.engines.weights import load_hf_weights

        load_hf_weights(self.ref_model, state)
        self.ref_synced = True

    def load_state_dict(self, state: dict, keep_hyperparams: bool = False) -> None:
        """A full optimizer state is scattered to this rank's shards first; the schedule and the
        keep_hyperparams handling are the single-device engine's."""
        if "optimizer" in state:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

            set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"],
                                     options=StateDictOptions(full_state_dict=True))  # fmt: skip
        super().load_state_dict({k: v for k, v in state.items() if k != "optimizer"}, keep_hyperparams)

    def export_hf(self, out_dir, tokenizer=None, from_shards: bool = False) -> None:
        """A consolidated Hugging Face directory (safetensors + config, + tokenizer if given); every rank
        must call this. By default rank 0 writes full tensors gathered one at a time; from_shards: every
        rank writes its shards and rank 0 consolidates the files (`engines.hf_shards`), so no rank ever
        holds a full tensor in memory (unless transformers saves the model in another layout than it
        holds: then gathered, `hf_shards.writable_from_shards`)."""
        from reasonrl.engines.hf_shards import save_hf_from_shards, writable_from_shards

        if from_shards and writable_from_shards(self.model):
            save_hf_from_shards(self.model, out_dir)
            state = None
        else:
            from reasonrl.engines.weights import full_weights

            state = full_weights(self.model)
        if torch.distributed.get_rank() == 0:
            if state is not None:
                self.model.save_pretrained(out_dir, state_dict=state, safe_serialization=True)
            if tokenizer is not None:
                tokenizer.save_pretrained(out_dir)
        torch.distributed.barrier()
