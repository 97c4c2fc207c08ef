"""Attention sinks through SDPA (`models/sinks.py`): a model with sinks (gpt-oss, Granite SWA, ...) loads
on it instead of transformers' eager attention, and computes what eager computes (logits, gradients,
the sampled tokens and log-probs) without writing out any [B, H, Q, K] scores."""

from __future__ import annotations

import pytest
import torch
from _spread_weights import spread_weights
from torch.utils._python_dispatch import TorchDispatchMode

from reasonrl.models.loading import load_policy
from reasonrl.models.sinks import SINK_SDPA, sink_sdpa_attention
from reasonrl.planner.shape import model_shape
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine


class _Scores(TorchDispatchMode):
    """The shapes of the tensors created within whose last two sizes are both at least `length`: query
    by key scores."""

    def __init__(self, length: int):
        super().__init__()
        self.length, self.shapes = length, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.dim() >= 3 and min(t.shape[-2:]) >= self.length:
                self.shapes.add(tuple(t.shape))
        return out


def _gpt_oss(path, tok, family: str = "gpt_oss"):
    import transformers as tf

    settings = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                    sliding_window=4, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    if family == "gpt_oss":
        cfg = tf.GptOssConfig(**settings, num_local_experts=4, num_experts_per_tok=2)
    else:
        cfg = tf.GraniteSWAConfig(**settings)
    torch.manual_seed(0)
    spread_weights(tf.AutoModelForCausalLM.from_config(cfg), 0.4).save_pretrained(path)
    tok.save_pretrained(path)
    eager = tf.AutoModelForCausalLM.from_pretrained(path)
    assert eager.config._attn_implementation == "eager"  # what transformers runs them with
    return eager


@pytest.mark.parametrize("family", ["gpt_oss", "granite_swa"])
def test_a_model_with_sinks_loads_on_sdpa_and_computes_what_eager_does(
    family, tiny_model_and_tokenizer, tmp_path
):
    _, tok = tiny_model_and_tokenizer
    eager = _gpt_oss(tmp_path, tok, family)
    logs = []
    model, tok = load_policy(str(tmp_path), device="cpu", log=logs.append)
    assert model.config._attn_implementation == SINK_SDPA and any("sinks through SDPA" in x for x in logs)
    # the run's preflight builds the model's shape from this config (its first name held "sdpa", which
    # transformers took for SDPA, unsupported by these models: `reasonrl train` stopped there)
    assert model_shape(str(tmp_path), 0, [], config=model.config).params == eager.num_parameters()
    ids = torch.randint(3, len(tok), (3, 24), generator=torch.Generator().manual_seed(1))
    attn = torch.ones_like(ids)
    attn[1, :5], attn[2, :17] = 0, 0  # left padding; the last row's 7 tokens are past the window of 4
    outs = []
    for m in (model.train(), eager.train()):
        logits = m(input_ids=ids, attention_mask=attn).logits
        (logits * attn[..., None]).pow(2).mean().backward()
        outs.append((logits.detach(), {n: p.grad for n, p in m.named_parameters()}))
    torch.testing.assert_close(  # measured up to 1.2e-5 (granite_swa, an AVX-512 Xeon, 2026-11-28)
        outs[0][0] * attn[..., None], outs[1][0] * attn[..., None], rtol=1e-5, atol=3e-5
    )
    for n, g in outs[1][1].items():
        torch.testing.assert_close(outs[0][1][n], g, rtol=0, atol=1e-4 * g.abs().max().item(), msg=n)
    assert outs[1][1]["model.layers.0.self_attn.sinks"].abs().max() > 1e-3  # the sinks matter
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=4)
    prompts = [[3, 4, 5], [6, 7, 8, 9, 10, 11, 12], [13, 14]]
    model.eval(), eager.eval()
    ours = [c for g in HFRolloutEngine(model, tok).generate(prompts, params) for c in g]
    theirs = [c for g in HFRolloutEngine(eager, tok).generate(prompts, params) for c in g]
    assert [c.token_ids for c in ours] == [c.token_ids for c in theirs]
    for a, b in zip(ours, theirs):
        assert max(abs(x - y) for x, y in zip(a.sampler_logprobs, b.sampler_logprobs)) < 1e-5
    model.train()
    found = []  # [B, H, Q, K] scores, forward or backward: eager's, and none of ours
    for m in (eager, model):
        with _Scores(24) as probe:
            m(input_ids=ids, attention_mask=attn).logits.sum().backward()
        found.append({s for s in probe.shapes if len(s) == 4 and s[:3] == (3, 4, 24)})
    assert found[0] and not found[1], found


@pytest.mark.parametrize("queries, masked", [(9, False), (9, True), (1, False), (1, True)])
def test_sink_sdpa_equals_the_eager_softmax_over_scores_and_sink(queries, masked):
    """Causal without a mask (a query of zeros lines SDPA's causal mask up), under a boolean or additive
    mask (the sink's column seen by all), and one query decoding against a cache, with and without a
    mask; grouped-query heads."""
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    torch.manual_seed(0)
    batch, heads, kv, keys, dim = 2, 4, 2, 9, 8
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = heads // kv, False
    module.sinks = torch.nn.Parameter(2 * torch.randn(heads))
    q = torch.randn(batch, heads, queries, dim)
    k, v = torch.randn(batch, kv, keys, dim), torch.randn(batch, kv, keys, dim)
    allowed = torch.ones(batch, 1, queries, keys, dtype=torch.bool).tril(keys - queries)
    if masked:
        allowed[1, :, :, :3] = False  # left padding
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    expected, _ = eager_attention_forward(module, q, k, v, additive, scaling=0.3)
    for mask in (allowed, additive) if masked else (None,):
        out, _ = sink_sdpa_attention(module, q, k, v, mask, scaling=0.3, s_aux=module.sinks)
        rows = allowed[:, 0].any(-1)  # (rows that see no key: eager's output there is the sink's, 0)
        torch.testing.assert_close(out[rows], expected[rows], rtol=0, atol=2e-6)
