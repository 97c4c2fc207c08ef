"""The HF engine's in-place KV cache (`rollout.kv_cache`): generation is bit-identical to transformers'
own concatenating cache, a layer that outgrows its buffer doubles it and keeps every value, and
sliding-window layers keep transformers' own layer class."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from reasonrl.rollout import hf
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.rollout.kv_cache import GrowingLayer, kv_cache


def _prompts(tok):
    texts = ("12+7=", "3*4-2=", "the quick brown fox", "9", "reasoning with")  # different lengths: padding
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(n=3, temperature=1.0, max_new_tokens=20, seed=11),
        SamplingParams(n=2, temperature=0.7, top_k=10, top_p=0.9, max_new_tokens=20, seed=3),
        SamplingParams(n=1, temperature=0.0, max_new_tokens=24),
    ],
)
def test_generation_is_bit_identical_to_transformers_cache(tiny_model_and_tokenizer, monkeypatch, params):
    model, tok = tiny_model_and_tokenizer
    used = []
    real = hf.kv_cache

    def spy(m, capacity):
        cache = real(m, capacity)
        used.append(cache)
        return cache

    monkeypatch.setattr(hf, "kv_cache", spy)
    ours = HFRolloutEngine(model, tok).generate(_prompts(tok), params)
    assert used and all(isinstance(layer, GrowingLayer) for layer in used[0].layers)
    monkeypatch.setattr(hf, "kv_cache", lambda m, capacity: None)  # transformers' own DynamicCache
    theirs = HFRolloutEngine(model, tok).generate(_prompts(tok), params)
    flat = [(c.token_ids, c.finish_reason) for g in ours for c in g]
    assert flat == [(c.token_ids, c.finish_reason) for g in theirs for c in g]
    assert len({tuple(t) for t, _ in flat}) > 1  # varied completions, not one repeated
    for a, b in zip([c for g in ours for c in g], [c for g in theirs for c in g]):
        assert torch.equal(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs))


def test_a_layer_doubles_its_buffer_and_keeps_every_value():
    layer = type("Small", (GrowingLayer,), {"capacity": 3})()
    g = torch.Generator().manual_seed(0)
    keys, values = [], []
    for n in (2, 1, 1, 3, 1):  # 8 positions: outgrows 3 twice
        k, v = torch.randn(2, 1, n, 4, generator=g), torch.randn(2, 1, n, 4, generator=g)
        keys.append(k)
        values.append(v)
        out_k, out_v = layer.update(k, v)
        assert torch.equal(out_k, torch.cat(keys, -2)) and torch.equal(out_v, torch.cat(values, -2))
    assert layer.get_seq_length() == 8 and layer._k.shape[-2] == 12  # 3 -> 6 -> 12
    layer.reset()
    assert layer.get_seq_length() == 0
    layer.update(keys[0], values[0])
    assert torch.equal(layer.keys, keys[0])


def test_sliding_window_layers_keep_their_own_class():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.cache_utils import DynamicSlidingWindowLayer

    cfg = Qwen2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, use_sliding_window=True, sliding_window=8, max_window_layers=1,
                      layer_types=["full_attention", "sliding_attention"])  # fmt: skip
    cache = kv_cache(Qwen2ForCausalLM(cfg), 64)
    assert [type(x).__mro__[1] if isinstance(x, GrowingLayer) else type(x) for x in cache.layers] == [
        GrowingLayer, DynamicSlidingWindowLayer
    ]  # fmt: skip


# tokens to remove, or (transformers' older form) the length to keep
@pytest.mark.parametrize("crop", [-2, 4])
def test_a_cropped_layer_goes_on_after_the_kept_positions(crop):
    """transformers crops a cache when it rolls back draft tokens (assisted generation): the next update
    lands right after the kept positions, as in its own concatenating layer."""
    ours, theirs = type("Small", (GrowingLayer,), {"capacity": 8})(), DynamicLayer()
    g = torch.Generator().manual_seed(1)
    for n in (4, 1, 1):
        k, v = torch.randn(2, 1, n, 4, generator=g), torch.randn(2, 1, n, 4, generator=g)
        ours.update(k, v), theirs.update(k, v)
    ours.crop(crop), theirs.crop(crop)
    assert ours.get_seq_length() == theirs.get_seq_length() == 4 and ours.keys.shape[-2] == 4
    k, v = torch.randn(2, 1, 2, 4, generator=g), torch.randn(2, 1, 2, 4, generator=g)
    for a, b in zip(ours.update(k, v), theirs.update(k, v)):
        assert a.shape[-2] == 6 and torch.equal(a, b)
