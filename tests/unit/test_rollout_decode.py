"""The HF engine's decode loop (`rollout.decode`): finished rows leave the batch, and the samples, their
log-probs and finish reasons are those of transformers' `generate` bit for bit on one CPU thread (with
more, the GEMM splits a shrunken batch between threads another way: log-probs agree to ~1e-6, the same
tokens); its sampler is torch.multinomial's own draw; the cache keeps the right rows when the batch
shrinks."""

from __future__ import annotations

import copy

import pytest
import torch

from reasonrl.rollout import decode as decode_mod
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.rollout.kv_cache import GrowingLayer, kv_cache

TEXTS = ("12+7=", "3*4-2=", "the quick brown fox", "9", "reasoning with", "1+1", "88-9=", "the answer")


def _eos_prone(model, tok, bias: float = 3.0):
    """The fixture model with an lm_head bias towards EOS: completions end anywhere from 1 to 24
    tokens, so the batch shrinks several times."""
    m = copy.deepcopy(model)
    head = torch.nn.Linear(m.lm_head.in_features, m.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(m.lm_head.weight)
        head.bias.zero_()
        head.bias[tok.eos_token_id] = bias
    m.lm_head = head
    return m


def _prompts(tok, copies: int = 1):
    return [tok(t + " " * i, add_special_tokens=False)["input_ids"] for i in range(copies) for t in TEXTS]


def _flat(groups):
    return [c for g in groups for c in g]


@pytest.fixture
def one_thread():
    """Bit-for-bit comparisons run on one thread (conftest gives the thread count back afterwards)."""
    torch.set_num_threads(1)


@pytest.mark.parametrize(
    "params, copies",
    [
        (SamplingParams(n=5, temperature=1.0, max_new_tokens=24, seed=1), 1),
        (SamplingParams(n=5, temperature=0.8, top_k=12, top_p=0.9, max_new_tokens=24, seed=4), 1),
        (SamplingParams(n=1, temperature=0.0, max_new_tokens=24), 5),
    ],
)
def test_dropping_finished_rows_gives_generates_samples_bit_for_bit(
    tiny_model_and_tokenizer, monkeypatch, params, copies, one_thread
):
    model, tok = tiny_model_and_tokenizer
    model = _eos_prone(model, tok)
    batches = []  # rows in the batch at every forward
    real_forward = model.forward

    def spy(*a, **k):
        batches.append(k["input_ids"].shape[0])
        return real_forward(*a, **k)

    monkeypatch.setattr(model, "forward", spy)
    ours = _flat(HFRolloutEngine(model, tok).generate(_prompts(tok, copies), params))
    monkeypatch.setattr(model, "forward", real_forward)
    theirs = _flat(HFRolloutEngine(model, tok, drop_finished=False).generate(_prompts(tok, copies), params))
    rows = len(ours)
    assert rows == 40
    # the batch shrank, never below MIN_ROWS, and ended with fewer rows than it started with
    assert batches[0] == rows and min(batches) == decode_mod.MIN_ROWS and len(set(batches)) >= 3
    lengths = [len(c.token_ids) for c in ours]
    assert min(lengths) < 6 and max(lengths) == 24  # completions of very different lengths
    assert [(c.token_ids, c.finish_reason, c.text) for c in ours] == [
        (c.token_ids, c.finish_reason, c.text) for c in theirs
    ]
    for a, b in zip(ours, theirs):
        assert torch.equal(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs))
    assert len({tuple(c.token_ids) for c in ours}) > 10


def test_on_two_threads_the_same_tokens_and_logprobs_within_1e_5(tiny_model_and_tokenizer):
    torch.set_num_threads(2)
    model, tok = tiny_model_and_tokenizer
    model = _eos_prone(model, tok)
    params = SamplingParams(n=5, temperature=1.0, max_new_tokens=24, seed=1)
    ours = _flat(HFRolloutEngine(model, tok).generate(_prompts(tok), params))
    theirs = _flat(HFRolloutEngine(model, tok, drop_finished=False).generate(_prompts(tok), params))
    assert [(c.token_ids, c.finish_reason) for c in ours] == [(c.token_ids, c.finish_reason) for c in theirs]
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs),
                                   rtol=0, atol=1e-5)  # fmt: skip


def test_the_sampler_is_torch_multinomials_own_draw():
    scores = torch.randn(64, 50, generator=torch.Generator().manual_seed(0)) * 3
    for seed in range(5):
        torch.manual_seed(seed)
        want = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1)  # what generate draws
        torch.manual_seed(seed)
        assert torch.equal(decode_mod._sample(scores, torch.arange(64), 64, greedy=False), want)
        # rows 3, 10, 40 of a batch that shrank: the same draws as in the full batch
        rows = torch.tensor([3, 10, 40])
        torch.manual_seed(seed)
        assert torch.equal(decode_mod._sample(scores[rows], rows, 64, greedy=False), want[rows])
    # and it samples the distribution: a two-token distribution 0.8 / 0.2 over 4000 draws
    p = torch.tensor([[0.8, 0.2]]).expand(4000, 2)
    torch.manual_seed(0)
    share = decode_mod._sample(p.log(), torch.arange(4000), 4000, greedy=False).float().mean().item()
    assert abs(share - 0.2) < 0.03


def test_a_growing_layer_keeps_the_selected_rows_and_goes_on_growing():
    layer = type("Small", (GrowingLayer,), {"capacity": 4})()
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(5, 2, 3, 4, generator=g), torch.randn(5, 2, 3, 4, generator=g)
    layer.update(k, v)
    keep = torch.tensor([0, 2, 4])
    layer.batch_select_indices(keep)
    assert torch.equal(layer.keys, k[keep]) and torch.equal(layer.values, v[keep])
    k2, v2 = torch.randn(3, 2, 2, 4, generator=g), torch.randn(3, 2, 2, 4, generator=g)  # outgrows 4
    out_k, out_v = layer.update(k2, v2)
    assert torch.equal(out_k, torch.cat([k[keep], k2], -2)) and torch.equal(
        out_v, torch.cat([v[keep], v2], -2)
    )
    assert layer.get_seq_length() == 5


def test_sliding_window_layers_shrink_too_and_match_generate(one_thread):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, use_sliding_window=True, sliding_window=6, max_window_layers=1,
                      layer_types=["full_attention", "sliding_attention"], eos_token_id=1, pad_token_id=0)  # fmt: skip
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight[1] *= 4  # EOS likely enough that rows finish at different steps

    class Tok:
        pad_token_id, eos_token_id, bos_token_id = 0, 1, None

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(map(str, ids))

    prompts = [[2 + (i * 7 + j) % 37 for j in range(3 + i % 9)] for i in range(40)]
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=20, seed=2)
    cache = kv_cache(model, 40)
    assert decode_mod.can_shrink(cache)
    ours = _flat(HFRolloutEngine(model, Tok()).generate(prompts, params))
    theirs = _flat(HFRolloutEngine(model, Tok(), drop_finished=False).generate(prompts, params))
    assert [c.token_ids for c in ours] == [c.token_ids for c in theirs]
    assert len({len(c.token_ids) for c in ours}) > 3
    for a, b in zip(ours, theirs):
        assert torch.equal(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs))


def test_a_cache_it_cannot_shrink_goes_through_generate():
    from transformers.cache_utils import DynamicCache, StaticLayer

    assert not decode_mod.can_shrink(None)
    cache = DynamicCache()
    cache.layers = [StaticLayer(max_cache_len=8)]
    assert not decode_mod.can_shrink(cache)


def test_sliding_window_layers_with_convolution_states_are_not_shrunk():
    """An Inkling whose layers all slide: its cache layers are sliding-window layers that also hold the
    short convolutions' states, which `batch_select_indices` does not select. Shrinking the batch
    stopped generation on a shape error; it now goes through `generate`, with the completions and
    log-probs of the engine that never drops rows."""
    from _architecture_models import Tok
    from _families import COMMON
    from transformers import InklingForCausalLM, InklingTextConfig

    cfg = InklingTextConfig(**COMMON, unpadded_vocab_size=38, local_layer_ids=[0, 1])
    assert cfg.layer_types == ["hybrid_sliding", "hybrid_sliding"]
    torch.manual_seed(0)
    model = InklingForCausalLM(cfg).eval()
    prompts = [[2 + (i * 7 + j) % 37 for j in range(3 + i % 9)] for i in range(16)]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=2)
    ours = _flat(HFRolloutEngine(model, Tok()).generate(prompts, params))
    theirs = _flat(HFRolloutEngine(model, Tok(), drop_finished=False).generate(prompts, params))
    assert [c.token_ids for c in ours] == [c.token_ids for c in theirs]
    assert len({len(c.token_ids) for c in ours}) > 1  # rows finished at different steps
    for a, b in zip(ours, theirs):
        assert torch.equal(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs))


def test_checking_every_few_steps_gives_the_same_completions(
    tiny_model_and_tokenizer, monkeypatch, one_thread
):
    """On an accelerator the loop reads the finished count every CHECK_EVERY_DEVICE steps; the same
    setting on the CPU changes when rows leave and when the loop stops, never a completion."""
    model, tok = tiny_model_and_tokenizer
    model = _eos_prone(model, tok)
    params = SamplingParams(n=5, temperature=1.0, max_new_tokens=24, seed=1)
    every_step = _flat(HFRolloutEngine(model, tok).generate(_prompts(tok), params))
    monkeypatch.setattr(decode_mod, "CHECK_EVERY", {"cpu": 5})
    every_fifth = _flat(HFRolloutEngine(model, tok).generate(_prompts(tok), params))
    assert [(c.token_ids, c.finish_reason) for c in every_step] == [
        (c.token_ids, c.finish_reason) for c in every_fifth
    ]
    for a, b in zip(every_step, every_fifth):
        assert torch.equal(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs))


def test_a_lora_wrapped_policy_decodes_like_generate(tiny_model_and_tokenizer, one_thread):
    """A peft-wrapped policy (model.lora) samples from the wrapper: the loop passes `logits_to_keep`
    through it to the base model and the samples equal `generate`'s."""
    peft = pytest.importorskip("peft")
    model, tok = tiny_model_and_tokenizer
    base = _eos_prone(model, tok)
    params = SamplingParams(n=5, temperature=1.0, max_new_tokens=24, seed=5)
    plain = _flat(HFRolloutEngine(base, tok).generate(_prompts(tok), params))  # before peft wraps it in place
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    wrapped = peft.get_peft_model(base, cfg).eval()
    assert decode_mod._forward_kwargs(wrapped) == {"logits_to_keep": 1}
    ours = _flat(HFRolloutEngine(wrapped, tok).generate(_prompts(tok), params))
    theirs = _flat(HFRolloutEngine(wrapped, tok, drop_finished=False).generate(_prompts(tok), params))
    assert [c.token_ids for c in ours] == [c.token_ids for c in theirs]
    for a, b in zip(ours, theirs):
        assert torch.equal(torch.tensor(a.sampler_logprobs), torch.tensor(b.sampler_logprobs))
    # the adapters (random, not zero-initialised) change what is sampled: the test sees the wrapper
    assert [c.token_ids for c in plain] != [c.token_ids for c in ours]


def test_the_recipe_switch_turns_the_loop_off(tiny_model_and_tokenizer):
    from reasonrl.rollout.factory import build_rollout_engine

    model, tok = tiny_model_and_tokenizer
    assert build_rollout_engine("hf", model, tok, {}).drop_finished is True
    assert build_rollout_engine("hf", model, tok, {"drop_finished": False}).drop_finished is False
