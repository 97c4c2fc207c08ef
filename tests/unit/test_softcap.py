"""Soft-capped attention in blocks of queries (`models.softcap`): the arithmetic of Gemma 2's eager
attention without its [B, H, Q, K] scores kept for the backward, in packs and in every other forward."""

from __future__ import annotations

import pytest
import torch
from _spread_weights import spread_weights

from reasonrl.engines.pack_attention import explicit_attention
from reasonrl.models import softcap
from reasonrl.models.softcap import softcap_attention


def _inputs(dtype, heads=4, kv_heads=2, length=23, dim=8):
    torch.manual_seed(0)
    q = (2 * torch.randn(2, heads, length, dim, dtype=dtype)).requires_grad_()
    k, v = ((2 * torch.randn(2, kv_heads, length, dim, dtype=dtype)).requires_grad_() for _ in range(2))
    return q, k, v


def _masks(length, empty_row: bool = True):
    i = torch.arange(length)
    window = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - 4)
    padded = torch.rand(2, 1, length, length, generator=torch.Generator().manual_seed(1)) > 0.3
    # a row that sees no key (a pad query): eager averages every value (written out in float64, its
    # float32 softmax of float64's most negative value is NaN)
    padded[0, 0, 5] = not empty_row
    return {"causal": None, "window": window, "4d": padded}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_kind", ["causal", "window", "4d"])
@pytest.mark.parametrize("block", [None, 40])
def test_soft_capped_blocks_equal_eager_attention_written_out(monkeypatch, dtype, mask_kind, block):
    """Outputs and the gradients of queries, keys and values equal the scores written out (eager's
    arithmetic: `explicit_attention`), causal, under a window and under a 4-D mask with a row that sees
    nothing, grouped-query heads, in one block and in several; and the cap changes the result."""
    if block is not None:
        monkeypatch.setattr(softcap, "BLOCK_ELEMENTS", block * 2 * 4 * 23 // 16)  # 16-query blocks: 2 of them
    q, k, v = _inputs(dtype)
    mask = _masks(q.shape[2], empty_row=dtype == torch.float32)[mask_kind]
    if block is not None:
        assert len(softcap._spans(q, k.shape[2])) == 2
    weights = torch.randn(q.shape[0], q.shape[1], q.shape[2], v.shape[-1], dtype=dtype)
    outs, grads = [], []
    for attend in (lambda: softcap_attention(q, k, v, mask, 0.35, 2.0),
                   lambda: explicit_attention(q, k, v, mask, 0.35, 0.0, 2.0, None)):  # fmt: skip
        out = attend()
        outs.append(out)
        grads.append(torch.autograd.grad((out * weights).sum(), (q, k, v)))
    tol = 1e-6 if dtype == torch.float64 else 2e-6  # eager's softmax runs in float32 either way
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=tol)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=5 * tol)
    uncapped = explicit_attention(q, k, v, mask, 0.35, 0.0, None, None)
    assert (outs[1] - uncapped).abs().max() > 0.1  # the cap bends these scores


def test_soft_capped_gradients_pass_gradcheck():
    q, k, v = (
        x.detach()[:1, :2, :9, :4].clone().requires_grad_() for x in _inputs(torch.float64, kv_heads=4)
    )
    mask = _masks(9)["window"]
    assert torch.autograd.gradcheck(lambda q, k, v: softcap_attention(q, k, v, mask, 0.5, 2.0), (q, k, v))


def test_soft_capped_attention_keeps_no_scores_for_the_backward():
    """What autograd keeps: inputs, output and a normaliser per row, no [.., Q, K] tensor (eager keeps
    several: the check can fail)."""
    q, k, v = _inputs(torch.float32, length=64)

    def kept(attend) -> list[tuple]:
        shapes = []
        with torch.autograd.graph.saved_tensors_hooks(
            lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t
        ):
            attend().sum().backward()
        return [s for s in shapes if s[-2:] == (64, 64)]

    assert kept(lambda: softcap_attention(q, k, v, None, 0.35, 2.0)) == []
    assert len(kept(lambda: explicit_attention(q, k, v, None, 0.35, 0.0, 2.0, None))) >= 3


def _gemma2(tmp_path, tok):
    from transformers import Gemma2Config, Gemma2ForCausalLM

    cfg = Gemma2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, attn_logit_softcapping=2.0,
                       sliding_window=4, pad_token_id=tok.pad_token_id)  # fmt: skip
    torch.manual_seed(0)
    spread_weights(Gemma2ForCausalLM(cfg), 0.4).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    return str(tmp_path)


def test_a_loaded_gemma2_trains_and_generates_as_its_eager_attention(tiny_model_and_tokenizer, tmp_path):
    """`load_policy` switches Gemma 2 to the blocks (and logs it); a left-padded batch's logits and
    gradients, and greedy generation with its KV cache (one query per step, under the padding mask),
    equal the checkpoint's eager attention."""
    from transformers import AutoModelForCausalLM

    from reasonrl.models.loading import load_policy

    _, tok = tiny_model_and_tokenizer
    path = _gemma2(tmp_path, tok)
    said = []
    ours, tok = load_policy(path, device="cpu", log=said.append)
    eager = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    assert ours.config._attn_implementation == softcap.SOFTCAP and any("soft-capped" in s for s in said)
    batch = tok(["7 + 8 = 15, so", "1 + 2 = 3 and 4 + 5 = 9 and"], return_tensors="pt", padding=True)
    assert (batch.attention_mask == 0).any()  # left padding in the batch
    grads = []
    for model in (ours, eager):
        model.train()
        logits = model(**batch).logits
        real = batch.attention_mask.bool()
        (logits[real].log_softmax(-1)[:, 5].sum()).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        model.zero_grad()
    torch.testing.assert_close(ours(**batch).logits[real], eager(**batch).logits[real], rtol=0, atol=1e-5)
    for n in grads[1]:
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=1e-5, msg=n)
    kw = dict(max_new_tokens=8, do_sample=False, output_scores=True, return_dict_in_generate=True,
              pad_token_id=tok.pad_token_id)  # fmt: skip
    with torch.no_grad():
        a, b = (m.eval().generate(**batch, **kw) for m in (ours, eager))
    assert torch.equal(a.sequences, b.sequences)
    torch.testing.assert_close(torch.stack(a.scores), torch.stack(b.scores), rtol=0, atol=1e-5)


def test_attention_dropout_in_training_keeps_eager_arithmetic(monkeypatch):
    """Blocks have no dropout: a model training with attention dropout runs the scores written out."""
    from reasonrl.engines import pack_attention

    called = []
    real = pack_attention.explicit_attention
    monkeypatch.setattr(
        pack_attention, "explicit_attention", lambda *a, **kw: called.append(a[5]) or real(*a, **kw)
    )
    q, k, v = (x.detach() for x in _inputs(torch.float32))
    module = torch.nn.Module()
    out, _ = softcap.softcap_attention_forward(
        module.train(), q, k, v, None, scaling=0.35, dropout=0.1, softcap=2.0
    )
    assert called == [0.1] and out.shape == (2, 23, 4, 8)
    softcap.softcap_attention_forward(module.eval(), q, k, v, None, scaling=0.35, dropout=0.1, softcap=2.0)
    assert called == [0.1]  # evaluation: the blocks


@pytest.mark.skipif(
    __import__("reasonrl.engines.compiled", fromlist=["cpp_compiler"]).cpp_compiler() is None,
    reason="torch.compile on CPU needs a C++ compiler",
)
def test_soft_capped_blocks_compile_in_one_graph():
    """`model.compile` compiles the decoder layers: under a mask, the blocks skip no keys there (the keys
    a block sees are data, and would break the graph), and give the same values and gradients."""
    q, k, v = _inputs(torch.float32, length=16)
    mask = _masks(16)["4d"]
    compiled = torch.compile(lambda q, k, v: softcap_attention(q, k, v, mask, 0.35, 2.0), fullgraph=True)
    out = compiled(q, k, v)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    ref = softcap_attention(q, k, v, mask, 0.35, 2.0)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
    for a, b in zip(grads, torch.autograd.grad(ref.sum(), (q, k, v))):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
