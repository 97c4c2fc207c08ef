"""The policy's weights as a rollout engine wants them: Hugging Face names, the engine's dtype, grouped
by decoder layer.

Owns: `hf_name` (strips the prefixes that wrappers add to parameter names: activation checkpointing
`_checkpoint_wrapped_module.`, torch.compile `_orig_mod.`, FSDP1 `_fsdp_wrapped_module.`, PEFT's
`base_model.model.` and `.base_layer`; a name a rollout engine cannot place would otherwise be skipped
without an error and the engine would keep sampling the old policy), `layer_key` and
`hf_weight_groups` (one group per decoder layer, in model order: what vLLM's layerwise reload
processes as a unit, and the unit an FSDP engine unshards; a PEFT LoRA model's weights come merged,
W + scale * B @ A computed per layer, the live model untouched), and `load_hf_weights` (the reverse:
HF-named tensors copied into a plain model, tied weights through their first name), and
`in_saved_layout` (groups in the layout `save_pretrained` writes, which vLLM's loaders read). Does not own:
sending the weights (`rollout.vllm`, the async worker).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import torch

_WRAPPER_PARTS = ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module.")
_LAYER = re.compile(r"^(.*?\.layers\.\d+)\.")


def hf_name(name: str) -> str:
    """The checkpoint name of a parameter, whatever wrappers the training model carries."""
    for part in _WRAPPER_PARTS:
        name = name.replace(part, "")
    if name.startswith("base_model.model."):
        name = name[len("base_model.model.") :]
    return name.replace(".base_layer.", ".")


def layer_key(name: str) -> str:
    """The decoder layer a (checkpoint-named) tensor belongs to, or '' for everything outside the
    layers (embeddings, final norm, lm_head)."""
    m = _LAYER.match(name)
    return m.group(1) if m else ""


def _full(t: torch.Tensor) -> torch.Tensor:
    """The full tensor of an FSDP2 shard (a collective: every rank, in lock-step), else `t`."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _lora_delta(layer, adapter: str) -> torch.Tensor:
    """scale * B @ A of one peft LoRA linear layer, from full (gathered) A and B: peft's own
    get_delta_weight on FSDP2 shards lets DTensor pick redistributions that can differ between ranks."""
    if getattr(layer, "use_dora", {}).get(adapter):
        raise ValueError("weight sync: DoRA adapters are not supported")
    a, b = _full(layer.lora_A[adapter].weight), _full(layer.lora_B[adapter].weight)
    delta = b @ a
    return (delta.T if getattr(layer, "fan_in_fan_out", False) else delta) * layer.scaling[adapter]


def hf_weight_groups(model, dtype: torch.dtype | None = None) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The model's parameters and persistent buffers as [(hf_name, tensor)] groups, one per decoder
    layer (the tensors outside the layers before and after them), cast to `dtype` and detached.
    Tied weights appear once, under their first name (as in the saved checkpoint). FSDP2-sharded
    tensors are gathered one at a time: every rank must iterate in lock-step (collectives)."""
    seen: set[int] = set()
    group: list[tuple[str, torch.Tensor]] = []
    current: str | None = None
    lora = {
        n: m for n, m in model.named_modules() if hasattr(m, "get_delta_weight") and hasattr(m, "base_layer")
    }
    for raw, tensor in model.state_dict(keep_vars=False).items():
        if ".modules_to_save." in raw:
            raise ValueError(f"weight sync: {raw!r} is a PEFT modules_to_save copy, which is not supported")
        if "lora_" in raw:
            continue  # merged into the base weight below
        owner = lora.get(raw[: -len(".base_layer.weight")]) if raw.endswith(".base_layer.weight") else None
        local = getattr(tensor, "_local_tensor", tensor)  # an FSDP2 shard (DTensor) or a plain tensor
        if local.data_ptr() in seen and local.numel():
            continue  # tied (e.g. lm_head = embed_tokens): the checkpoint holds it once
        seen.add(local.data_ptr())
        tensor = _full(tensor)
        if owner is not None and not getattr(owner, "merged", False):  # W + scale * B @ A, nothing modified
            with torch.no_grad():
                tensor = tensor + sum(_lora_delta(owner, a).to(tensor.dtype) for a in owner.active_adapters)
        name = hf_name(raw)
        key = layer_key(name)
        if current is not None and key != current and group:
            yield group
            group = []
        current = key
        t = tensor.detach()
        group.append((name, t.to(dtype) if dtype is not None and t.is_floating_point() else t))
    if group:
        yield group


def in_saved_layout(model, groups) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """`groups` in the layout `save_pretrained` writes: transformers 5 holds some models' weights in
    another layout than their checkpoints (Mixtral's experts fused into `mlp.experts.gate_up_proj`, saved
    as `block_sparse_moe.experts.N.w1` / `w3`), and reverts that conversion on save; vLLM's loaders read
    the saved layout (a Mixtral sync was refused naming `layers.0.mlp`). Unchanged where transformers
    converts nothing."""
    from transformers.core_model_loading import revert_weight_conversion

    from reasonrl.models.loading import unwrapped

    for group in groups:
        saved = revert_weight_conversion(unwrapped(model), dict(group))
        # a group with nothing converted keeps its order: the reversal sorts names, and vLLM 0.32's
        # Qwen3-Next then left its head unloaded (lm_head sorted before model.norm)
        yield group if saved.keys() == {n for n, _ in group} else list(saved.items())


def full_weights(model) -> dict[str, torch.Tensor]:
    """Every weight as a full CPU tensor under its HF name (merged LoRA, gathered FSDP2 shards: every
    rank must call this in lock-step); what checkpoints and exports write."""
    return {name: t.cpu() for group in hf_weight_groups(model) for name, t in group}


def load_hf_weights(model, weights: dict[str, torch.Tensor]) -> None:
    """Copy HF-named tensors (what `hf_weight_groups` yields) into a plain or FSDP2-sharded model's own
    tensors (every rank calls it with the full tensors, in the same order, when sharded). Every
    name must be the model's, and every tensor of the model must be given (tied ones through the
    tensor they share), so a push can never leave part of the model stale."""
    own = model.state_dict()
    unknown = sorted(set(weights) - set(own))
    given = {_ptr(own[n]) for n in weights if n in own}
    missing = [n for n, t in own.items() if n not in weights and _ptr(t) not in given]
    if unknown or missing:
        raise ValueError(f"weights do not fit the model: unknown {unknown[:3]}, missing {missing[:3]}")
    with torch.no_grad():
        for name, t in weights.items():
            dst = own[name]
            if hasattr(dst, "device_mesh"):  # an FSDP2 shard takes its part of the full tensor (collective)
                from torch.distributed.tensor import distribute_tensor

                t = distribute_tensor(t.to(dst.dtype), dst.device_mesh, dst.placements)
            dst.copy_(t)


def _ptr(t: torch.Tensor) -> int:
    return getattr(t, "_local_tensor", t).data_ptr()
