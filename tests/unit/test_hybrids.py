"""Hybrids (a convolution, a recurrence or linear attention beside attention, or instead of it): they
sample and train padded and chunked with the same log-probs. Those whose stateful layers
`engines.pack_layers` keeps within each sequence (short convolutions, delta rules, Mamba mixers) pack
too; the others are refused packing, since those layers would run along the whole pack (before, packed
log-probs of LFM2, Qwen3-Next, Jamba, ... were off by 0.85-6.8 nats without an error)."""

from __future__ import annotations

import pytest
import torch
from _architecture_models import FORWARDS, _model, _sampled
from _families import (
    ATTENTION_FREE,
    BOUNDS_HANDED,
    DELTA_RULE,
    HYBRIDS,
    NO_PACKING,
    PACKING_HYBRIDS,
)

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
        monkeypatch.setattr(pack_layers, "SEQUENCE_LAYERS", {})
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
    Qwen3.5-MoE, OLMo hybrid and Kimi Linear, the Mamba-2 mixers of Falcon-H1, Bamba, Granite 4,
    Nemotron-H, Zamba2 and Mamba-2, the Mamba mixers of Jamba, Mamba and Falcon-Mamba, MiniMax's
    lightning attention, ZAYA1's convolved attention projections and Inkling's short convolutions:
    transformers' PyTorch paths ignore a pack's bounds and carried state from one sequence into the next
    (all refused before, 0.85-6.8 nats off). With each sequence run alone through them, every forward keeps
    the invariant; with that taken away the packed log-probs are off (for the delta-rule layers with
    only the rule taken away too, the convolution kept), and a model without attention has nothing left
    that keeps the pack apart: its pack's forward stops."""
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
        with monkeypatch.context() as patch, torch.no_grad():
            _without_pack_layers(model, patch, rules_only)
            if family in ATTENTION_FREE:
                with pytest.raises(NotImplementedError, match="model.pack_tokens"):
                    FORWARDS["packed"](model, batch)
                continue
            lp, _ = FORWARDS["packed"](model, batch)
        assert ((lp - sampler) * batch.mask).abs().max() > 1e-2, rules_only  # 100x the tolerance


@pytest.mark.parametrize("family", [*BOUNDS_HANDED, "minimax", "zaya", "qwen4_exp"])
def test_layers_run_per_sequence_split_the_same_way_when_recomputed(family, monkeypatch):
    """Jamba's, Mamba's and Falcon-Mamba's mixers do not get the pack's keywords from their layers: the
    layer holding each hands them the bounds, which for Mamba and Falcon-Mamba (whose blocks get no
    keywords either) come from the pack's forward and are kept on the layer's input tensor, where a
    checkpointed layer's recompute, after that forward, finds them (MiniMax's lightning attention gets
    them from its layer, with its rotary cos / sin cut per sequence; ZAYA1's convolved q / k / v
    projections from the attention holding them, which gets them from its layer; Qwen4-Exp's n-gram
    layers from their decoder layer). Packed with gradient checkpointing
    equals padded (log-probs, entropy, every gradient); without the bounds kept, Mamba's recompute scans
    along the whole pack and torch's checkpoint stops on the mismatch."""
    import functools

    from reasonrl.engines import pack_layers
    from reasonrl.engines.packing import packed_logprobs
    from reasonrl.engines.single import completion_logprobs

    model = _model(family)
    batch, _ = _sampled(model)
    check_packing(model)
    model.train()

    def run(forward):
        model.zero_grad()
        lp, ent = forward(model, batch, with_entropy=True)
        ((lp * batch.mask).sum() + 0.1 * (ent * batch.mask).sum()).backward()
        grads = {n: q.grad.clone() for n, q in model.named_parameters() if q.grad is not None}
        return (lp * batch.mask).detach(), (ent * batch.mask).detach(), grads

    lp0, ent0, g0 = run(completion_logprobs)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    packed = functools.partial(packed_logprobs, pack_tokens=64)
    lp1, ent1, g1 = run(packed)
    # measured 1.4e-6 to 9.3e-6 on a CPU without AVX-512, up to 2.03e-5 (relative 7.9e-6) on one with it,
    # and 4.39e-5 (relative 1.7e-5, ZAYA1) on an AVX-512 Xeon of 2026-11-28: float32 sums in another order
    torch.testing.assert_close(lp1, lp0, rtol=3e-5, atol=3e-5)
    torch.testing.assert_close(ent1, ent0, rtol=3e-5, atol=3e-5)
    assert len(g1) == len(g0) > 20
    # measured within 1.5e-5 of each gradient's largest entry; on the AVX-512 Xeon up to 1.9e-4 (ZAYA1's
    # qk_norm.temp, a scalar summed over every position; the rest within 7.1e-5)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=0, atol=5e-4 * g0[n].abs().max().item(), msg=n)
    if family == "mamba":
        monkeypatch.setattr(pack_layers, "_keep", lambda hidden, cu: cu)  # bounds used, not kept
        with pytest.raises(torch.utils.checkpoint.CheckpointError, match="different number of tensors"):
            run(packed)


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
    with torch.no_grad():  # what packing would have trained on: the pack's sequences run together
        packed, _ = FORWARDS["packed"](model, batch)
    assert ((packed - padded) * batch.mask).abs().max() > 0.1
    with pytest.raises(ConfigError, match=r"model.pack_tokens: .*set model.pack_tokens=0"):
        check_packing(model)


def test_qwen4_exp_packs_its_n_grams_and_sparse_keys_per_sequence(monkeypatch):
    """Qwen4-Exp's hashed n-gram embeddings read the preceding token ids (a path the gradient check
    cannot see) and feed a dilated convolution; its indexer picks each query's keys from blocks of the
    keys its mask shows it. transformers gives pad positions the EOS id, so a left-padded row's
    log-probs are the row's alone (pad id 0 is not its EOS id 1: an n-gram reading the pad ids would
    change them). In a pack the n-gram layers run per sequence (`SEQUENCE_LAYERS`) and the indexer and
    attention run under the pack's block mask (before: refused, its indexer stopped on a missing mask).
    With the n-gram layers along the whole pack the check refuses (their convolution leaks); with the
    attention run per sequence without the indexer's mask, the packed log-probs are 2.4 nats off."""
    from reasonrl.engines import pack_layers, packing

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
    batch, sampler = _sampled(model)
    assert batch.input_ids.shape[1] > 2 * 4  # past the indexer's budget of 4 keys: its choice matters
    check_packing(model)
    with monkeypatch.context() as patch, torch.no_grad():
        patch.setattr(packing, "_under_block_mask", lambda *a: False)
        lp, _ = FORWARDS["packed"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() > 0.5
    with monkeypatch.context() as patch:
        patch.setattr(
            pack_layers,
            "SEQUENCE_LAYERS",
            {k: v for k, v in pack_layers.SEQUENCE_LAYERS.items() if k != "PLELayer"},
        )
        fresh = _model("qwen4_exp")
        ple = next(type(m) for m in fresh.modules() if type(m).__name__.endswith("PLELayer"))
        patch.setattr(ple, "forward", ple.forward.original)  # (wrapped once per class)
        with pytest.raises(ConfigError, match="carries state from one sequence of a pack into the next"):
            check_packing(fresh)


def test_glm5_next_packs_its_indexer_and_linear_attention_per_sequence(monkeypatch):
    """GLM-5-Next (loaded as its image-text-to-text class): Kimi Delta Attention layers, and an indexer that
    pools keys along its whole input and works out causality from positions, whose picks the attention
    turns into its own mask. In a pack the delta rule and the indexer run per sequence, the picks shifted
    to the pack's keys, and the attention runs under the mask built from them (before: refused, once as
    computing another forward, for logits at pad positions that are never read). With the picks left
    unshifted, or the indexer run along the whole pack, the packing check refuses."""
    from _architecture_models import _model as build

    from reasonrl.engines import pack_layers

    model = build("glm5_next")
    batch, sampler = _sampled(model)
    check_packing(model)
    with torch.no_grad():
        lp, _ = FORWARDS["packed"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() < 2e-5  # measured 8.1e-6
    indexer = next(type(m) for m in model.modules() if type(m).__name__.endswith("TextIndexer"))
    original = indexer.forward.original
    for wrong in (pack_layers._mixer_per_sequence(original, 1, False), original):  # unshifted; along the pack
        with monkeypatch.context() as patch:
            patch.setattr(indexer, "forward", wrong)
            patch.setattr(pack_layers, "INDEXERS", {})  # (the pack's set-up would wrap it again)
            with pytest.raises(ConfigError, match="carries state from one sequence of a pack into the next"):
                check_packing(model)


def test_a_small_leak_is_refused_too_and_none_is_found_where_there_is_none(monkeypatch):
    """At their default init, hybrids pass a little of a sequence's dependence on to the next one in a
    pack where their stateful layers run along it (LFM2's convolution passed 8.5e-5, Jamba's Mamba mixers
    1e-3, Inkling's convolutions 6.5e-3, MiniMax's lightning attention 0.049 and Qwen3-Next's layers
    more, before they packed): Jamba with its mixers left running along the pack is still refused.
    Attention families at their default init show exactly none."""
    jamba = _model("jamba", spread=False)
    with monkeypatch.context() as patch:
        _without_pack_layers(jamba, patch)
        with pytest.raises(ConfigError, match="carries state from one sequence of a pack into the next"):
            check_packing(jamba)
    for clean in ("llama", "gemma2", "gpt_oss", "deepseek_v3"):
        model = _model(clean, spread=False).to(torch.bfloat16)
        check_packing(model)
        check_padding(model)


def test_compiled_layers_still_hand_their_mixers_a_packs_bounds():
    """ZAYA1's convolved q / k / v projections get a pack's bounds from the attention holding them. With
    the decoder layers compiled (traced by dynamo; its eager backend keeps this test fast), that attention
    runs inside the traced graph and the handing, Python state, must still run there (in a graph break):
    before, it was skipped under compile and the packed log-probs were 5.9 nats off."""
    from torch._dynamo.utils import counters

    from reasonrl.engines.fsdp2 import decoder_layers

    model = _model("zaya")
    batch, sampler = _sampled(model)
    check_packing(model)
    torch._dynamo.reset()
    counters.clear()
    for layer in decoder_layers(model):
        layer.compile(backend="eager", dynamic=True)
    with torch.no_grad():
        lp, _ = FORWARDS["packed"](model, batch)
    assert counters["stats"]["unique_graphs"] >= 2  # the layers ran traced code
    assert ((lp - sampler) * batch.mask).abs().max() < 1e-4


def test_inklings_relative_position_bias_is_cut_per_sequence_and_log_scaling_is_refused(monkeypatch):
    """Inkling adds a [1, H, P, P] relative-position bias to its attention scores; segment attention cuts
    each sequence's block of it (dropped, the packed log-probs are more than 0.1 off). Its optional
    logit scaling by position (`log_scaling_n_floor`) follows the position in the whole input, which a
    pack would apply across its sequences: refused, as Llama 4's query scaling."""
    from reasonrl.engines import packing

    model = _model("inkling")
    batch, sampler = _sampled(model)
    check_packing(model)
    real = packing.explicit_attention
    monkeypatch.setattr(packing, "explicit_attention", lambda *args: real(*args[:8]))  # no bias
    with torch.no_grad():
        lp, _ = FORWARDS["packed"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() > 0.1
    monkeypatch.setattr(model.config, "log_scaling_n_floor", 4)
    with pytest.raises(ConfigError, match=r"attends by position in the whole input \(log_scaling_n_floor"):
        check_packing(model)
