"""A model whose attention logits are soft-capped (Gemma 2) loads with eager attention: transformers'
default SDPA path drops the cap without a word, so generation, training and evaluation would run
another model than the checkpoint. Once loaded, its eager attention is switched to the same arithmetic
in blocks of queries (`models.softcap`). Other models keep transformers' default (SDPA)."""

from __future__ import annotations

import torch
from _spread_weights import spread_weights

from reasonrl.models.loading import attention_kwargs, load_policy


def _gemma2(vocab: int):
    from transformers import Gemma2Config, Gemma2ForCausalLM

    cfg = Gemma2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, attn_logit_softcapping=2.0)  # fmt: skip
    torch.manual_seed(0)
    model = Gemma2ForCausalLM(cfg)
    return spread_weights(model, 0.4)  # scores large enough for the cap to bend them


def test_a_soft_capped_model_loads_with_eager_attention_and_its_real_logits(
    tiny_model_and_tokenizer, tmp_path
):
    from transformers import AutoModelForCausalLM

    qwen, tok = tiny_model_and_tokenizer
    model = _gemma2(len(tok))
    model.save_pretrained(tmp_path / "gemma2")
    tok.save_pretrained(tmp_path / "gemma2")
    assert attention_kwargs(model.config) == {"attn_implementation": "eager"}
    loaded, _ = load_policy(str(tmp_path / "gemma2"), device="cpu", log=lambda *a: None)
    assert loaded.config._attn_implementation == "reasonrl_softcap"  # eager's arithmetic, no scores kept
    ids = torch.tensor([[5, 9, 17, 3, 30, 12, 8]])
    eager, sdpa = (AutoModelForCausalLM.from_pretrained(tmp_path / "gemma2", attn_implementation=a).eval()
                   for a in ("eager", "sdpa"))  # fmt: skip
    with torch.no_grad():
        ours, reference = loaded.eval()(input_ids=ids).logits, eager(input_ids=ids).logits
        dropped = sdpa(input_ids=ids).logits
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-5)  # the checkpoint's own model
    assert (dropped - reference).abs().max() > 1e-2  # what SDPA would have run instead

    # a model without soft-capping keeps transformers' default
    qwen.save_pretrained(tmp_path / "qwen")
    tok.save_pretrained(tmp_path / "qwen")
    assert attention_kwargs(qwen.config) == {}
    assert (
        load_policy(str(tmp_path / "qwen"), device="cpu", log=lambda *a: None)[0].config._attn_implementation
        == "sdpa"
    )
