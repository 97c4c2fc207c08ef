"""Log-probs without the [B, T, V] logits (`model.logprob_chunk`): chunked log-probs, entropy and
gradients equal the plain computation, and no tensor of B x T x V elements is ever created (a
dispatch-mode probe records the largest tensor any op produces), with a 100k vocabulary; packed
(`model.pack_tokens`) and chunked together, no pack's [P, V] logits either."""

from __future__ import annotations

import functools
import shutil

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from reasonrl.engines.single import completion_logprobs
from reasonrl.types import TrainBatch

V, B, P, T, H = 100_000, 2, 3, 24, 16


class Largest(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


def _setup():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=V, hidden_size=H, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=False)  # fmt: skip
    model = Qwen2ForCausalLM(cfg).float()
    g = torch.Generator().manual_seed(1)
    attn = torch.ones(B, P + T, dtype=torch.long)
    attn[0, 0] = 0
    batch = TrainBatch(input_ids=torch.randint(0, V, (B, P + T), generator=g), attention_mask=attn,
                       mask=torch.ones(B, T, dtype=torch.bool), prompt_len=P)  # fmt: skip
    return model, batch


def _run(model, batch, fn):
    model.zero_grad()
    probe = Largest()
    with probe:
        lp, ent = fn(model, batch, with_entropy=True)
        (lp.sum() + 0.1 * ent.sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return lp.detach(), ent.detach(), grads, probe.numel


def test_chunked_equals_plain_without_the_full_logits():
    model, batch = _setup()
    lp0, ent0, g0, big0 = _run(model, batch, completion_logprobs)
    lp1, ent1, g1, big1 = _run(model, batch, functools.partial(completion_logprobs, chunk=4))
    torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent1, ent0, rtol=1e-5, atol=1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=1e-6, msg=n)
    assert big0 >= B * T * V  # the plain path materialises the logits
    assert (
        big1 <= max(B * 4 * V, V * H) < B * T * V
    )  # chunks of 4 positions, or the [V, H] weights themselves
    with torch.no_grad():
        lp2, _ = completion_logprobs(model, batch, chunk=5)  # without gradients, no recomputation
    torch.testing.assert_close(lp2, lp0, rtol=1e-5, atol=1e-5)


def test_packed_and_chunked_equals_plain_without_a_packs_logits():
    from reasonrl.engines.packing import packed_logprobs

    model, batch = _setup()
    lp0, ent0, g0, _ = _run(model, batch, completion_logprobs)
    lp1, ent1, g1, big1 = _run(model, batch, functools.partial(packed_logprobs, pack_tokens=64, chunk=4))
    torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent1, ent0, rtol=1e-5, atol=1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=1e-6, msg=n)
    pack = 2 * (P + T) - 1  # both rows in one pack (one left-padded prompt position dropped)
    assert big1 <= max(4 * V, V * H) < pack * V  # chunks of 4 positions, or the [V, H] weights themselves


@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile needs a C compiler on CPU")
def test_compiled_logprobs_inside_checkpointed_chunks_match_eager():
    """The CUDA path (torch.compile'd log-prob / entropy) forced on CPU, inside the chunked path's
    activation checkpointing: same log-probs, entropy and gradients as the eager functions (a
    checkpoint early stop inside the compiled region broke the recomputation on a GPU)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from reasonrl.algorithms import logprobs as L
    from reasonrl.engines import output_head as O
    from reasonrl.engines import single as S
    from reasonrl.types import TrainBatch

    cfg = Qwen2Config(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    ids = torch.randint(0, 300, (2, 24))
    batch = TrainBatch(ids, torch.ones_like(ids), torch.ones(2, 16, dtype=torch.bool), 8)

    def run(compiled: bool):
        fn = (
            (lambda z, t, w=False, g=True, temp=1.0: L._logprobs_and_entropy(z, t, w, g, True, temp))
            if compiled
            else None
        )
        with pytest.MonkeyPatch.context() as mp:
            if fn:
                mp.setattr(O, "logprobs_and_entropy", fn)  # the chunked path's
            lp, ent = S.completion_logprobs(model, batch, with_entropy=True, chunk=5, entropy_grad=False)
            lp.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return lp.detach(), ent, grads

    eager, compiled = run(False), run(True)
    assert L._compiled.get("ok") and L._compiled["fns"] is not None  # really the compiled functions
    assert torch.allclose(eager[0], compiled[0], atol=1e-5) and torch.allclose(
        eager[1], compiled[1], atol=1e-5
    )
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(eager[2], compiled[2]))
    assert max(g.abs().max() for g in eager[2]) > 0  # gradients flowed
