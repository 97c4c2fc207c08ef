"""The shape of the configured model, read from its config alone (no weights loaded): sizes the memory
estimate needs, and exact parameter counts from a model built on the `meta` device.

Owns: `model_shape(path, lora)` for a Hugging Face directory or hub id (its config.json) and for the
built-in `demo` / `demo:<task>` model (its `TinySpec`, without building it).
"""

from __future__ import annotations

from dataclasses import dataclass

from reasonrl.errors import InputError


@dataclass
class ModelShape:
    name: str
    params: int  # all parameters
    trainable: int  # those the optimizer updates (LoRA: the adapters only)
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    context: int  # max_position_embeddings
    largest_layer: int  # parameters of the largest decoder layer (what FSDP2 unshards at once)
    norms_per_layer: int = 2  # hidden-sized norms in a decoder layer (Gemma 2: 4, around both sublayers)
    eager_attention: bool = False  # the attention runs eager (keeps [heads, T, T] probabilities)
    attention: str = "sdpa"  # the attention implementation training runs (after `lean_attention`)
    attn_softcap: bool = False  # attention logits soft-capped (eager keeps the tanh output too)
    # attention in code of the model's own, outside transformers' interface (BLOOM, GPT-J, ...): a pack
    # runs it under a [P, P] block mask (engines.packing), keeping [heads, P, P] probabilities
    own_attention: bool = False
    kv_layers: int | None = None  # layers that cache keys and values while generating (None: all of them)
    # sum of kv heads x head dim over those layers where it differs between them (Gemma 4: head dim 256
    # on its sliding-window layers, 512 on its full-attention ones); None: kv_layers x kv_heads x head_dim
    kv_width: int | None = None


def hf_config(path: str):
    """The transformers config of `path` (the demo model's from its TinySpec, without building it)."""
    from transformers import AutoConfig

    if path == "demo" or path.startswith("demo:"):
        from reasonrl.models.tiny import TinySpec, qwen2_config

        return qwen2_config(TinySpec())
    from reasonrl.models.hub import offline_unless_reachable
    from reasonrl.models.loading import check_model_path

    check_model_path(path)
    offline_unless_reachable(path)
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise InputError(
            f"model.path={path}: cannot read its config.json ({str(e).splitlines()[0]})"
        ) from None


def model_shape(
    path: str, lora_rank: int = 0, lora_targets: list[str] | None = None, config=None
) -> ModelShape:
    """config: the model's already-loaded config (a training run has it), instead of reading `path`'s."""
    import torch

    from reasonrl.models.loading import attention_kwargs, causal_lm_class, lean_attention, text_config

    cfg = config if config is not None else hf_config(path)
    text = text_config(cfg)
    with torch.device("meta"):  # with the attention implementation training will load it with
        model = causal_lm_class(cfg).from_config(cfg, **attention_kwargs(cfg))
    lean_attention(model)  # sinks and soft-caps run without eager's kept scores (`load_policy`)
    params = sum(p.numel() for p in model.parameters())
    from reasonrl.engines.fsdp2 import decoder_layers

    try:  # the blocks FSDP2 shards one at a time (Mamba's are MambaBlocks, not *DecoderLayer)
        layers = decoder_layers(model)
    except ValueError:
        layers = []
    largest = max((sum(p.numel() for p in layer.parameters()) for layer in layers), default=params)
    trainable = params
    if lora_rank > 0:  # "all-linear": every linear layer but the output head (peft's meaning)
        from reasonrl.trainer.setup import language_linears

        targets = set(lora_targets or [])
        every = targets == {"all-linear"}
        language = set(language_linears(model) or ()) if every else set()  # a multimodal model's
        head = model.get_output_embeddings()
        trainable = sum(lora_rank * (m.in_features + m.out_features) for name, m in model.named_modules()
                        if isinstance(m, torch.nn.Linear) and m is not head
                        and (name in language if language else every or name.rsplit(".", 1)[-1] in targets))  # fmt: skip
    heads = int(getattr(text, "num_attention_heads", None) or 0)  # 0: a state-space model (Mamba)
    hidden = int(text.hidden_size)
    norms = [m for m in (layers[0].modules() if layers else ()) if "Norm" in type(m).__name__
             and getattr(getattr(m, "weight", None), "numel", lambda: 0)() == hidden]  # fmt: skip
    return ModelShape(
        name=path,
        params=params,
        trainable=trainable,
        layers=int(text.num_hidden_layers),
        hidden=hidden,
        intermediate=int(_setting(text, "intermediate_size") or 4 * hidden),
        heads=heads,
        kv_heads=int(_setting(text, "num_key_value_heads") or heads),
        head_dim=int(_setting(text, "head_dim") or (hidden // heads if heads else 0)),
        vocab=int(text.vocab_size),
        context=int(getattr(text, "max_position_embeddings", 0) or 0),
        largest_layer=largest,
        norms_per_layer=len(norms) or 2,
        eager_attention=getattr(model.config, "_attn_implementation", None) == "eager",
        attention=str(getattr(model.config, "_attn_implementation", None) or "sdpa"),
        attn_softcap=bool(getattr(text, "attn_logit_softcapping", None)),
        own_attention=not (
            getattr(model, "_supports_attention_backend", True) or getattr(model, "_supports_sdpa", True)
        ),
        kv_layers=_kv_layers(cfg) if heads else 0,
        kv_width=_kv_width(cfg, text) if heads else None,
    )


def _per_layer(text) -> list | None:
    """Each layer's view of `text` (transformers' per-layer configs, where Gemma 4 sets head_dim per
    layer), or None where this transformers has none."""
    try:
        return list(getattr(text, "per_layer_config", None) or []) or None
    except (AttributeError, RuntimeError, TypeError):
        return None


def _setting(text, name: str):
    """`text.<name>`, or the largest of its per-layer values where the config sets it per layer (as a list,
    or in per-layer configs, where reading the global one raises transformers'
    AmbiguousGlobalPerLayerAttributeError, a RuntimeError)."""
    try:
        value = getattr(text, name, None)
    except RuntimeError:
        values = [getattr(c, name, None) for c in _per_layer(text) or ()]
        return max((v for v in values if v is not None), default=None)
    if isinstance(value, (list, tuple)):  # one per layer in the config itself (Gemma 3n's intermediate_size)
        return max(value, default=None)
    return value


def _kv_width(cfg, text) -> int | None:
    """Sum of kv heads x head dim over the layers that cache keys and values, each read from its own
    layer's view, where they differ between layers; None where one value holds for all."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    per = _per_layer(text)
    if per is None:
        return None
    try:
        layers = DynamicCache(config=cfg).layers
    except Exception:  # noqa: BLE001 - a layout this transformers cannot build: every layer caches
        layers = []
    caching = [i for i, x in enumerate(layers) if isinstance(x, DynamicLayer)] or range(len(per))
    widths = [(getattr(per[i], "num_key_value_heads", None) or 0) * (getattr(per[i], "head_dim", None) or 0)
              for i in caching]  # fmt: skip
    return sum(widths) if len(set(widths)) > 1 and all(widths) else None  # (Qwen2's views have no head_dim)


def _kv_layers(cfg) -> int | None:
    """How many layers keep keys and values for every position while generating, as transformers lays
    out the model's cache: the attention layers of a hybrid (not its convolution, recurrence or linear
    attention layers, whose state does not grow); None (all) where it cannot say."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    try:
        layers = DynamicCache(config=cfg).layers
    except Exception:  # noqa: BLE001 - a layout this transformers cannot build: count every layer
        return None
    return sum(isinstance(x, DynamicLayer) for x in layers) if layers else None
