"""The tiny models and training forwards the architecture tests share (`test_architectures.py`,
`test_hybrids.py`): one random model per family of `_families`, 16 sampled completions from the HF
engine, and every training forward that must recompute their log-probs.

Owns: `FORWARDS`, `Tok`, `_model`, `_multimodal_config`, `_sampled`."""

from __future__ import annotations

import functools

import torch
from _families import (
    COMMON,
    COMPRESSED,
    FAMILIES,
    HYBRIDS,
    LEFT_PADDING_BREAKS,
    LEGACY_ATTENTION,
    MULTIMODAL,
    NAMED_ATTENTION,
    NO_PACKING,
    SPREAD_SEED,
)
from _spread_weights import spread_weights

from reasonrl.engines.packing import packed_logprobs
from reasonrl.engines.single import completion_logprobs
from reasonrl.models.loading import attention_kwargs, unclamp_time_steps
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.types import TrainBatch

FORWARDS = {
    "padded": completion_logprobs,
    "chunked": functools.partial(completion_logprobs, chunk=5),
    "packed": functools.partial(packed_logprobs, pack_tokens=64),
    "packed+chunked": functools.partial(packed_logprobs, pack_tokens=32, chunk=4),
}


class Tok:
    pad_token_id, eos_token_id, bos_token_id = 0, 1, None

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def _model(family: str, spread: bool = True):
    import transformers

    from reasonrl.models.loading import causal_lm_class

    with_head_dim = {**FAMILIES, **NO_PACKING, **NAMED_ATTENTION, **COMPRESSED, **LEGACY_ATTENTION}
    if family in MULTIMODAL:
        cfg = _multimodal_config(family)
    elif family in with_head_dim:
        cls, extra = with_head_dim[family]
        cfg = getattr(transformers, cls)(**{k: v for k, v in {**COMMON, **extra}.items() if v is not None})
    else:
        cls, extra = {**HYBRIDS, **LEFT_PADDING_BREAKS}[family]
        cfg = getattr(transformers, cls)(**{**{k: v for k, v in COMMON.items() if k != "head_dim"}, **extra})
    torch.manual_seed(0)
    model = causal_lm_class(cfg).from_config(cfg, **attention_kwargs(cfg)).eval()  # as load_policy loads it
    unclamp_time_steps(model, log=lambda *a: None)
    return spread_weights(model, 0.3, seed=SPREAD_SEED.get(family, 3)) if spread else model


def _multimodal_config(family: str):
    import transformers

    cls, text, vision, saved_as = MULTIMODAL[family]
    head_dim = {} if family in HYBRIDS else {"head_dim": COMMON["head_dim"]}
    text = {
        **{k: v for k, v in COMMON.items() if k != "head_dim"},
        **head_dim,
        **text,
    }  # vocabulary 40: EOS drawn
    cfg = getattr(transformers, cls)(text_config=text, **({"vision_config": vision} if vision else {}))
    cfg.architectures = [saved_as]  # as a hub checkpoint's config names the class it was saved from
    return cfg


def _sampled(model):
    """(batch, sampler log-probs [B, T]) of 16 prompts of several lengths, one completion each from the
    HF engine (checked equal to `generate`'s), prompts left-padded and completions right-padded."""
    prompts = [[2 + (i * 7 + j) % 37 for j in range(3 + i % 9)] for i in range(16)]
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=12, seed=2)
    ours = [c for g in HFRolloutEngine(model, Tok()).generate(prompts, params) for c in g]
    plain = [
        c for g in HFRolloutEngine(model, Tok(), drop_finished=False).generate(prompts, params) for c in g
    ]
    assert [c.token_ids for c in ours] == [c.token_ids for c in plain]
    assert len({len(c.token_ids) for c in ours}) > 1  # completions of several lengths: padding matters

    p, t = max(map(len, prompts)), max(len(c.token_ids) for c in ours)
    ids = torch.zeros(len(prompts), p + t, dtype=torch.long)
    attn, sampler = torch.zeros_like(ids), torch.zeros(len(prompts), t)
    for i, (prompt, c) in enumerate(zip(prompts, ours)):  # prompts left-padded, completions right-padded
        ids[i, p - len(prompt) : p + len(c.token_ids)] = torch.tensor(prompt + c.token_ids)
        attn[i, p - len(prompt) : p + len(c.token_ids)] = 1
        sampler[i, : len(c.token_ids)] = torch.tensor(c.sampler_logprobs)
    batch = TrainBatch(input_ids=ids, attention_mask=attn, mask=attn[:, p:].bool(), prompt_len=p)
    assert sampler[batch.mask].min() < -1.0  # real distributions, not near-certain tokens
    return batch, sampler
