"""Hugging Face safetensors written straight from FSDP2 shards, with no rank holding the full model.

Owns: `shard_state` (the model's tensors under their Hugging Face names, tied weights once, each still
the rank's shard) and `save_hf_from_shards`: torch.distributed.checkpoint with torch's
`HuggingFaceStorageWriter` -- every rank writes its own shards, then rank 0 consolidates them into
`model-0000i-of-0000N.safetensors` files of at most `max_file_bytes` each (tensors in model order)
plus `model.safetensors.index.json`, reading the shard files tensor by tensor, and writes the model's
config; the shard files are removed. transformers and vLLM load the result like any sharded
checkpoint. Used by checkpoints with `checkpoint.sharded` on several ranks (`trainer.state`) and
`FSDP2Engine.export_hf(from_shards=True)`.
Not for a LoRA policy: its exported weights are W + scale * B @ A, computed from gathered adapters
(`engines.weights.hf_weight_groups`); nor for a model transformers saves in another layout than it
holds (Mixtral's fused experts: `writable_from_shards`), which the callers then write gathered.
Does not own: the gathered path (`engines.weights`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from reasonrl.engines.weights import hf_name
from reasonrl.models.loading import unwrapped

MAX_FILE_BYTES = 5 * 1024**3  # what transformers' save_pretrained shards at by default


def shard_state(model) -> dict[str, torch.Tensor]:
    """{hf_name: tensor} of the model's state dict, sharded tensors left as they are; tied tensors
    once, under their first name (as `save_pretrained` writes them)."""
    if hasattr(model, "peft_config"):
        raise ValueError("a LoRA policy's weights are merged from gathered adapters; use engines.weights")
    seen: set[int] = set()
    out = {}
    for raw, t in model.state_dict().items():
        local = getattr(t, "_local_tensor", t)
        if local.numel() and local.data_ptr() in seen:
            continue
        seen.add(local.data_ptr())
        out[hf_name(raw)] = t.detach()
    return out


def writable_from_shards(model) -> bool:
    """Whether `save_pretrained` would write this model's tensors under the names and shapes it holds
    them: transformers 5 fuses some models' weights in memory (Mixtral's experts into
    `mlp.experts.gate_up_proj`) and splits them back on save, into the layout other tools (vLLM) read.
    The shards hold the fused tensors, so such a model is exported from gathered ones instead."""
    from transformers.core_model_loading import revert_weight_conversion

    shapes = {
        hf_name(n): torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")
        for n, t in model.state_dict().items()
    }
    return revert_weight_conversion(unwrapped(model), shapes).keys() == shapes.keys()


def file_index(state: dict[str, torch.Tensor], max_file_bytes: int = MAX_FILE_BYTES) -> dict[str, int]:
    """Tensor name -> output file number (1..N): in order, a new file when the next full tensor would
    take the current one past `max_file_bytes` (a tensor larger than that gets a file of its own)."""
    index, size, out = 1, 0, {}
    for name, t in state.items():
        nbytes = t.numel() * t.element_size()  # a DTensor's numel is the full tensor's
        if size and size + nbytes > max_file_bytes:
            index, size = index + 1, 0
        out[name] = index
        size += nbytes
    return out


def save_hf_from_shards(model, out_dir, max_file_bytes: int = MAX_FILE_BYTES) -> None:
    """Every rank calls this (collectives); see the module docstring."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter

    from reasonrl.distributed import barrier, is_main

    out = Path(out_dir)
    state = shard_state(model)
    writer = HuggingFaceStorageWriter(str(out), fqn_to_index_mapping=file_index(state, max_file_bytes),
                                      save_distributed=True, enable_consolidation=True)  # fmt: skip
    dcp.save(state, storage_writer=writer)  # returns once rank 0 has consolidated the shards
    if is_main():
        shutil.rmtree(out / "sharded", ignore_errors=True)
        inner = unwrapped(model)
        inner.config.architectures = [type(inner).__name__]  # as save_pretrained records it
        inner.config.save_pretrained(out)
        if getattr(inner, "generation_config", None) is not None and inner.can_generate():
            inner.generation_config.save_pretrained(out)
    barrier("save_hf_from_shards")
