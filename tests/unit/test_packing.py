"""Sequence packing (`model.pack_tokens`): packs respect the token budget and keep row order; packed
log-probs, entropy and gradients equal the padded forward's (left-padded prompts, right-padded
completions of different lengths), with packs of several sequences and with one sequence per pack,
grouped-query attention, and sliding-window layers; the pack's attention runs per sequence
(`segment_attention`) and the model's own attention implementation is back afterwards."""

from __future__ import annotations

import functools

import pytest
import torch
from _spread_weights import spread_weights

from reasonrl.engines import packing
from reasonrl.engines.packing import packed_logprobs, plan_packs, segment_attention
from reasonrl.engines.single import completion_logprobs
from reasonrl.types import TrainBatch

P, T = 6, 8


def test_plan_packs():
    assert plan_packs([3, 4, 2, 6, 1], 7) == [[0, 1], [2], [3, 4]]
    assert plan_packs([9, 2], 7) == [[0], [1]]  # a row over the budget gets a pack of its own
    assert sum(plan_packs([1] * 10, 4), []) == list(range(10))


def _setup(**extra):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, **extra)  # fmt: skip
    model = Qwen2ForCausalLM(cfg).float()
    g = torch.Generator().manual_seed(2)
    prompt_pad, comp_len = [0, 2, 4, 1], [8, 3, 5, 1]
    ids = torch.randint(1, 64, (4, P + T), generator=g)
    attn = torch.ones(4, P + T, dtype=torch.long)
    for i, (a, c) in enumerate(zip(prompt_pad, comp_len)):
        attn[i, :a] = 0
        attn[i, P + c :] = 0
        ids[i, :a] = 0
        ids[i, P + c :] = 0
    mask = attn[:, P:].bool()
    return model, TrainBatch(input_ids=ids, attention_mask=attn, mask=mask, prompt_len=P), mask


def _run(model, batch, mask, fn):
    model.zero_grad()
    lp, ent = fn(model, batch, with_entropy=True)
    ((lp * mask).sum() + 0.1 * (ent * mask).sum()).backward()
    return (
        lp.detach() * mask,
        ent.detach() * mask,
        {n: q.grad.clone() for n, q in model.named_parameters() if q.grad is not None},
    )


SLIDING = {
    "layer_types": ["sliding_attention", "full_attention"],
    "sliding_window": 3,
    "use_sliding_window": True,
}


@pytest.mark.parametrize(
    "budget,extra,chunk", [(64, {}, 0), (10, {}, 0), (64, SLIDING, 0), (10, {}, 3), (64, {}, 4)]
)
def test_packed_equals_padded(budget, extra, chunk, monkeypatch):
    model, batch, mask = _setup(**extra)
    assert model.config._attn_implementation == "sdpa"
    lp0, ent0, g0 = _run(model, batch, mask, completion_logprobs)
    calls = []

    def counted(module, query, key, value, attention_mask, **kw):
        calls.append((attention_mask, kw.get("sliding_window")))
        return segment_attention(module, query, key, value, attention_mask, **kw)

    monkeypatch.setattr(packing, "segment_attention", counted)
    lp1, ent1, g1 = _run(
        model, batch, mask, functools.partial(packed_logprobs, pack_tokens=budget, chunk=chunk)
    )
    packs = len(plan_packs([P + T - a - (T - c) for a, c in zip([0, 2, 4, 1], [8, 3, 5, 1])], budget))
    assert len(calls) == 2 * packs  # every layer of every pack's forward went through it
    assert [w for _, w in calls[:2]] == ([3, None] if extra else [None, None])
    assert all(m is None for m, _ in calls)  # no dense [P, P] block mask built for a pack
    assert model.config._attn_implementation == packing.SEGMENT_ATTENTION  # kept: see the checkpointing test
    torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent1, ent0, rtol=1e-5, atol=1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=1e-6, msg=n)
    assert (lp0 != 0).sum() == int(mask.sum())  # every completion token compared


def test_packed_equals_padded_with_gradient_checkpointing():
    # the checkpointed layers are recomputed in backward, after packed_logprobs returned: they must run
    # the same attention again (a swap undone on return failed here: another number of saved tensors)
    model, batch, mask = _setup()
    lp0, _, g0 = _run(model, batch, mask, completion_logprobs)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    lp1, _, g1 = _run(model, batch, mask, functools.partial(packed_logprobs, pack_tokens=10))
    torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=1e-6, msg=n)


def test_generation_after_packing_is_unchanged():
    # the model keeps segment attention after a packed forward; generation (left padding, KV cache)
    # must still be SDPA's: the same greedy tokens and the same scores
    model, batch, _ = _setup()
    prompts, attn = batch.input_ids[:, :P], batch.attention_mask[:, :P]
    kw = dict(
        max_new_tokens=6, do_sample=False, output_scores=True, return_dict_in_generate=True, pad_token_id=0
    )
    before = model.generate(input_ids=prompts, attention_mask=attn, **kw)
    packing.use_segment_attention(model)
    after = model.generate(input_ids=prompts, attention_mask=attn, **kw)
    assert model.config._attn_implementation == packing.SEGMENT_ATTENTION
    assert torch.equal(after.sequences, before.sequences)
    torch.testing.assert_close(torch.stack(after.scores), torch.stack(before.scores), rtol=0, atol=1e-6)


def test_a_model_whose_attention_bypasses_the_interface_is_refused():
    # attention code of its own would never see the pack's bounds and attend across sequences
    class OwnAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(64, 64)

        def forward(self, input_ids, **kw):
            return type("Out", (), {"logits": self.emb(input_ids)})()

    _, batch, _ = _setup()
    with pytest.raises(NotImplementedError, match="model.pack_tokens"):
        packed_logprobs(OwnAttention(), batch, pack_tokens=64)


def test_a_model_that_counts_positions_along_the_whole_pack_is_refused():
    """A model that drops the pack's position ids (here GPT-2, learned absolute positions) would give a
    pack's later sequences the positions of their place in the pack: no token dependence shows it, the
    comparison with each sequence run alone does."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from reasonrl.config import ConfigError

    class CountsAlong(GPT2LMHeadModel):
        def forward(self, *args, position_ids=None, **kwargs):
            return super().forward(*args, **kwargs)

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    with pytest.raises(ConfigError, match=r"otherwise than each alone .*set model.pack_tokens=0"):
        packing.check_packing(CountsAlong(cfg).eval())
    packing.check_packing(GPT2LMHeadModel(cfg).eval())  # given the position ids, it packs


def _stablelm():
    """A tiny StableLM: its decoder layers call the attention interface but drop the keywords that carry a
    pack's bounds (`cu_seq_lens_q`), passing `position_ids` on instead."""
    from transformers import StableLmConfig, StableLmForCausalLM

    model, batch, mask = _setup()
    torch.manual_seed(0)
    cfg = StableLmConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    return spread_weights(StableLmForCausalLM(cfg).float(), 0.3), batch, mask


@pytest.mark.parametrize("budget", [64, 10])
def test_packs_bounded_by_position_ids_equal_padded_with_checkpointing(budget):
    """Budget 10 leaves some sequences alone in their pack: a one-sequence pack is still a pack in its
    forward, and its checkpointed recompute (outside it) runs the same causal attention."""
    import gc

    model, batch, mask = _stablelm()
    lp0, ent0, g0 = _run(model, batch, mask, completion_logprobs)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    packing.check_packing(model)
    gc.collect()
    kept = len(packing._BOUNDS)
    lp1, ent1, g1 = _run(model, batch, mask, functools.partial(packed_logprobs, pack_tokens=budget))
    gc.collect()
    assert len(packing._BOUNDS) == kept  # each reading went with its position ids: nothing accumulates
    torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent1, ent0, rtol=1e-5, atol=1e-5)
    for n in g0:  # spread weights: gradients up to ~1, measured gap 1.1e-5
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=2e-5, msg=n)
    assert (lp0 != 0).sum() == int(mask.sum())


def test_position_id_bounds_leave_generation_unchanged():
    """After packing, a StableLM generates as before: one row (a prefill with positions from 0, then a
    cache) and a left-padded batch."""
    model, batch, _ = _stablelm()
    model.eval()
    kw = dict(
        max_new_tokens=6, do_sample=False, output_scores=True, return_dict_in_generate=True, pad_token_id=0
    )
    runs = [(batch.input_ids[3:4, 1:P], None), (batch.input_ids[:, :P], batch.attention_mask[:, :P])]
    before = [model.generate(input_ids=i, attention_mask=a, **kw) for i, a in runs]
    packing.use_segment_attention(model)
    with torch.no_grad():
        packed_logprobs(model, batch, pack_tokens=64)
    for (i, a), b in zip(runs, before):
        after = model.generate(input_ids=i, attention_mask=a, **kw)
        assert torch.equal(after.sequences, b.sequences)
        torch.testing.assert_close(torch.stack(after.scores), torch.stack(b.scores), rtol=0, atol=1e-6)


def _eager_model(kind: str):
    """A tiny Gemma 2 (attention logit soft-capping, every other layer sliding) or gpt-oss (attention
    sinks, every other layer sliding) in eager attention, weights large enough that the soft-cap bends
    the scores and the sinks take real probability mass."""
    import transformers as tf

    torch.manual_seed(0)
    common = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=3)  # fmt: skip
    if kind == "gemma2":
        cfg = tf.Gemma2Config(**common, attn_logit_softcapping=2.0, final_logit_softcapping=None)
    else:
        cfg = tf.GptOssConfig(**common, num_local_experts=4, num_experts_per_tok=2)
    model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float()
    return spread_weights(model, 0.4)


@pytest.mark.parametrize("kind", ["gemma2", "gpt_oss"])
def test_soft_capped_and_sink_attention_packs_equal_their_eager_padded_forward(kind, monkeypatch):
    """(gpt-oss's sinks go through SDPA, `sink_attention`: no scores written out for them)"""
    model = _eager_model(kind)
    _, batch, mask = _setup()
    if kind == "gpt_oss":
        monkeypatch.setattr(packing, "explicit_attention", None)  # not called for sinks
    lp0, ent0, g0 = _run(model, batch, mask, completion_logprobs)  # the model's own eager attention
    for budget in (64, 10):
        lp1, ent1, g1 = _run(model, batch, mask, functools.partial(packed_logprobs, pack_tokens=budget))
        torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ent1, ent0, rtol=1e-5, atol=1e-5)
        for n in g0:  # fp32 summation order: 3.6e-5 apart in an embedding gradient whose entries reach 41
            scale = g0[n].abs().max().clamp_min(1.0).item()
            torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=1e-5 * scale, msg=n)
    # the padded forward after packing still runs the model's eager attention (SDPA would drop the
    # soft-cap or the sinks: these weights make that a visible difference)
    assert model.config._attn_implementation == packing.SEGMENT_ATTENTION
    torch.testing.assert_close(_run(model, batch, mask, completion_logprobs)[0], lp0, rtol=1e-6, atol=1e-6)
    setattr(model.config, packing.BASE_ATTENTION, "sdpa")
    lp_sdpa = _run(model, batch, mask, completion_logprobs)[0]
    assert (lp_sdpa - lp0).abs().max() > 1e-2


@pytest.mark.parametrize("heads, kv_heads, dim, window", [(4, 2, 8, None), (4, 4, 12, 3), (6, 2, 16, 5)])
def test_sinks_through_sdpa_equal_them_written_out(heads, kv_heads, dim, window):
    """Attention sinks as one extra key (value 0, score the head's sink, carried by an extra head
    dimension) behind a dummy query, through SDPA: outputs and the gradients of queries, keys, values
    and sinks equal the explicit softmax over [scores, sink], with grouped-query heads, head dims that
    are and are not multiples of 8, and sliding windows."""
    from reasonrl.engines.pack_attention import explicit_attention, sink_attention

    torch.manual_seed(0)
    n, length = 3, 11
    q = torch.randn(n, heads, length, dim, requires_grad=True)
    k, v = (torch.randn(n, kv_heads, length, dim, requires_grad=True) for _ in range(2))
    sinks = (2 * torch.randn(heads)).requires_grad_()
    mask = None
    if window:
        i = torch.arange(length)
        mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    weights = torch.randn(n, heads, length, dim)
    outs, grads = [], []
    for attend in (lambda: sink_attention(q, k, v, mask, 0.3, 0.0, sinks),
                   lambda: explicit_attention(q, k, v, mask, 0.3, 0.0, None, sinks)):  # fmt: skip
        out = attend()
        outs.append(out)
        grads.append(torch.autograd.grad((out * weights).sum(), (q, k, v, sinks)))
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=2e-6)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-5)
    assert (
        outs[1] - explicit_attention(q, k, v, mask, 0.3, 0.0, None, None)
    ).abs().max() > 1e-2  # sinks matter


def test_pack_attention_writes_no_scores_out_for_sinks_or_narrower_values():
    """Sinks (gpt-oss) and values narrower than the queries (multi-head latent attention: DeepSeek-V3,
    Kimi K2) go through SDPA's fused kernel: no tensor of the [S, H, L, L] scores is created, forward or
    backward (before: sinks written out as explicit attention, and SDPA's math path for narrower
    values; `bench/lean_attention.py --kind sinks`: 2.2x faster, largest tensor 132 -> 16 MiB at 4 x 1024 tokens),
    and the values' padding changes nothing."""
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode

    from reasonrl.engines.pack_attention import causal_sdpa, sink_attention

    class Largest(TorchDispatchMode):
        size = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    Largest.size = max(Largest.size, t.numel())
            return out

    torch.manual_seed(0)
    n, heads, length = 2, 4, 128
    q, k = (torch.randn(n, heads, length, 24, requires_grad=True) for _ in range(2))
    v = torch.randn(n, heads, length, 16, requires_grad=True)
    sinks = torch.randn(heads, requires_grad=True)
    for attend in (
        lambda: causal_sdpa(q, k, v, None, 0.2, 0.0),
        lambda: sink_attention(q, k, v, None, 0.2, 0.0, sinks),
    ):
        Largest.size = 0
        with Largest():
            attend().sum().backward()
        assert Largest.size < n * heads * length * length, Largest.size
    out = causal_sdpa(q, k, v, None, 0.2, 0.0)
    grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    plain = F.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=0.2
    )  # (math path: scores written out)
    torch.testing.assert_close(out, plain, rtol=0, atol=2e-6)
    for a, b in zip(grads, torch.autograd.grad(plain.pow(2).sum(), (q, k, v))):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-5)


def _kernel_wrapped_rule(params: tuple[str, ...], calls: list):
    """A delta rule as transformers' kernel wrapper presents it: keywords its implementation lacks
    (`applicable_params`) are dropped; the implementation doubles the values and records its calls."""
    applicable_params = params

    def wrapped(query, key, value, g, beta, **kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k in applicable_params}
        calls.append((query.shape[1], kwargs.get("cu_seqlens")))
        return value * 2, None

    return wrapped


def test_a_delta_rule_that_takes_a_packs_bounds_gets_them_and_any_other_runs_per_sequence():
    """flash-linear-attention's rule takes `cu_seqlens`: it gets the pack's bounds in one call; the
    PyTorch fallback does not: it runs once per sequence (`engines.pack_layers`). Without bounds, or
    with one sequence, either runs once, unchanged."""
    from reasonrl.engines.pack_layers import _per_sequence

    x, cu = torch.randn(1, 7, 2, 4), torch.tensor([0, 3, 7])
    for params, want in (
        (("query", "key", "value", "g", "beta", "cu_seqlens"), [(7, [0, 3, 7])]),
        (("query", "key", "value", "g", "beta", "initial_state"), [(3, None), (4, None)]),
    ):
        calls = []
        rule = _per_sequence(_kernel_wrapped_rule(params, calls))
        out, state = rule(x, x, x, x[..., 0], x[..., 0], cu_seqlens=cu)
        assert torch.equal(out, x * 2) and state is None
        assert [(n, None if c is None else c.tolist()) for n, c in calls] == want
        calls.clear()
        rule(x, x, x, x[..., 0], x[..., 0], cu_seqlens=None)
        rule(x, x, x, x[..., 0], x[..., 0], cu_seqlens=torch.tensor([0, 7]))
        assert [n for n, _ in calls] == [7, 7]
