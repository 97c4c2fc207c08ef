"""engines.weights: the policy's weights as a rollout engine and a checkpoint get them. Checked on tiny
models: wrapper prefixes stripped, one group per decoder layer in model order, tied weights once, the
dtype cast only on floating tensors, a LoRA policy's weights merged exactly as peft merges them (a
transposed Conv1D layer too) with the live model untouched, and the adapter kinds a sync cannot merge
refused naming the parameter."""

from __future__ import annotations

import pytest
import torch

from reasonrl.engines.weights import full_weights, hf_name, hf_weight_groups, layer_key

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "raw, name",
    [
        ("model.layers.0.mlp._checkpoint_wrapped_module.up_proj.weight", "model.layers.0.mlp.up_proj.weight"),
        ("_orig_mod.model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.q_proj.weight"),
        ("model._fsdp_wrapped_module.embed_tokens.weight", "model.embed_tokens.weight"),
        (
            "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight",
            "model.layers.0.self_attn.q_proj.weight",
        ),  # fmt: skip
        ("base_model.model.lm_head.weight", "lm_head.weight"),
        ("model.norm.weight", "model.norm.weight"),
        # "base_model.model." only as a prefix: a model whose own module is called base_model keeps it
        ("model.base_model.model.x.weight", "model.base_model.model.x.weight"),
    ],
)
def test_hf_name_strips_what_wrappers_add(raw, name):
    assert hf_name(raw) == name


@pytest.mark.parametrize(
    "name, key",
    [
        ("model.layers.3.mlp.up_proj.weight", "model.layers.3"),
        ("model.layers.12.self_attn.o_proj.bias", "model.layers.12"),
        ("model.language_model.layers.0.input_layernorm.weight", "model.language_model.layers.0"),
        ("model.embed_tokens.weight", ""),
        ("model.norm.weight", ""),
        ("lm_head.weight", ""),
    ],
)
def test_layer_key_names_the_decoder_layer(name, key):
    assert layer_key(name) == key


def _qwen2(tie: bool):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tie)  # fmt: skip
    return Qwen2ForCausalLM(cfg)


@pytest.mark.parametrize("tie", [False, True])
def test_groups_are_the_decoder_layers_in_model_order_with_tied_weights_once(tie):
    model = _qwen2(tie)
    groups = list(hf_weight_groups(model))
    keys = [{layer_key(n) for n, _ in g} for g in groups]
    assert keys == [{""}, {"model.layers.0"}, {"model.layers.1"}, {"model.layers.2"}, {""}]
    names = [n for g in groups for n, _ in g]
    own = model.state_dict()
    expected = [n for n in own if not (tie and n == "lm_head.weight")]  # tied: under its first name
    assert names == expected
    assert groups[-1][-1][0] == ("model.norm.weight" if tie else "lm_head.weight")
    for g in groups:
        for n, t in g:
            assert torch.equal(t, own[n]) and not t.requires_grad


def test_the_dtype_cast_leaves_integer_tensors_alone():
    model = _qwen2(False)
    model.model.layers[1].mlp.register_buffer("calls", torch.tensor([7], dtype=torch.long))  # persistent
    groups = list(hf_weight_groups(model, torch.bfloat16))
    got = dict(t for g in groups for t in g)
    assert got["model.layers.1.mlp.calls"].dtype == torch.long and got["model.layers.1.mlp.calls"].item() == 7
    assert got["lm_head.weight"].dtype == torch.bfloat16
    assert {layer_key("model.layers.1.mlp.calls")} == {layer_key(n) for n, _ in groups[2]}
    assert torch.equal(got["model.layers.0.mlp.up_proj.weight"],
                       model.model.layers[0].mlp.up_proj.weight.to(torch.bfloat16))  # fmt: skip


def _lora(model, **kw):
    from peft import LoraConfig, get_peft_model

    # init_lora_weights=False: B is random, so the adapters change the weights (peft's default B = 0)
    torch.manual_seed(1)
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, init_lora_weights=False, **kw))


def test_a_lora_policy_comes_merged_as_peft_merges_it_and_stays_unmerged():
    peft_model = _lora(_qwen2(False), target_modules=["q_proj", "down_proj"])
    base = {k: v.clone() for k, v in peft_model.state_dict().items()}
    got = full_weights(peft_model)
    assert not any("lora_" in n or "base_layer" in n for n in got)
    # the live model is untouched: still unmerged, every tensor as it was
    assert all(torch.equal(v, base[k]) for k, v in peft_model.state_dict().items())
    assert not peft_model.base_model.model.model.layers[0].self_attn.q_proj.merged
    merged = peft_model.merge_and_unload().state_dict()
    assert got.keys() == merged.keys()
    for k in got:
        torch.testing.assert_close(got[k], merged[k], rtol=1e-6, atol=1e-6)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(got[q], base["base_model.model." + q.replace(".weight", ".base_layer.weight")])


def test_an_adapter_already_merged_is_not_added_twice():
    peft_model = _lora(_qwen2(False), target_modules=["q_proj"])
    peft_model.merge_adapter()  # peft's merged state: the base weight already holds W + scale * B @ A
    got = full_weights(peft_model)
    peft_model.unmerge_adapter()
    merged = peft_model.merge_and_unload().state_dict()
    for k in got:
        torch.testing.assert_close(got[k], merged[k], rtol=1e-6, atol=1e-6)


def test_a_transposed_conv1d_adapter_merges_transposed():
    """GPT-2's Conv1D stores weights [in, out]: its LoRA delta is (B @ A).T (peft's fan_in_fan_out)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=32))
    peft_model = _lora(model, target_modules=["c_attn"], fan_in_fan_out=True)
    got = full_weights(peft_model)
    merged = peft_model.merge_and_unload().state_dict()
    name = "transformer.h.1.attn.c_attn.weight"
    assert got[name].shape == merged[name].shape == (16, 48)
    torch.testing.assert_close(got[name], merged[name], rtol=1e-6, atol=1e-6)


def test_adapters_a_sync_cannot_merge_are_refused_naming_them():
    dora = _lora(_qwen2(False), target_modules=["q_proj"], use_dora=True)
    with pytest.raises(ValueError, match="weight sync: DoRA adapters are not supported"):
        full_weights(dora)
    saved = _lora(_qwen2(False), target_modules=["q_proj"], modules_to_save=["lm_head"])
    with pytest.raises(ValueError, match=r"'base_model\.model\.lm_head\.modules_to_save\.default\.weight' is a "
                                         "PEFT modules_to_save copy"):  # fmt: skip
        full_weights(saved)


def test_hf_weights_load_only_when_they_cover_the_model():
    from reasonrl.engines.weights import load_hf_weights

    model = _qwen2(True)
    weights = {k: v + 1 for k, v in full_weights(model).items()}
    load_hf_weights(model, weights)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in weights.items())
    assert torch.equal(
        model.lm_head.weight, weights["model.embed_tokens.weight"]
    )  # tied: through its first name
    no_norm = {k: v for k, v in weights.items() if k != "model.norm.weight"}
    with pytest.raises(
        ValueError, match=r"^weights do not fit the model: unknown \[\], missing \['model\.norm\.weight'\]$"
    ):
        load_hf_weights(model, no_norm)
    with pytest.raises(ValueError, match=r"missing \['model\.embed_tokens\.weight', 'lm_head\.weight'\]$"):
        load_hf_weights(model, {k: v for k, v in weights.items() if k != "model.embed_tokens.weight"})
    with pytest.raises(ValueError, match=r"unknown \['base_model\.model\.x'\], missing \[\]$"):
        load_hf_weights(model, {**weights, "base_model.model.x": torch.zeros(1)})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError):  # refused before anything is copied: no half-loaded model
        load_hf_weights(model, {k: v + 1 for k, v in no_norm.items()})
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_the_saved_layout_of_a_model_transformers_converts_nothing_for_is_the_groups_in_order():
    from reasonrl.engines.weights import in_saved_layout

    model = _qwen2(False)
    groups = list(hf_weight_groups(model))
    assert [[n for n, _ in g] for g in in_saved_layout(model, groups)] == [[n for n, _ in g] for g in groups]


def test_the_saved_layout_splits_fused_experts_as_the_checkpoint_holds_them(tmp_path):
    from transformers import MixtralConfig, MixtralForCausalLM

    from reasonrl.engines.weights import in_saved_layout

    torch.manual_seed(0)
    model = MixtralForCausalLM(MixtralConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, num_key_value_heads=1, num_local_experts=3,
                                             num_experts_per_tok=2))  # fmt: skip
    groups = list(hf_weight_groups(model))
    saved = [dict(g) for g in in_saved_layout(model, groups)]
    assert [{layer_key(n) for n in g} for g in saved] == [{""}, {"model.layers.0"}, {"model.layers.1"}, {""}]
    fused = dict(groups[1])
    assert not any("block_sparse_moe" in n for n in fused)  # the live model's layout differs from the file's
    w1 = [n for n in saved[1] if n.endswith(".w1.weight")]
    assert sorted(w1) == [f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight" for e in range(3)]
    import safetensors.torch

    model.save_pretrained(tmp_path)  # the names and tensors the checkpoint holds
    written = safetensors.torch.load_file(tmp_path / "model.safetensors")
    got = {n: t for g in saved for n, t in g.items()}
    assert got.keys() == written.keys()
    assert all(torch.equal(got[n], written[n]) for n in written)
