"""Sequence packing (`model.pack_tokens`): packs respect the token budget and keep row order; packed
log-probs, entropy and gradients equal the padded forward's (left-padded prompts, right-padded
completions of different lengths), with packs of several sequences and with one sequence per pack."""

from __future__ import annotations

import functools

import pytest
import torch

from reasonrl.engines.packing import packed_logprobs, plan_packs
from reasonrl.engines.single import completion_logprobs
from reasonrl.types import TrainBatch

P, T = 6, 8


def test_plan_packs():
    assert plan_packs([3, 4, 2, 6, 1], 7) == [[0, 1], [2], [3, 4]]
    assert plan_packs([9, 2], 7) == [[0], [1]]  # a row over the budget gets a pack of its own
    assert sum(plan_packs([1] * 10, 4), []) == list(range(10))


def _setup():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64)  # fmt: skip
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
    return lp.detach() * mask, ent.detach() * mask, {n: q.grad.clone() for n, q in model.named_parameters()}


@pytest.mark.parametrize("budget", [64, 10])
def test_packed_equals_padded(budget):
    model, batch, mask = _setup()
    lp0, ent0, g0 = _run(model, batch, mask, completion_logprobs)
    lp1, ent1, g1 = _run(model, batch, mask, functools.partial(packed_logprobs, pack_tokens=budget))
    torch.testing.assert_close(lp1, lp0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent1, ent0, rtol=1e-5, atol=1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-4, atol=1e-6, msg=n)
    assert (lp0 != 0).sum() == int(mask.sum())  # every completion token compared
