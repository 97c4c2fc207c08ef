"""The RL invariant across the architectures users train: the log-prob the HF engine records for each
sampled token equals the one every training forward recomputes for it (padded, chunked from hidden
states, packed, packed and chunked), and dropping finished rows samples what `generate` samples.
StableLM's decoder layers drop the pack's bounds on the way to attention: its packs are read off the
position ids. Tiny random models of each family, with weights large enough that what sets a family apart (Gemma's
attention and final soft-caps, gpt-oss's sinks and experts, sliding windows, Cohere's and Granite's
logit scales, experts, DeepSeek's latent attention) changes the numbers.

Hybrids (a convolution, a recurrence or linear attention beside attention, or instead of it) sample and
train padded and chunked with the same log-probs, and are refused packing: those layers run along the
whole pack (before, packed log-probs of LFM2, Qwen3-Next, Jamba, ... were off by 0.85-6.8 nats without an
error). Architectures whose left-padded rows depend on their padding are refused outright."""

from __future__ import annotations

import functools

import pytest
import torch
from _spread_weights import spread_weights

from reasonrl.config import ConfigError
from reasonrl.engines.packing import check_packing, packed_logprobs
from reasonrl.engines.single import completion_logprobs
from reasonrl.errors import InputError
from reasonrl.models.isolation import check_padding
from reasonrl.models.loading import attention_kwargs
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.types import TrainBatch

COMMON = dict(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, max_position_embeddings=64, eos_token_id=1, pad_token_id=0)  # fmt: skip
SOFTCAPS = dict(attn_logit_softcapping=2.0, final_logit_softcapping=3.0)
MLA = dict(head_dim=None, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
           v_head_dim=8)  # DeepSeek's latent attention  # fmt: skip
MOE_GROUPS = dict(moe_intermediate_size=32, first_k_dense_replace=1, n_group=1, topk_group=1)
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
    "smollm3": ("SmolLM3Config", {"no_rope_layers": [1, 0]}),  # a layer without rotary embeddings
    "glm4": ("Glm4Config", {}),
    "glm4_moe": (
        "Glm4MoeConfig",
        {
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),
    "exaone4": (
        "Exaone4Config",
        {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    ),
    "ernie4_5": ("Ernie4_5Config", {}),
    "hunyuan_v1_dense": ("HunYuanDenseV1Config", {}),
    "seed_oss": ("SeedOssConfig", {}),
    "qwen2_sliding": (
        "Qwen2Config",
        {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
    ),
    "gemma3n": (
        "Gemma3nTextConfig",
        {
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
            "hidden_size_per_layer_input": 8,
            "vocab_size_per_layer_input": 40,
            "num_kv_shared_layers": 0,
            "activation_sparsity_pattern": [0.0, 0.0],
            "altup_num_inputs": 2,
            "laurel_rank": 4,
        },
    ),
    "cohere2": (
        "Cohere2Config",
        {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    ),
    "olmo3": ("Olmo3Config", {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]}),
    "granitemoe": ("GraniteMoeConfig", {"num_local_experts": 2, "num_experts_per_tok": 1}),
    "phimoe": ("PhimoeConfig", {"num_local_experts": 2, "num_experts_per_tok": 2}),
    # the families transformers added through 2026 (transformers 5.19)
    "gemma4": ("Gemma4TextConfig", {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
                                    "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 40}),
    "minimax_m2": ("MiniMaxM2Config", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "ministral3": ("Ministral3Config", {}),
    "ministral": ("MinistralConfig", {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]}),
    "dots1": ("Dots1Config", {"n_shared_experts": 1, "n_routed_experts": 4, "num_experts_per_tok": 2, **MOE_GROUPS}),
    "exaone_moe": ("ExaoneMoeConfig", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    "apertus": ("ApertusConfig", {}),  # xIELU activation, QK norm
    "arcee": ("ArceeConfig", {}),  # ReLU^2 MLP
    "bitnet": ("BitNetConfig", {}),
    "olmoe": ("OlmoeConfig", {"num_experts": 4, "num_experts_per_tok": 2}),
    "hunyuan_v1_moe": ("HunYuanMoEV1Config", {"num_experts": 4, "moe_topk": 2}),
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", {"moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 32}),
    "deepseek_v2": ("DeepseekV2Config", {**MLA, "n_routed_experts": 4, "num_experts_per_tok": 2, **MOE_GROUPS}),
    "glm4_moe_lite": ("Glm4MoeLiteConfig", {**MLA, "n_routed_experts": 4, "num_experts_per_tok": 2, **MOE_GROUPS}),
    # Mistral 4's only class is in transformers' image-text-to-text mapping: loaded through it (`causal_lm_class`)
    "mistral4": ("Mistral4Config", {**MLA, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    "longcat_flash": ("LongcatFlashConfig", {**MLA, "head_dim": 8, "num_layers": 2, "ffn_hidden_size": 64, "moe_topk": 2,
                                            "n_routed_experts": 4, "zero_expert_num": 2, "expert_ffn_hidden_size": 32}),
}  # fmt: skip
M2 = dict(
    mamba_n_heads=8, mamba_d_head=8, mamba_d_state=8, mamba_chunk_size=8, mamba_n_groups=1
)  # Mamba-2 mixers
LINEAR = ["linear_attention", "full_attention"]
GATED_DELTA = dict(
    linear_num_value_heads=2, linear_num_key_heads=2, linear_key_head_dim=8, linear_value_head_dim=8
)
HYBRIDS = {  # name: (config class, extra settings); COMMON without head_dim
    "lfm2": ("Lfm2Config", {"layer_types": ["conv", "full_attention"], "block_ff_dim": 64}),
    "lfm2_moe": ("Lfm2MoeConfig", {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1,
                                   "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    "qwen3_next": ("Qwen3NextConfig", {"layer_types": LINEAR, "head_dim": 8, "linear_num_value_heads": 2,
                                       "linear_num_key_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
                                       "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                       "shared_expert_intermediate_size": 32}),
    "falcon_h1": ("FalconH1Config", {"head_dim": 8, "mamba_d_ssm": 32, "mamba_n_heads": 4, "mamba_d_head": 8,
                                     "mamba_d_state": 8, "mamba_chunk_size": 8}),
    "bamba": ("BambaConfig", {"attn_layer_indices": [1], **M2}),
    "granitemoehybrid": ("GraniteMoeHybridConfig", {"layer_types": ["mamba", "attention"], "num_local_experts": 2,
                                                    "num_experts_per_tok": 1, "shared_intermediate_size": 32, **M2}),
    "jamba": ("JambaConfig", {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
                              "expert_layer_offset": 1, "num_experts": 2, "mamba_d_state": 8}),
    "nemotron_h": ("NemotronHConfig", {"layers_block_type": ["mamba", "attention"], "head_dim": 8, "mamba_num_heads": 8,
                                       "mamba_head_dim": 8, "ssm_state_size": 8, "chunk_size": 8, "n_groups": 1}),
    "zamba2": ("Zamba2Config", {"layers_block_type": ["mamba", "hybrid"], "hybrid_layer_ids": [1], "mamba_headdim": 8,
                                "mamba_d_state": 8, "n_mamba_heads": 8, "chunk_size": 8, "attention_head_dim": 8}),
    "kimi_linear": ("KimiLinearConfig", {"layer_types": LINEAR, "mlp_layer_types": ["dense", "sparse"], "num_experts": 4,
                                         "num_experts_per_token": 2, "moe_intermediate_size": 32, "linear_head_dim": 8,
                                         "linear_num_heads": 4, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
                                         "v_head_dim": 8, "head_dim": 8, "num_key_value_heads": 4}),
    "olmo_hybrid": ("OlmoHybridConfig", {"layer_types": LINEAR, "linear_num_key_heads": 4, "linear_num_value_heads": 4,
                                         "linear_key_head_dim": 8, "linear_value_head_dim": 8}),
    "qwen3_5": ("Qwen3_5TextConfig", {"layer_types": LINEAR, "head_dim": 8, **GATED_DELTA}),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", {"layer_types": LINEAR, "head_dim": 8, **GATED_DELTA, "num_experts": 4,
                                             "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                             "shared_expert_intermediate_size": 32}),
    "mamba": ("MambaConfig", {"state_size": 8}),  # no attention at all (nor a DynamicCache: `cache_params`)
    "mamba2": ("Mamba2Config", {"num_heads": 8, "head_dim": 8, "state_size": 8, "chunk_size": 8, "n_groups": 1}),
    "falcon_mamba": ("FalconMambaConfig", {"state_size": 8}),
}  # fmt: skip
# DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): an indexer picks each query's top-k keys (4 here), as
# a mask under "eager" / "sdpa" only. 16 indexer heads: with 2, ReLU-zero index scores tie and topk breaks
# the ties by tensor shape, so a prefix and the whole sequence pick other keys (transformers' own
# forward, no padding: 4.8 nats apart on this tiny model).
DSA = {"index_topk": 4, "index_head_dim": 8, "index_n_heads": 16, **MLA, "n_routed_experts": 4, "num_experts_per_tok": 2,
       **MOE_GROUPS}  # fmt: skip
NAMED_ATTENTION = {"deepseek_v32": ("DeepseekV32Config", DSA), "glm_moe_dsa": ("GlmMoeDsaConfig", DSA)}
COMPRESSED = {  # DeepSeek-V4: keys and values compressed in blocks of the input beyond a sliding window
    "deepseek_v4": ("DeepseekV4Config", {"num_key_value_heads": 1, "head_dim": 16, "q_lora_rank": 16, "num_hidden_layers": 3,
                                         "layer_types": ["sliding_attention", "compressed_sparse_attention",
                                                         "heavily_compressed_attention"],
                                         "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                                         "mlp_layer_types": ["moe"] * 3, "num_experts_per_tok": 2, "n_routed_experts": 4,
                                         "moe_intermediate_size": 32, "sliding_window": 4, "o_groups": 2, "o_lora_rank": 16,
                                         "index_n_heads": 2, "index_head_dim": 8, "index_topk": 4, "hc_mult": 2}),
}  # fmt: skip
NO_PACKING = {  # attention by position in the whole input: chunks (here of 4 tokens), query scaling
    "llama4": ("Llama4TextConfig", {"attention_chunk_size": 4, "num_local_experts": 2, "num_experts_per_tok": 1,
                                    "intermediate_size_mlp": 64, "no_rope_layers": [1, 0], "interleave_moe_layer_step": 1}),
}  # fmt: skip
ATTENTION_FREE = ("mamba", "mamba2", "falcon_mamba")  # nothing reaches segment attention: a pack is refused
# A state carried step by step (sampling) and the same scan over the whole sequence at once (training) round
# differently: up to 3e-5 in fp32 (Qwen3-Next's gated delta rule). In these two, transformers' cached
# Mamba-2 step and its chunked scan (the CPU reference kernels) differ by up to ~0.02 nats, with `generate`
# as with our decode loop (one row, no padding, too). Every training forward still agrees with the others.
SAMPLER_GAP = {"nemotron_h": 0.05, "zamba2": 0.05}
LEFT_PADDING_BREAKS = {  # a left-padded row's outputs change with its padding (in transformers itself)
    "rwkv": ("RwkvConfig", {"attention_hidden_size": 32, "context_length": 64}),
    "recurrent_gemma": ("RecurrentGemmaConfig", {"block_types": ["recurrent", "attention"], "lru_width": 32,
                                                 "head_dim": 8}),
}  # fmt: skip
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


def _model(family: str, spread: bool = True):
    import transformers

    from reasonrl.models.loading import causal_lm_class

    if family in MULTIMODAL:
        cfg = _multimodal_config(family)
    elif family in FAMILIES or family in NO_PACKING or family in NAMED_ATTENTION or family in COMPRESSED:
        cls, extra = {**FAMILIES, **NO_PACKING, **NAMED_ATTENTION, **COMPRESSED}[family]
        cfg = getattr(transformers, cls)(**{k: v for k, v in {**COMMON, **extra}.items() if v is not None})
    else:
        cls, extra = {**HYBRIDS, **LEFT_PADDING_BREAKS}[family]
        cfg = getattr(transformers, cls)(**{**{k: v for k, v in COMMON.items() if k != "head_dim"}, **extra})
    torch.manual_seed(0)
    model = causal_lm_class(cfg).from_config(cfg, **attention_kwargs(cfg)).eval()  # as load_policy loads it
    return spread_weights(model, 0.3) if spread else model


def _multimodal_config(family: str):
    import transformers

    cls, text, vision, _ = MULTIMODAL[family]
    head_dim = {} if family in HYBRIDS else {"head_dim": COMMON["head_dim"]}
    text = {
        **{k: v for k, v in COMMON.items() if k != "head_dim"},
        **head_dim,
        **text,
    }  # vocabulary 40: EOS drawn
    return getattr(transformers, cls)(text_config=text, **({"vision_config": vision} if vision else {}))


def _sampled(model):
    """(batch, sampler log-probs [B, T]) of 16 prompts of several lengths, one completion each from the
    HF engine (checked equal to `generate`'s), prompts left-padded and completions right-padded."""
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
    assert sampler[batch.mask].min() < -1.0  # real distributions, not near-certain tokens
    return batch, sampler


@pytest.mark.parametrize("family", list(FAMILIES))
def test_sampler_logprobs_equal_every_training_forwards(family):
    model = _model(family)
    check_padding(model)
    batch, sampler = _sampled(model)
    check_packing(model)  # every family packs (a refusal is a ConfigError)
    for name, forward in FORWARDS.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        gap = ((lp - sampler) * batch.mask).abs().max().item()
        assert gap < 2e-5, f"{family} {name}: sampler vs recomputed log-probs differ by {gap:.2e}"


@pytest.mark.parametrize("family", [*HYBRIDS, *NO_PACKING])
def test_hybrids_train_on_the_sampled_logprobs_and_are_refused_packing(family):
    """Also Llama 4 (chunked attention, query scaling by position: packing gave log-probs 11 nats off;
    its chunked log-probs stopped on a shape error: `get_decoder()` returns the causal LM itself)."""
    model = _model(family)
    check_padding(model)  # their left padding is masked
    batch, sampler = _sampled(model)
    with torch.no_grad():
        padded, _ = FORWARDS["padded"](model, batch)
        chunked, _ = FORWARDS["chunked"](model, batch)
    assert ((padded - chunked) * batch.mask).abs().max() < 2e-5
    gap = ((padded - sampler) * batch.mask).abs().max().item()
    assert gap < SAMPLER_GAP.get(family, 1e-4), (
        f"{family}: sampler vs recomputed log-probs differ by {gap:.2e}"
    )
    if family not in ATTENTION_FREE:  # what packing would have trained on: the pack's sequences run together
        with torch.no_grad():
            packed, _ = FORWARDS["packed"](model, batch)
        assert ((packed - padded) * batch.mask).abs().max() > 0.1
    with pytest.raises(ConfigError, match=r"model.pack_tokens: .*set model.pack_tokens=0"):
        check_packing(model)


@pytest.mark.parametrize("family", list(NAMED_ATTENTION))
def test_a_model_whose_attention_changes_under_another_name_is_refused_packing_and_left_as_it_was(family):
    """DeepSeek-V3.2 / GLM-5 apply their sparse key selection only under "eager" / "sdpa"; renamed to
    segment attention they would run dense, generation included (before: 7.6 nats off the sampled
    log-probs after the packing check, and a TypeError from a pack instead of a refusal)."""
    model = _model(family)
    check_padding(model)
    batch, sampler = _sampled(model)
    with torch.no_grad():
        before = model(input_ids=batch.input_ids).logits
    with pytest.raises(
        ConfigError, match=r"model.pack_tokens: .* computes another forward under segment attention"
    ):
        check_packing(model)
    for name in ("padded", "chunked"):  # after the refusal the model computes what it did before
        with torch.no_grad():
            lp, _ = FORWARDS[name](model, batch)
        assert ((lp - sampler) * batch.mask).abs().max() < 2e-5, name
    with torch.no_grad():
        assert (model(input_ids=batch.input_ids).logits - before).abs().max() == 0
    assert model.config._attn_implementation == "sdpa"


def test_compressed_attention_is_refused_by_its_config():
    """DeepSeek-V4 compresses keys and values in blocks counted from the input's start (past a 128-token
    window in the real model, so no short probe sees it): left padding moves its blocks, and so would a
    pack. Refused at load and for packing, by its layer types."""
    model = _model("deepseek_v4")
    batch, sampler = _sampled(model)
    with torch.no_grad():  # what it would get wrong (the engine's and the trainer's padding differ)
        lp, _ = FORWARDS["padded"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() > 0.1
    with pytest.raises(
        InputError, match="compressed_sparse_attention, heavily_compressed_attention layers compress"
    ):
        check_padding(model)
    with pytest.raises(ConfigError, match=r"model.pack_tokens: .*compressed_sparse_attention"):
        check_packing(model)


@pytest.mark.parametrize("family", ["lfm2", "qwen3_next"])
def test_a_small_leak_is_refused_too_and_none_is_found_where_there_is_none(family):
    """At its default init LFM2's convolution passes 8.5e-5 of a sequence's dependence on to the next
    one in a pack: still refused. Attention families at their default init show exactly none."""
    with pytest.raises(ConfigError, match="carries state from one sequence of a pack into the next"):
        check_packing(_model(family, spread=False))
    for clean in ("llama", "gemma2", "gpt_oss", "deepseek_v3"):
        model = _model(clean, spread=False).to(torch.bfloat16)
        check_packing(model)
        check_padding(model)


def test_a_non_finite_backward_under_left_padding_is_named_not_taken_for_a_leak():
    """Gemma 3n whose pad embedding is zero (as `padding_idx` initialises it): its pad positions' hidden
    states are exactly 0, and `mean(h ** 2) ** 0.5` has a NaN gradient there, which reaches the
    parameters (all 49 gradients NaN for one left-padded row, fp32 and bf16). Before, the check turned
    the NaNs into zeros: it passed in fp32 and refused bf16 as depending on its padding (dependence
    inf). Padded with a token whose embedding is not zero, it passes."""
    model = _model("gemma3n", spread=False)
    assert model.get_input_embeddings().weight[0].abs().max() == 0
    for dtype in (torch.float32, torch.bfloat16):
        with pytest.raises(
            InputError, match=r"'gemma3n_text': the backward of a row left-padded with pad id 0 is not"
        ):
            check_padding(model.to(dtype), pad_id=0)
        check_padding(model, pad_id=1)


@pytest.mark.parametrize("family", list(LEFT_PADDING_BREAKS))
def test_a_model_that_left_padding_changes_is_refused(family):
    model = _model(family)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():  # what it would get wrong: a padded row's log-probs move with its padding
        alone = torch.log_softmax(model(input_ids=ids).logits, -1)
        padded = torch.log_softmax(model(input_ids=torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], 1),
                                         attention_mask=torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])).logits, -1)  # fmt: skip
    assert (alone - padded[:, 3:]).abs().max() > 0.5
    with pytest.raises(
        InputError, match=rf"model '{family}': a left-padded row's outputs depend on its padding"
    ):
        check_padding(model)


def test_loading_such_a_model_fails_before_any_work(tiny_model_and_tokenizer, tmp_path):
    import transformers

    from reasonrl.models.loading import load_policy

    _, tok = tiny_model_and_tokenizer
    cls, extra = LEFT_PADDING_BREAKS["rwkv"]
    settings = {**{k: v for k, v in COMMON.items() if k != "head_dim"}, **extra, "vocab_size": len(tok)}
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(getattr(transformers, cls)(**settings)).save_pretrained(
        tmp_path
    )
    tok.save_pretrained(tmp_path)
    with pytest.raises(InputError, match="model 'rwkv': a left-padded row's outputs depend on its padding"):
        load_policy(str(tmp_path), device="cpu", log=lambda *a: None)


VISION = dict(
    hidden_size=16,
    intermediate_size=32,
    num_heads=2,
    out_hidden_size=32,
    patch_size=4,
    num_position_embeddings=16,
)
MULTIMODAL = {  # saved from the multimodal class, as the hub's are: config, text settings, vision settings, loaded as
    "qwen3_5": ("Qwen3_5Config", HYBRIDS["qwen3_5"][1], dict(VISION, depth=1), "Qwen3_5ForCausalLM"),
    "gemma4": ("Gemma4Config", FAMILIES["gemma4"][1], None, "Gemma4ForConditionalGeneration"),
    # no causal-LM class in transformers: loaded as the image-text-to-text model
    "mistral3": ("Mistral3Config", {"model_type": "mistral"}, dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                 num_attention_heads=2, head_dim=8, patch_size=4, image_size=16), "Mistral3ForConditionalGeneration"),
    "qwen3_vl": ("Qwen3VLConfig", {}, dict(VISION, depth=1, deepstack_visual_indexes=[0]), "Qwen3VLForConditionalGeneration"),
}  # fmt: skip


@pytest.mark.parametrize("family", list(MULTIMODAL))
def test_a_multimodal_checkpoint_loads_as_its_language_model_and_keeps_the_invariant(family, tiny_model_and_tokenizer,
                                                                                     tmp_path):  # fmt: skip
    """Qwen3.5, Gemma 4, Mistral 3 and Qwen3-VL ship as multimodal checkpoints (`model.language_model.*`, a
    vision tower): `load_policy` gives the language model saved (the same logits, not freshly initialised
    weights; Mistral 3 and Qwen3-VL, which AutoModelForCausalLM refuses, as their image-text-to-text
    model), which samples and trains with the same log-probs (Qwen3.5 is a hybrid: packing refused)."""
    import transformers

    from reasonrl.models.loading import load_policy

    _, tok = tiny_model_and_tokenizer
    cls, loaded_as = MULTIMODAL[family][0], MULTIMODAL[family][3]
    torch.manual_seed(0)
    saved = getattr(transformers, cls.replace("Config", "ForConditionalGeneration"))(
        _multimodal_config(family)
    ).eval()
    saved.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, _ = load_policy(str(tmp_path), device="cpu", log=lambda *a: None)
    assert type(model).__name__ == loaded_as
    ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, saved(input_ids=ids).logits)
    model = spread_weights(model.eval(), 0.3)
    batch, sampler = _sampled(model)
    forwards = dict(FORWARDS)
    if family in HYBRIDS:
        with pytest.raises(ConfigError, match="carries state from one sequence of a pack into the next"):
            check_packing(model)
        forwards = {k: v for k, v in FORWARDS.items() if "packed" not in k}
    else:
        check_packing(model)
    for name, forward in forwards.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        gap = ((lp - sampler) * batch.mask).abs().max().item()
        assert gap < (1e-4 if family in HYBRIDS else 2e-5), (
            f"{family} {name}: sampler vs recomputed: {gap:.2e}"
        )
