"""`model.lora.target_modules`: the default, all-linear, adapts every linear layer but the output head
whatever the layers are called; a list naming a layer the model lacks is a one-line ConfigError listing
the layers it has (before: peft adapted the names that matched and skipped the rest without a word,
e.g. Phi-3 got adapters on o_proj and down_proj only); the planner counts what peft trains."""

from __future__ import annotations

import pytest
import torch
from _architecture_models import _model, _multimodal_config
from _families import HYBRIDS

from reasonrl.config import ConfigError, LoraSpec
from reasonrl.planner.shape import model_shape
from reasonrl.trainer.setup import add_lora, lora_targets

peft = pytest.importorskip("peft")
LLAMA_NAMES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _adapted(model) -> set[str]:
    return {n.split(".lora_")[0].rsplit(".", 1)[-1] for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize(
    "family, layers",
    [
        ("llama", set(LLAMA_NAMES)),
        ("phi3", {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}),
        ("gpt_neox", {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}),
    ],
)
def test_all_linear_adapts_every_linear_layer_but_the_head_and_the_planner_counts_them(family, layers):
    model = _model(family)
    shape = model_shape("x", lora_rank=4, lora_targets=["all-linear"], config=model.config)
    lora = add_lora(model, LoraSpec(rank=4))  # the default target_modules
    assert _adapted(lora) == layers
    assert shape.trainable == sum(p.numel() for p in lora.parameters() if p.requires_grad)


def test_names_the_model_lacks_are_refused_with_the_layers_it_has():
    phi3 = _model("phi3")
    with pytest.raises(ConfigError, match=r"model.lora.target_modules: \['q_proj', 'k_proj', 'v_proj', 'gate_proj', "
                                          r"'up_proj'\] name no linear layer of Phi3ForCausalLM .*'qkv_proj'"):  # fmt: skip
        add_lora(phi3, LoraSpec(rank=4, target_modules=LLAMA_NAMES))
    assert not any("lora_" in n for n, _ in phi3.named_parameters())  # refused before peft touched it
    mamba = _model("mamba")
    with pytest.raises(ConfigError, match=r"name no linear layer of MambaForCausalLM .*'in_proj'"):
        add_lora(mamba, LoraSpec(rank=4, target_modules=LLAMA_NAMES))
    # peft will not adapt Mamba's out_proj, which all-linear includes: its reason, naming the key
    with pytest.raises(ConfigError, match=r"model.lora.target_modules: peft refuses them for MambaForCausalLM: "
                                          r".*out_proj.*; list the layers to adapt"):  # fmt: skip
        add_lora(_model("mamba"), LoraSpec(rank=4))
    mixers = ["in_proj", "x_proj", "dt_proj"]
    assert _adapted(add_lora(_model("mamba"), LoraSpec(rank=4, target_modules=mixers))) == set(mixers)
    # names it has pass through as given
    assert lora_targets(phi3, ["qkv_proj", "o_proj"]) == ["qkv_proj", "o_proj"]
    assert _adapted(add_lora(phi3, LoraSpec(rank=2, target_modules=["qkv_proj"]))) == {"qkv_proj"}


def test_a_hybrid_trains_lora_on_its_mixers_too():
    """Qwen3-Next's linear attention (in_proj_qkvz, in_proj_ba, out_proj) gets adapters beside its
    attention and experts' projections; the output head stays frozen."""
    assert "qwen3_next" in HYBRIDS
    lora = add_lora(_model("qwen3_next"), LoraSpec(rank=4))
    names = _adapted(lora)
    assert {"q_proj", "o_proj", "in_proj_qkvz", "out_proj"} <= names and "lm_head" not in names
    base = lora.get_base_model()
    assert not base.lm_head.weight.requires_grad and isinstance(base.lm_head, torch.nn.Linear)


@pytest.mark.parametrize("family", ["mistral3", "qwen3_vl", "qwen3_5", "llama4"])
def test_all_linear_on_a_multimodal_model_adapts_its_language_model_only(family):
    """peft's all-linear would also put adapters on the vision tower and the projector, which text
    prompts never train; reasonrl's default adapts the language model's linear layers, and the planner
    counts what peft trains."""
    from reasonrl.models.loading import causal_lm_class

    cfg = _multimodal_config(family)
    torch.manual_seed(0)
    model = causal_lm_class(cfg).from_config(cfg)
    names = lora_targets(model, ["all-linear"])
    assert isinstance(names, list) and names and all("language_model." in n for n in names)
    vision = [
        n
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and ("visual" in n or "vision" in n)
    ]
    assert vision  # there is a vision tower to leave alone
    shape = model_shape("x", lora_rank=4, lora_targets=["all-linear"], config=model.config)
    lora = add_lora(model, LoraSpec(rank=4))
    trained = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trained and all("language_model." in n and ".lora_" in n for n in trained)
    if family in ("mistral3", "qwen3_vl"):  # every projection of every language-model layer
        assert _adapted(lora) == set(LLAMA_NAMES)
    else:  # Qwen3.5's linear attention, Llama 4's experts and shared expert besides
        assert {"q_proj", "k_proj", "v_proj", "o_proj"} < _adapted(lora)
    assert shape.trainable == sum(p.numel() for p in lora.parameters() if p.requires_grad)
    assert lora_targets(_model("llama"), ["all-linear"]) == "all-linear"  # a causal LM: peft's own
