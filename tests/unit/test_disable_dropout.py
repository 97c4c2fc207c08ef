"""`models.loading.disable_dropout`: every dropout rate of a model to 0 (nn.Dropout modules and the
attention rates transformers reads in training mode), so a training-mode forward is the eval forward."""

from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

from reasonrl.models.loading import disable_dropout


def _two_train_forwards(model, ids):
    model.train()
    torch.manual_seed(1)
    a = model(ids).logits
    torch.manual_seed(2)
    b = model(ids).logits
    model.eval()
    with torch.no_grad():
        c = model(ids).logits
    return a, b, c


def test_gpt2_dropout_modules_and_qwen2_attention_rate_are_turned_off():
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 7))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                      resid_pdrop=0.3, embd_pdrop=0.3, attn_pdrop=0.3))  # fmt: skip
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2, attention_dropout=0.5))  # fmt: skip
    for model, expected in (
        (gpt2, 1 + 2 * 3),
        (qwen, 2),
    ):  # embd; per block attn, resid_attn, mlp | per layer
        a, b, _ = _two_train_forwards(model, ids)
        assert not torch.allclose(a, b)  # the negative control: dropout is live in training mode
        assert disable_dropout(model) == expected
        a, b, c = _two_train_forwards(model, ids)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        torch.testing.assert_close(a.detach(), c, rtol=1e-5, atol=1e-6)  # training mode = eval mode
        assert disable_dropout(model) == 0  # nothing left above 0
    assert qwen.config.attention_dropout == 0.5 and gpt2.config.resid_pdrop == 0.3  # the config kept


def test_trl_disable_dropout_converts(tmp_path):
    import yaml

    from reasonrl.config import load_config
    from reasonrl.config.foreign import convert

    path = tmp_path / "grpo.yaml"
    path.write_text("model_name_or_path: demo\nnum_generations: 4\nper_device_train_batch_size: 8\n"
                    "disable_dropout: false\n")  # fmt: skip
    out = convert("trl", path)
    assert out.recipe["model"]["disable_dropout"] is False and not any("dropout" in n for n in out.notes)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(out.recipe))
    assert load_config(tmp_path / "r.yaml").model.disable_dropout is False
    assert load_config(None).model.disable_dropout is True  # TRL's default, and reasonrl's
