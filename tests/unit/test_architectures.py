"""The RL invariant across the architectures users train: the log-prob the HF engine records for each
sampled token equals the one every training forward recomputes for it (padded, chunked from hidden
states, packed, packed and chunked), and dropping finished rows samples what `generate` samples.
StableLM's decoder layers drop the pack's bounds on the way to attention: its packs are read off the
position ids. Tiny random models of each family, with weights large enough that what sets a family apart (Gemma's
attention and final soft-caps, gpt-oss's sinks and experts, sliding windows, Cohere's and Granite's
logit scales, experts, DeepSeek's latent attention) changes the numbers."""

from __future__ import annotations

import functools

import pytest
import torch
from _spread_weights import spread_weights

from reasonrl.engines.packing import check_packing, packed_logprobs
from reasonrl.engines.single import completion_logprobs
from reasonrl.models.loading import attention_kwargs
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.types import TrainBatch

COMMON = dict(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, max_position_embeddings=64, eos_token_id=1, pad_token_id=0)  # fmt: skip
SOFTCAPS = dict(attn_logit_softcapping=2.0, final_logit_softcapping=3.0)
FAMILIES = {  # name: (config class, extra settings)
    "llama": ("LlamaConfig", {}),
    "mistral": ("MistralConfig", {"sliding_window": 4}),
    "qwen3": ("Qwen3Config", {}),
    "gemma2": ("Gemma2Config", {"sliding_window": 4, **SOFTCAPS}),
    "gemma3": ("Gemma3TextConfig", {"sliding_window": 4, **SOFTCAPS}),
    "gpt_oss": ("GptOssConfig", {"sliding_window": 4, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "olmo2": ("Olmo2Config", {}),
    "phi3": ("Phi3Config", {"head_dim": None}),
    "cohere": ("CohereConfig", {"logit_scale": 2.0}),
    "granite": ("GraniteConfig", {"logits_scaling": 4.0}),
    "qwen3_moe": (
        "Qwen3MoeConfig",
        {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    ),
    "mixtral": ("MixtralConfig", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "deepseek_v3": (
        "DeepseekV3Config",
        {
            "head_dim": None,
            "num_key_value_heads": 4,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "kv_lora_rank": 16,
            "q_lora_rank": 16,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 8,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "gpt_neox": ("GPTNeoXConfig", {"head_dim": None}),
    "stablelm": ("StableLmConfig", {"head_dim": None}),  # packs bounded by position ids (kwargs dropped)
}
FORWARDS = {
    "padded": completion_logprobs,
    "chunked": functools.partial(completion_logprobs, chunk=5),
    "packed": functools.partial(packed_logprobs, pack_tokens=64),
    "packed+chunked": functools.partial(packed_logprobs, pack_tokens=32, chunk=4),
}


class Tok:
    pad_token_id, eos_token_id, bos_token_id = 0, 1, None

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def _model(family: str):
    import transformers

    cls, extra = FAMILIES[family]
    settings = {k: v for k, v in {**COMMON, **extra}.items() if v is not None}
    cfg = getattr(transformers, cls)(**settings)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, **attention_kwargs(cfg)).eval()
    return spread_weights(model, 0.3)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_sampler_logprobs_equal_every_training_forwards(family):
    model = _model(family)
    prompts = [[2 + (i * 7 + j) % 37 for j in range(3 + i % 9)] for i in range(16)]
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=12, seed=2)
    ours = [c for g in HFRolloutEngine(model, Tok()).generate(prompts, params) for c in g]
    plain = [
        c for g in HFRolloutEngine(model, Tok(), drop_finished=False).generate(prompts, params) for c in g
    ]
    assert [c.token_ids for c in ours] == [c.token_ids for c in plain]
    assert len({len(c.token_ids) for c in ours}) > 1  # completions of several lengths: padding matters

    p, t = max(map(len, prompts)), max(len(c.token_ids) for c in ours)
    ids = torch.zeros(len(prompts), p + t, dtype=torch.long)
    attn, sampler = torch.zeros_like(ids), torch.zeros(len(prompts), t)
    for i, (prompt, c) in enumerate(zip(prompts, ours)):  # prompts left-padded, completions right-padded
        ids[i, p - len(prompt) : p + len(c.token_ids)] = torch.tensor(prompt + c.token_ids)
        attn[i, p - len(prompt) : p + len(c.token_ids)] = 1
        sampler[i, : len(c.token_ids)] = torch.tensor(c.sampler_logprobs)
    batch = TrainBatch(input_ids=ids, attention_mask=attn, mask=attn[:, p:].bool(), prompt_len=p)
    check_packing(model)  # every family packs (a refusal is a ConfigError)
    for name, forward in FORWARDS.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        gap = ((lp - sampler) * batch.mask).abs().max().item()
        assert gap < 2e-5, f"{family} {name}: sampler vs recomputed log-probs differ by {gap:.2e}"
    assert sampler[batch.mask].min() < -1.0  # real distributions, not near-certain tokens
