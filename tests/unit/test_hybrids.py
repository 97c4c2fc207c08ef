"""Hybrids (a convolution, a recurrence or linear attention beside attention, or instead of it): they
sample and train padded and chunked with the same log-probs. Those whose stateful layers
`engines.pack_layers` keeps within each sequence (short convolutions, delta rules, Mamba-2 mixers) pack
too; the others are refused packing, since those layers would run along the whole pack (before, packed
log-probs of LFM2, Qwen3-Next, Jamba, ... were off by 0.85-6.8 nats without an error)."""

from __future__ import annotations

import pytest
import torch
from _architecture_models import FORWARDS, _model, _sampled
from _families import ATTENTION_FREE, DELTA_RULE, HYBRIDS, NO_PACKING, PACK_FAILS, PACKING_HYBRIDS

from reasonrl.config import ConfigError
from reasonrl.engines.packing import check_packing
from reasonrl.models.isolation import check_padding


def _without_pack_layers(model, monkeypatch, rules_only: bool = False) -> None:
    """Take away what `engines.pack_layers` installed for `model`: the bounded convolutions, the delta
    rules run per sequence and the mixers run per sequence (only the delta rules, if `rules_only`); a
    pack's forward does not install them again."""
    import sys

    from reasonrl.engines import pack_layers

    rules = list(pack_layers.RECURRENT.values())
    monkeypatch.setattr(pack_layers, "RECURRENT", {})
    if not rules_only:
        monkeypatch.setattr(pack_layers, "pack_kwargs", lambda *a: {})  # no seq_idx: the fallback's own
        monkeypatch.setattr(pack_layers, "MIXERS", ())
    for m in model.modules():
        forward = type(m).forward
        if getattr(forward, "original", None) is not None and not rules_only:
            monkeypatch.setattr(type(m), "forward", forward.original)
        mod = sys.modules[type(m).__module__]
        for rule in rules:
            if getattr(getattr(mod, rule, None), "original", None) is not None:
                monkeypatch.setattr(mod, rule, getattr(mod, rule).original)


@pytest.mark.parametrize("family", PACKING_HYBRIDS)
def test_hybrids_pack_with_each_sequence_alone_through_their_stateful_layers(family, monkeypatch):
    """LFM2's short convolutions, the Gated DeltaNet / Kimi Delta Attention layers of Qwen3-Next, Qwen3.5,
    Qwen3.5-MoE, OLMo hybrid and Kimi Linear, and the Mamba-2 mixers of Falcon-H1, Bamba, Granite 4,
    Nemotron-H and Zamba2: transformers' PyTorch fallbacks ignore a pack's bounds and carried state from
    one sequence into the next (all refused before, 0.85-6.8 nats off). With each sequence run alone
    through them, every forward keeps the invariant; with that taken away the packed log-probs are off,
    and for the delta-rule layers so they are with only the rule taken away (the convolution kept)."""
    model = _model(family)
    check_padding(model)
    batch, sampler = _sampled(model)
    check_packing(model)
    for name, forward in FORWARDS.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        gap = ((lp - sampler) * batch.mask).abs().max().item()
        assert gap < 1e-4, f"{family} {name}: sampler vs recomputed log-probs differ by {gap:.2e}"
    for rules_only in (True, False) if family in DELTA_RULE else (False,):
        with monkeypatch.context() as patch:
            _without_pack_layers(model, patch, rules_only)
            with torch.no_grad():
                lp, _ = FORWARDS["packed"](model, batch)
        assert ((lp - sampler) * batch.mask).abs().max() > 1e-2, rules_only  # 100x the tolerance


@pytest.mark.parametrize("family", [*(f for f in HYBRIDS if f not in PACKING_HYBRIDS), *NO_PACKING])
def test_hybrids_train_on_the_sampled_logprobs_and_are_refused_packing(family):
    """Also Llama 4 (chunked attention, query scaling by position: packing gave log-probs 11 nats off;
    its chunked log-probs stopped on a shape error: `get_decoder()` returns the causal LM itself)."""
    model = _model(family)
    check_padding(model)  # their left padding is masked
    batch, sampler = _sampled(model)
    with torch.no_grad():
        padded, _ = FORWARDS["padded"](model, batch)
        chunked, _ = FORWARDS["chunked"](model, batch)
    assert ((padded - chunked) * batch.mask).abs().max() < 2e-5
    gap = ((padded - sampler) * batch.mask).abs().max().item()
    # a state carried step by step (sampling) and the same scan over the whole sequence at once (training)
    # round differently: up to 3e-5 in fp32 (Qwen3-Next's gated delta rule)
    assert gap < 1e-4, f"{family}: sampler vs recomputed log-probs differ by {gap:.2e}"
    if (
        family not in ATTENTION_FREE + PACK_FAILS
    ):  # what packing would have trained on: the pack's sequences run together
        with torch.no_grad():
            packed, _ = FORWARDS["packed"](model, batch)
        assert ((packed - padded) * batch.mask).abs().max() > 0.1
    with pytest.raises(ConfigError, match=r"model.pack_tokens: .*set model.pack_tokens=0"):
        check_packing(model)


def test_qwen4_exp_reads_token_ids_past_its_embeddings_and_its_padding_still_does_not_matter():
    """Qwen4-Exp's hashed n-gram embeddings read the preceding token ids, a path the gradient check
    cannot see; transformers gives pad positions the EOS id, so a left-padded row's log-probs are the
    row's alone (pad id 0 is not its EOS id 1: an n-gram reading the pad ids would change them)."""
    model = _model("qwen4_exp")
    ids = torch.tensor([[5, 9, 13, 17, 21]])

    def logprobs(x, attn=None):
        with torch.no_grad():
            return torch.log_softmax(model(input_ids=x, attention_mask=attn, use_cache=False).logits, -1)

    alone = logprobs(ids)
    padded = logprobs(
        torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], 1), torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    )
    assert (padded[:, 3:] - alone).abs().max() < 1e-5


@pytest.mark.parametrize("family", ["jamba", "inkling"])
def test_a_small_leak_is_refused_too_and_none_is_found_where_there_is_none(family):
    """At their default init, hybrids pass a little of a sequence's dependence on to the next one in a
    pack (LFM2's convolution passed 8.5e-5 and Qwen3-Next's layers more, before they packed; Jamba's
    Mamba mixers 1e-3): still refused. Attention families at
    their default init show exactly none."""
    with pytest.raises(ConfigError, match="carries state from one sequence of a pack into the next"):
        check_packing(_model(family, spread=False))
    for clean in ("llama", "gemma2", "gpt_oss", "deepseek_v3"):
        model = _model(clean, spread=False).to(torch.bfloat16)
        check_packing(model)
        check_padding(model)
