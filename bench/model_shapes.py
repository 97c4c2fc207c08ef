"""Model shapes the GPU benchmarks build from a config alone (random init, no download), and the
FLOPs counted for model FLOPs utilisation.

`qwen2.5-0.5b`, `qwen2.5-1.5b` and `qwen2.5-7b` copy the published Qwen2.5 config.json values (layers,
widths, heads, vocabulary, tied embeddings, RoPE base); `custom` takes hidden / layers / vocab.
"""

from __future__ import annotations

PRESETS = {
    # name: (hidden, intermediate, layers, heads, kv_heads, vocab, tied embeddings)
    "qwen2.5-0.5b": (896, 4864, 24, 14, 2, 151936, True),
    "qwen2.5-1.5b": (1536, 8960, 28, 12, 2, 151936, True),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 152064, False),
}

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense bf16, SXM


def qwen2_config(preset: str, hidden: int = 1024, layers: int = 16, vocab: int = 32000, context: int = 32768):
    from transformers import Qwen2Config

    if preset == "custom":
        shape = (hidden, hidden * 11 // 4, layers, hidden // 64, max(1, hidden // 256), vocab, False)
    elif preset in PRESETS:
        shape = PRESETS[preset]
    else:
        raise SystemExit(f"unknown preset {preset!r}; known: custom, {', '.join(PRESETS)}")
    h, inter, n_layers, heads, kv, v, tied = shape
    return Qwen2Config(vocab_size=v, hidden_size=h, intermediate_size=inter, num_hidden_layers=n_layers,
                       num_attention_heads=heads, num_key_value_heads=kv, tie_word_embeddings=tied,
                       max_position_embeddings=context, rope_theta=1e6, rms_norm_eps=1e-6)  # fmt: skip


def matmul_params(cfg) -> int:
    """Parameters that take part in a matrix product per token: the decoder layers and the output head
    (the input embedding is a lookup; a tied head still multiplies)."""
    h, inter, n_layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    head_dim = h // cfg.num_attention_heads
    kv = cfg.num_key_value_heads * head_dim
    attn = h * h * 2 + h * kv * 2 + h + 2 * kv  # q, o, k, v (+ q/k/v biases)
    mlp = 3 * h * inter
    return n_layers * (attn + mlp + 2 * h) + h + cfg.vocab_size * h


def train_flops_per_token(cfg, seq: int) -> tuple[float, float]:
    """(6 x matmul params, the same plus causal attention) FLOPs of one trained token (forward + backward)
    at sequence length `seq`. Attention: QK^T and AV cost 4 x seq x hidden per token and layer in the
    forward pass, halved by the causal mask, x3 for forward + backward: 6 x layers x seq x hidden."""
    dense = 6.0 * matmul_params(cfg)
    return dense, dense + 6.0 * cfg.num_hidden_layers * seq * cfg.hidden_size


def peak_tflops(device_name: str) -> float | None:
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in device_name), None)
