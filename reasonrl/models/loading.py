"""Loading a policy: any Hugging Face causal-LM directory or hub id (or a multimodal one, for its text
generation: `causal_lm_class`), or "demo" for the tiny model.

Owns: device / dtype choice, the attention implementation (`attention_kwargs`: eager where
transformers' default SDPA would silently drop part of the model's attention; attention sinks through
SDPA instead of eager, `models.sinks`), the model cache
directory, and `load_policy(path, ...) -> (model, tokenizer)` with the tokenizer padded on the left
(in two halves for runs that check settings before loading weights: `load_tokenizer_and_config`,
`load_model`),
refusing a model that left padding changes (`models.isolation`; padding with the EOS token where the
pad token's backward is not finite, `pad_with_a_finite_backward`), and the corrections that make a
model decode what it trains (`unclamp_time_steps`: Mamba-2 mixers clamping dt outside decoding
only). Does not own: building the tiny demo model (`models.tiny`) or saving (`engines.checkpoint`
writes the Hugging Face format).
"""

from __future__ import annotations

import os
from pathlib import Path


def resolve_device(device: str) -> str:
    """ "auto" -> cuda where there is one, else cpu; InputError for a device this machine does not have."""
    import torch

    from reasonrl.errors import InputError

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise InputError(f"device {device!r}: not a torch device (auto, cpu, cuda, cuda:N, ...)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} asked for (model.device / --device), but torch {torch.__version__} "
                         "sees no CUDA device here; use cpu or auto")  # fmt: skip
    return device


def cache_root() -> Path:
    return Path(os.environ.get("REASONRL_CACHE", Path.home() / ".cache" / "reasonrl"))


def resolve_model_path(path: str, log=print) -> str:
    """'demo' (or 'demo:<task>') -> the cached tiny model, built on first use; anything else unchanged
    (a hub id the hub cannot serve from here: offline mode first, `models.hub`)."""
    if path == "demo" or path.startswith("demo:"):
        from reasonrl.models.tiny import TinySpec, ensure_demo_model

        task = path.split(":", 1)[1] if ":" in path else "arithmetic"
        return str(ensure_demo_model(TinySpec(task=task), cache_root(), log=log))
    from reasonrl.models.hub import offline_unless_reachable

    offline_unless_reachable(path)
    return path


def text_config(config):
    """The language model's part of a config (a multimodal config's text_config; itself otherwise)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def unwrapped(model):
    """The transformers model itself: the one inside a peft wrapper, or `model`."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def attention_kwargs(config) -> dict:
    """Keyword arguments for `from_pretrained` / `from_config`: eager attention for a model whose
    attention logits are soft-capped (Gemma 2): transformers' SDPA path drops the cap without a word,
    so generation, training and evaluation would all run another model than the checkpoint (and than
    vLLM, which applies it). Otherwise none: transformers' default."""
    return (
        {"attn_implementation": "eager"}
        if getattr(text_config(config), "attn_logit_softcapping", None)
        else {}
    )


def causal_lm_class(config):
    """transformers' auto class that builds `config`'s model for generating text: AutoModelForCausalLM,
    or AutoModelForImageTextToText for a multimodal model that has no causal-LM class (Mistral 3,
    Qwen3-VL, GLM-4.5V, ...) or whose checkpoint was saved from its image-text-to-text class where
    the causal-LM class is the language model alone (Qwen3.5, Llama 4): it generates from text alone
    too, and trains on text prompts with the vision tower unused, so checkpoints and exports are the
    whole model again, under the names it was loaded with (vision tower as it was)."""
    from transformers import AutoModelForCausalLM
    from transformers.models.auto import modeling_auto as auto

    kind = getattr(config, "model_type", None)
    causal = auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    multimodal = getattr(auto, "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", {})
    saved_as = (getattr(config, "architectures", None) or [None])[0]
    if kind in multimodal and (kind not in causal or saved_as == multimodal[kind] != causal[kind]):
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText
    return AutoModelForCausalLM


def unclamp_time_steps(model, log=print) -> int:
    """Give every Mamba-2 mixer the time-step limit (0, inf) its one-token decoding step already works
    with; returns how many mixers changed. transformers' Mamba-2 mixers clamp dt to `time_step_limit` in
    the chunked scan (prefill, and every training forward) but not in the step that decodes one token,
    and Nemotron-H's and Zamba2's set that limit's floor to `time_step_min` (their configs' dt_bias
    initialisation range; Nemotron-H's own `time_step_limit` setting, (0, inf), goes unread): sampled
    log-probs then came from another model than the trained ones (0.02 nats apart on a tiny model).
    Unclamped, both are the model vLLM and mamba_ssm's Mamba2 (dt_limit (0, inf)) run."""
    changed = 0
    for module in model.modules():
        limit = getattr(module, "time_step_limit", None)
        if limit is not None and hasattr(module, "dt_bias") and tuple(limit) != (0.0, float("inf")):
            module.time_step_limit = (0.0, float("inf"))
            changed += 1
    if changed:
        log(f"{type(model).__name__}: {changed} Mamba-2 mixers clamped dt outside decoding only; "
            "now unclamped everywhere, so sampled and trained log-probs come from one model")  # fmt: skip
    return changed


DTYPE_NAMES = ("float32", "bfloat16", "float16")  # model.dtype choices: names of torch dtypes


def torch_dtype(name: str):
    import torch

    if name not in DTYPE_NAMES:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPE_NAMES)}")
    return getattr(torch, name)


def load_policy(path: str, dtype: str = "float32", device: str = "auto", log=print):
    """(model, tokenizer) on the chosen device, tokenizer padded on the left for generation (with its EOS
    token where its pad token's backward is not finite: `pad_with_a_finite_backward`); InputError for a
    model whose left-padded rows depend on their padding (`models.isolation.check_padding`)."""
    path, tokenizer, config = load_tokenizer_and_config(path, log=log)
    return load_model(path, config, tokenizer, dtype, device, log=log), tokenizer


def check_model_path(path: str) -> None:
    """InputError for a local path (starting with ".", "/" or "~") that does not exist, or a directory
    without config.json; a hub id passes (the hub says what it lacks)."""
    from reasonrl.errors import InputError

    local = Path(path).expanduser()
    if path.startswith((".", "/", "~")) and not local.exists():
        raise InputError(f"model path not found: {path}")
    if local.is_dir() and not (local / "config.json").is_file():
        raise InputError(f"model directory {path} has no config.json (a Hugging Face model directory holds "
                         "config.json, the weights and the tokenizer's files)")  # fmt: skip


def load_tokenizer_and_config(path: str, log=print):
    """(resolved path, tokenizer padded on the left, config): what checks before the weights need (a
    training run's prompt lengths and the planner's checks), read without loading the weights."""
    from transformers import AutoConfig, AutoTokenizer

    from reasonrl.errors import InputError

    path = resolve_model_path(path, log=log)
    check_model_path(path)
    try:
        config = AutoConfig.from_pretrained(path)  # (a hub id: its error says what the hub lacks)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:  # not a model directory, an unknown hub id, no network, ...
        raise InputError(
            f"model {path}: cannot load its tokenizer and config ({str(e).splitlines()[0]})"
        ) from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return path, tokenizer, config


def load_model(path: str, config, tokenizer, dtype: str = "float32", device: str = "auto", log=print):
    """The weights of `load_tokenizer_and_config`'s model on the chosen device (the second half of
    `load_policy`; may change the tokenizer's pad token, see there)."""
    from reasonrl.errors import InputError

    device = resolve_device(device)  # a device this machine lacks: before the weights load
    try:
        model = causal_lm_class(config).from_pretrained(
            path, config=config, dtype=torch_dtype(dtype), **attention_kwargs(config)
        )
    except OSError as e:  # no weight files, an unreadable one, no network for a hub id
        raise InputError(f"model {path}: cannot load its weights ({str(e).splitlines()[0]})") from None
    model.to(device)
    lean_attention(model, log=log)
    unclamp_time_steps(model, log=log)
    pad_with_a_finite_backward(model, tokenizer, log=log)  # every batch is left-padded
    if model.generation_config is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def disable_dropout(model) -> int:
    """Sets every dropout of `model` to 0 in place: `nn.Dropout` modules' p, and the float rates
    attention modules read in training mode (transformers' `attention_dropout`); returns how many were
    above 0. The config is left as it is, so exported checkpoints keep the model's own settings."""
    import torch

    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            module.p, changed = 0.0, changed + 1
        rate = getattr(module, "attention_dropout", None)
        if isinstance(rate, float) and rate > 0:
            module.attention_dropout, changed = 0.0, changed + 1
    return changed


def lean_attention(model, log=None) -> None:
    """Replace eager attention where transformers runs a model with it only because SDPA cannot do its
    arithmetic, which writes out every layer's [B, H, Q, K] scores: attention sinks through SDPA
    (`models.sinks`), soft-capped scores in blocks of queries (`models.softcap`). Training, generation
    and the planner's measurements all run the model this way."""
    from reasonrl.models.sinks import use_sink_sdpa
    from reasonrl.models.softcap import use_softcap_attention

    for switch, what in ((use_sink_sdpa, "attention sinks through SDPA (models/sinks.py)"),
                         (use_softcap_attention, "soft-capped attention in blocks (models/softcap.py)")):  # fmt: skip
        if switch(model) and log is not None:
            log(f"{type(model).__name__}: {what} instead of eager attention")


def switch_eager_attention(model, name: str, function) -> bool:
    """Run `model` with the attention function `function`, registered with transformers as `name`
    (SDPA's boolean masks), where every config of it runs eager attention; returns whether it did."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    configs = [c for m in model.modules() if hasattr(c := getattr(m, "config", None), "_attn_implementation")]
    if any(c._attn_implementation != "eager" for c in configs):
        return False
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, sdpa_mask)
    for c in configs:
        c._attn_implementation = name
    return True


def pad_with_a_finite_backward(model, tokenizer, log=print) -> None:
    """`models.isolation.check_padding` with the tokenizer's pad token; where left padding with it gives
    NaN gradients (Gemma 3n: a pad embedding of zeros, as `padding_idx` keeps it, then a norm without
    epsilon), the EOS token pads instead if it passes, and the log says so; else the check's error."""
    from reasonrl.models.isolation import PadGradientNotFinite, check_padding

    try:
        check_padding(model, tokenizer.pad_token_id, log=log)
    except PadGradientNotFinite:
        eos = tokenizer.eos_token_id
        if eos is None or eos == tokenizer.pad_token_id:
            raise
        check_padding(model, eos, log=log)
        log(f"{type(model).__name__}: left padding with pad token {tokenizer.pad_token!r} gives NaN gradients (its "
            f"embedding is zero); padding with the EOS token {tokenizer.eos_token!r} instead")  # fmt: skip
        tokenizer.pad_token = tokenizer.eos_token
