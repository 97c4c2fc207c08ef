"""The logits-free log-probs (`model.logprob_chunk`) go through the output head outside the model's
forward, so they must apply what the forward does around the head: Gemma 2's final soft-capping,
Cohere's logit_scale, Granite's logits_scaling, Inkling's hidden states divided by its width
multiplier and its logits cut to the unpadded vocabulary (before: refused, 23x the largest logit off). Without that they were silently wrong (a chunked run
trained on other log-probs than the model's). Checked against the plain path (the model's own logits),
chunked and packed; a model that changes its logits in an unknown way is refused before training."""

from __future__ import annotations

import functools

import pytest
import torch

from reasonrl.config import ConfigError
from reasonrl.engines.output_head import check_output_head, logit_transform
from reasonrl.engines.packing import packed_logprobs
from reasonrl.engines.single import completion_logprobs
from reasonrl.types import TrainBatch

COMMON = dict(vocab_size=101, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip


def _model(kind: str):
    import transformers as tf

    torch.manual_seed(0)
    cfg = {
        # a small cap, so that it bends random-init logits far from the identity
        "gemma2": lambda: tf.Gemma2Config(**COMMON, head_dim=8, final_logit_softcapping=0.3),
        "cohere": lambda: tf.CohereConfig(**COMMON, logit_scale=3.0),
        "granite": lambda: tf.GraniteConfig(**COMMON, logits_scaling=4.0),
        "qwen2": lambda: tf.Qwen2Config(**COMMON),
        # Thinking Machines' Inkling: a head 128 wider than the vocabulary it samples from
        "inkling": lambda: tf.InklingTextConfig(
            **{**COMMON, "vocab_size": 128},
            head_dim=8,
            unpadded_vocab_size=101,
            logits_mup_width_multiplier=6.0,
        ),
    }[kind]()
    model = tf.AutoModelForCausalLM.from_config(cfg).float()
    if kind == "inkling":  # weights large enough that dividing the hidden states changes the log-probs
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, 1.0)
    return model


def _batch():
    g = torch.Generator().manual_seed(1)
    attn = torch.ones(2, 4 + 10, dtype=torch.long)
    attn[0, :2] = 0  # a left-padded prompt
    attn[1, -3:] = 0  # a completion that ended early
    ids = torch.randint(0, COMMON["vocab_size"], (2, 14), generator=g)
    return TrainBatch(input_ids=ids, attention_mask=attn, mask=attn[:, 4:].bool(), prompt_len=4)


@pytest.mark.parametrize("kind", ["gemma2", "cohere", "granite", "inkling"])
def test_chunked_and_packed_logprobs_apply_the_models_logit_transform(kind):
    model, batch = _model(kind), _batch()
    assert logit_transform(model) == {"gemma2": (1.0, 1.0, 0.3, None), "cohere": (1.0, 3.0, None, None),
                                      "granite": (1.0, 0.25, None, None), "inkling": (6.0, 1.0, None, 101)}[kind]  # fmt: skip
    plain, plain_ent = completion_logprobs(model, batch, with_entropy=True)  # the model's own logits
    mask = batch.mask
    forwards = [functools.partial(completion_logprobs, chunk=3), functools.partial(packed_logprobs, chunk=3)]
    for fn in forwards:
        lp, ent = fn(model, batch, with_entropy=True)
        torch.testing.assert_close(lp[mask], plain[mask], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ent[mask], plain_ent[mask], rtol=1e-5, atol=1e-5)
    # the transform matters here: the head's raw output gives other log-probs
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("reasonrl.engines.output_head.logit_transform", lambda m: (1.0, 1.0, None, None))
        if kind == "inkling":  # the whole head's output: a shape the check refuses
            with pytest.raises(
                ConfigError, match=r"logits of shape \(1, 8, 101\), the head gives \(1, 8, 128\)"
            ):
                check_output_head(model)
        raw, _ = completion_logprobs(model, batch, chunk=3)
    assert (raw[mask] - plain[mask]).abs().max() > 1e-2
    check_output_head(model)  # and the check before training passes


def test_a_model_that_changes_its_logits_in_an_unknown_way_is_refused():
    from transformers import Qwen2ForCausalLM

    from reasonrl.config import ConfigError

    class Tempered(Qwen2ForCausalLM):  # e.g. remote code dividing the logits by a temperature
        def forward(self, *a, **k):
            out = super().forward(*a, **k)
            out.logits = out.logits / 0.7
            return out

    check_output_head(_model("qwen2"))  # a plain model passes
    model = Tempered(_model("qwen2").config)
    model.train()
    with pytest.raises(
        ConfigError, match=r"model\.logprob_chunk: Tempered's forward changes .* set model\.logprob_chunk=0"
    ):
        check_output_head(model)
    assert model.training  # the probe leaves the mode as it found it
