"""Test data: tiny configurations of the architectures `test_architectures.py` checks, grouped by what
reasonrl does with them (every forward; hybrids refused packing; refused at load; ...). COMMON holds the
shared sizes; each entry is (config class, settings on top of COMMON)."""

from __future__ import annotations

COMMON = dict(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, max_position_embeddings=64, eos_token_id=1, pad_token_id=0)  # fmt: skip
SOFTCAPS = dict(attn_logit_softcapping=2.0, final_logit_softcapping=3.0)
MLA = dict(head_dim=None, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
           v_head_dim=8)  # DeepSeek's latent attention  # fmt: skip
MOE_GROUPS = dict(moe_intermediate_size=32, first_k_dense_replace=1, n_group=1, topk_group=1)
MOE = dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
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
    # late 2026 (transformers 5.19): MiMo-V2-Flash, nanochat, Meta's CWM, Trinity (AFMoE), Solar Open, Laguna,
    # Hunyuan V3, A.X K1, Youtu, HyperCLOVA X, Jais 2, Mellum, FlexOlmo, Granite SWA, Cohere 2 MoE, HRM,
    # MiniMax-M3's text model, Gemma 4 Unified, VaultGemma, and the older families not swept before
    **{k: (c, {}) for k, c in [("mimo_v2_flash", "MiMoV2FlashConfig"), ("nanochat", "NanoChatConfig"),
                                ("cwm", "CwmConfig"), ("afmoe", "AfmoeConfig"), ("solar_open", "SolarOpenConfig"),
                                ("laguna", "LagunaConfig"), ("hy_v3", "HYV3Config"),
                                ("hyperclovax", "HyperCLOVAXConfig"), ("jais2", "Jais2Config"),
                                ("mellum", "MellumConfig"), ("flex_olmo", "FlexOlmoConfig"),
                                ("granite_swa", "GraniteSWAConfig"), ("granitemoe_swa", "GraniteMoeSWAConfig"),
                                ("cohere2_moe", "Cohere2MoeConfig"), ("hrm_text", "HrmTextConfig"),
                                ("minimax_m3_vl_text", "MiniMaxM3VLTextConfig"),
                                ("gemma4_unified", "Gemma4UnifiedTextConfig"), ("vaultgemma", "VaultGemmaConfig")]},
    "axk1": ("AXK1Config", {**MLA, **MOE, **MOE_GROUPS}),
    "youtu": ("YoutuConfig", MLA),
    "minicpm3": ("MiniCPM3Config", {**MLA, "dim_model_base": 16}),
    "dbrx": ("DbrxConfig", {"d_model": 32, "n_heads": 4, "n_layers": 2, "max_seq_len": 64, "ffn_config": {"ffn_hidden_size": 64,
             "moe_num_experts": 4, "moe_top_k": 2}, "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 1e4},
             **dict.fromkeys(("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                              "num_key_value_heads", "head_dim", "max_position_embeddings"))}),
    **{k: (c, {}) for k, c in [("gemma", "GemmaConfig"), ("phi", "PhiConfig"), ("olmo", "OlmoConfig"), ("glm", "GlmConfig"),
                               ("qwen2_moe", "Qwen2MoeConfig"), ("starcoder2", "Starcoder2Config"),
                               ("nemotron", "NemotronConfig"), ("persimmon", "PersimmonConfig"), ("helium", "HeliumConfig"),
                               ("jetmoe", "JetMoeConfig"), ("granitemoeshared", "GraniteMoeSharedConfig"),
                               ("diffllama", "DiffLlamaConfig"), ("doge", "DogeConfig")]},
    # the GPT-2 era, under the old setting names
    "gpt2": ("GPT2Config", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64, "n_inner": 64}),
    "gpt_bigcode": ("GPTBigCodeConfig", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64, "n_inner": 64}),
    "opt": ("OPTConfig", {"ffn_dim": 64, "word_embed_proj_dim": 32}),
    "biogpt": ("BioGptConfig", {}),
}  # fmt: skip
# attention code of their own, outside transformers' attention interface: packed under a block mask, every forward
# as every family
LEGACY_ATTENTION = {
    "bloom": ("BloomConfig", {"n_layer": 2, "n_head": 4}),
    "codegen": ("CodeGenConfig", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64, "n_inner": 64, "n_ctx": 64,
                                  "rotary_dim": 4}),
    "gptj": ("GPTJConfig", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64, "n_inner": 64, "rotary_dim": 4}),
    "gpt_neo": ("GPTNeoConfig", {"num_layers": 2, "num_heads": 4, "attention_types": [[["global", "local"], 1]],
                                 "window_size": 4}),
    "mpt": ("MptConfig", {"d_model": 32, "max_seq_len": 64, "expansion_ratio": 2}),
    "xglm": ("XGLMConfig", {"d_model": 32, "num_layers": 2, "ffn_dim": 64}),
}  # fmt: skip
FORWARD_GAP = {
    "hrm_text": 5e-5
}  # HRM runs its layers 2 x (3 + 1) times over: rounding compounds (2.0e-5 seen)
SPREAD_SEED = {
    "gemma4_unified": 4,
    "persimmon": 4,
}  # the default seed's random model never draws EOS in 12 tokens
M2 = dict(
    mamba_n_heads=8, mamba_d_head=8, mamba_d_state=8, mamba_chunk_size=8, mamba_n_groups=1
)  # Mamba-2 mixers
LINEAR = ["linear_attention", "full_attention"]
GATED_DELTA = dict(
    linear_num_value_heads=2, linear_num_key_heads=2, linear_key_head_dim=8, linear_value_head_dim=8
)
SHORT_CONV = [
    "lfm2",
    "lfm2_moe",
]  # hybrids whose only state is a short convolution: they pack (engines.pack_layers)
# hybrids with a short convolution and a delta-rule recurrence (Gated DeltaNet, Kimi Delta Attention), and
# models with Mamba mixers: they pack too, each sequence of a pack run alone through those layers
DELTA_RULE = ["qwen3_next", "qwen3_5", "qwen3_5_moe", "olmo_hybrid", "kimi_linear"]
MAMBA2_MIXERS = ["falcon_h1", "bamba", "granitemoehybrid", "nemotron_h", "zamba2"]
ATTENTION_FREE = ["mamba", "mamba2", "falcon_mamba"]  # no attention: only their mixers keep a pack apart
# mixers whose layers do not pass the pack's keywords on to them (Jamba's drop them; Mamba's and
# Falcon-Mamba's blocks never get them): the layer holding the mixer hands them the pack's bounds
BOUNDS_HANDED = ["jamba", "mamba", "falcon_mamba"]
# MiniMax-Text-01 / MiniMax-M1's lightning attention (linear attention in blocks), ZAYA1's convolved
# attention projections (a q / k convolution, values delayed by one token) and Inkling's short
# convolutions run per sequence too (Inkling's relative-position bias is cut per sequence), and so do
# Qwen4-Exp's hashed n-gram embeddings with their dilated convolution (its indexer picks keys under the
# pack's block mask)
PACKING_HYBRIDS = [
    *SHORT_CONV,
    *DELTA_RULE,
    *MAMBA2_MIXERS,
    "jamba",
    *ATTENTION_FREE,
    "minimax",
    "zaya",
    "inkling",
    "qwen4_exp",
]
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
    # MiniMax-Text-01 / MiniMax-M1: lightning (linear) attention in blocks (of 4 here) beside full attention
    "minimax": ("MiniMaxConfig", {"layer_types": LINEAR, "head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
                                  "block_size": 4}),
    "zaya": ("ZayaConfig", {}),  # Zyphra's ZAYA1
    "inkling": ("InklingTextConfig", {"head_dim": 8, "unpadded_vocab_size": 38}),  # Thinking Machines: a wider head
    # Qwen4-Exp: Gated DeltaNet, hyper-connections, hashed n-gram embeddings, and an indexer over compressed blocks
    "qwen4_exp": ("Qwen4ExpTextConfig", {"layer_types": LINEAR, "head_dim": 8, **GATED_DELTA, "num_experts": 4,
                                         "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                         "shared_expert_intermediate_size": 32, "hc_lowrank": 8, "ple_layer_ids": [1],
                                         "heads_per_ngram": 2, "ngram_vocab_size_base": 500, "split_ngram_parts": 1,
                                         "make_ngram_vocab_size_divisible_by": 8, "indexer_n_heads": 4,
                                         "indexer_kv_heads": 1, "indexer_head_dim": 8, "indexer_budget": 4,
                                         "indexer_compress_ratio": 2}),
}  # fmt: skip
# DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): an indexer picks each query's top-k keys (4 here), as
# a mask under "eager" / "sdpa" only, as `indices` under another name (segment attention reads them). 16 indexer heads: with 2, ReLU-zero index scores tie and topk breaks
# the ties by tensor shape, so a prefix and the whole sequence pick other keys (transformers' own
# forward, no padding: 4.8 nats apart on this tiny model).
DSA = {"index_topk": 4, "index_head_dim": 8, "index_n_heads": 16, **MLA, "n_routed_experts": 4, "num_experts_per_tok": 2,
       **MOE_GROUPS}  # fmt: skip
NAMED_ATTENTION = {"deepseek_v32": ("DeepseekV32Config", DSA), "glm_moe_dsa": ("GlmMoeDsaConfig", DSA),
                   # A.X K2 and Hunyuan V4 (Hy4) select keys the same way
                   "axk2": ("AXK2Config", {**DSA, "head_dim": 8, "gated_norm_rank": 4}), "hy_v4": ("HYV4Config", {**DSA, "head_dim": 8})}  # fmt: skip
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
# Mamba-2 mixers that clamp dt outside decoding only (transformers' Nemotron-H and Zamba2): `load_policy`
# unclamps them (`models.loading.unclamp_time_steps`); before, sampled log-probs were up to ~0.02 nats off.
CLAMPED_TIME_STEPS = ("nemotron_h", "zamba2")
LEFT_PADDING_BREAKS = {  # a left-padded row's outputs change with its padding (in transformers itself)
    "rwkv": ("RwkvConfig", {"attention_hidden_size": 32, "context_length": 64}),
    "recurrent_gemma": ("RecurrentGemmaConfig", {"block_types": ["recurrent", "attention"], "lru_width": 32,
                                                 "head_dim": 8}),
    "xlstm": ("xLSTMConfig", {}),  # NX-AI's xLSTM-7b: its mLSTM state runs through pad positions
}  # fmt: skip

MROPE = {
    "rope_type": "default",
    "mrope_section": [2, 1, 1],
}  # rotary halves per time / height / width: head_dim 8
# vision towers: ViT-style (SigLIP, CLIP, Pixtral, ...) and Qwen-style (depth, merged patches)
SIGLIP = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4)  # fmt: skip
VISION = dict(hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32, patch_size=4, num_position_embeddings=16)  # fmt: skip
MULTIMODAL = {  # saved from the multimodal class, as the hub's are: config, text settings, vision settings, loaded as
    "qwen3_5": ("Qwen3_5Config", HYBRIDS["qwen3_5"][1], dict(VISION, depth=1), "Qwen3_5ForConditionalGeneration"),
    "gemma4": ("Gemma4Config", FAMILIES["gemma4"][1], None, "Gemma4ForConditionalGeneration"),
    # no causal-LM class in transformers: loaded as the image-text-to-text model
    "mistral3": ("Mistral3Config", {"model_type": "mistral"}, dict(SIGLIP, head_dim=8), "Mistral3ForConditionalGeneration"),
    "qwen3_vl": ("Qwen3VLConfig", {}, dict(VISION, depth=1, deepstack_visual_indexes=[0]), "Qwen3VLForConditionalGeneration"),
    "llama4": ("Llama4Config", NO_PACKING["llama4"][1], dict(SIGLIP, vision_output_dim=32, projector_input_dim=32,
               projector_output_dim=32), "Llama4ForConditionalGeneration"),
    # the vision-language models people RL-train on text too (multimodal rotary position ids: mrope)
    "qwen2_5_vl": ("Qwen2_5_VLConfig", {"rope_parameters": MROPE}, dict(VISION, depth=1, fullatt_block_indexes=[0]),
                   "Qwen2_5_VLForConditionalGeneration"),
    "qwen3_vl_moe": ("Qwen3VLMoeConfig", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
                     dict(VISION, depth=1, deepstack_visual_indexes=[0]), "Qwen3VLMoeForConditionalGeneration"),
    "glm4v": ("Glm4vConfig", {"rope_parameters": MROPE}, dict(VISION, depth=1, image_size=16), "Glm4vForConditionalGeneration"),
    "glm4v_moe": ("Glm4vMoeConfig", {"rope_parameters": {"rope_type": "default", "mrope_section": [1, 0, 1],
                                                         "partial_rotary_factor": 0.5}, **MOE, **MOE_GROUPS},
                  dict(VISION, depth=1, image_size=16), "Glm4vMoeForConditionalGeneration"),
    "gemma3": ("Gemma3Config", {"sliding_window": 4}, SIGLIP, "Gemma3ForConditionalGeneration"),
    "llava": ("LlavaConfig", {"model_type": "llama"}, dict(SIGLIP, model_type="clip_vision_model"),
              "LlavaForConditionalGeneration"),
    # Kimi K2.5 (DeepSeek-V3's text model), Step 3.7, GLM-5-Next (linear attention and sparse attention)
    "kimi_k25": ("Kimi_K25Config", {"model_type": "deepseek_v3", **MLA, **MOE, **MOE_GROUPS}, dict(SIGLIP, pos_emb_height=4,
                 pos_emb_width=4), "Kimi_K25ForConditionalGeneration"),
    "step3p7": ("Step3p7Config", {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
                                  "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
                SIGLIP, "Step3p7ForConditionalGeneration"),
    "glm5_next": ("Glm5NextConfig", {**MLA, **MOE, **MOE_GROUPS, "layer_types": LINEAR, "index_topk": 4, "index_kpool": 2,
                                     "qk_rope_head_dim": 0, "qk_nope_head_dim": 16, "index_head_dim": 8, "index_n_heads": 16, "head_dim": 8,
                                     "linear_head_dim": 8, "linear_num_heads": 4},
                  dict(VISION, depth=1, image_size=16), "Glm5NextForConditionalGeneration"),
    # Llama 3.2 Vision: cross-attention layers, which text prompts skip
    "mllama": ("MllamaConfig", {"cross_attention_layers": [1]}, dict(SIGLIP, num_global_layers=1, attention_heads=2,
               vision_output_dim=32, intermediate_layers_indices=[0]), "MllamaForConditionalGeneration"),
    "internvl": ("InternVLConfig", {"model_type": "qwen2"}, dict(SIGLIP, image_size=[16, 16], patch_size=[4, 4]),
                 "InternVLForConditionalGeneration"),
}  # fmt: skip
