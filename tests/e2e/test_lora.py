"""LoRA (peft) on the tiny model: only the adapters train (the base weights stay as loaded), the
checkpoint's merged export loads with transformers and generates what the adapted model generates,
the merged weights equal peft's merge_and_unload, and a resumed LoRA run reproduces the uninterrupted
run."""

from __future__ import annotations

import pytest
import torch
from test_train_loop import _cfg, _stable

from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(300)
LORA = ("model.lora.rank=4", "model.lora.alpha=8", "algo.entropy_coef=0.05", "train.lr=1e-2")


def test_lora_trains_adapters_only_and_exports_merged(tiny_model_dir, tmp_path):
    pytest.importorskip("peft")
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    full = train(_cfg(tiny_model_dir, tmp_path / "full", 3, *LORA), log=lambda *a: None)["history"]
    ckpt = list_checkpoints(tmp_path / "full")[-1]
    live = load_file(str(ckpt / "model.safetensors"))
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    for name, t in live.items():
        if ".base_layer." in name or ("lora_" not in name and name.removeprefix("base_model.model.") in base):
            assert torch.equal(
                t, base[name.removeprefix("base_model.model.").replace(".base_layer.", ".")]
            ), name
    assert any("lora_B" in n and t.abs().sum() > 0 for n, t in live.items())  # the adapters moved

    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), ckpt / "adapter"
    ).eval()
    merged = AutoModelForCausalLM.from_pretrained(ckpt / "merged").eval()
    reference = adapted.merge_and_unload().state_dict()
    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), ckpt / "adapter"
    ).eval()
    for name, t in merged.state_dict().items():
        torch.testing.assert_close(t, reference[name], rtol=1e-5, atol=1e-6, msg=name)
    prompt = torch.tensor([[3, 5, 7, 9, 11]])
    gen = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(merged.generate(prompt, **gen), adapted.generate(input_ids=prompt, **gen))

    from reasonrl.cli.main import _eval_model_path

    assert _eval_model_path(str(tmp_path / "full")) == str(
        ckpt / "merged"
    )  # `reasonrl eval RUN` uses the merged model

    train(_cfg(tiny_model_dir, tmp_path / "part", 2, *LORA), log=lambda *a: None)
    resumed = train(_cfg(tiny_model_dir, tmp_path / "part", 3, *LORA), resume=True, allow_config_change=True,
                    log=lambda *a: None)["history"]  # fmt: skip
    assert _stable(resumed[-1]) == _stable(full[-1])
