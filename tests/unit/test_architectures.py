"""The RL invariant across the architectures users train: the log-prob the HF engine records for each
sampled token equals the one every training forward recomputes for it (padded, chunked from hidden
states, packed, packed and chunked), and dropping finished rows samples what `generate` samples.
StableLM's decoder layers drop the pack's bounds on the way to attention: its packs are read off the
position ids. Tiny random models of each family, with weights large enough that what sets a family apart (Gemma's
attention and final soft-caps, gpt-oss's sinks and experts, sliding windows, Cohere's and Granite's
logit scales, experts, DeepSeek's latent attention) changes the numbers.

Hybrids are in `test_hybrids.py`; the models and forwards both use are in `_architecture_models.py`.
Architectures whose left-padded rows depend on their padding are refused outright."""

from __future__ import annotations

import pytest
import torch
from _architecture_models import FORWARDS, _model, _multimodal_config, _sampled
from _families import (
    CLAMPED_TIME_STEPS,
    COMMON,
    FAMILIES,
    FORWARD_GAP,
    HYBRIDS,
    LEFT_PADDING_BREAKS,
    LEGACY_ATTENTION,
    MULTIMODAL,
    NAMED_ATTENTION,
    NO_PACKING,
    PACKING_HYBRIDS,
)
from _spread_weights import spread_weights

from reasonrl.config import ConfigError
from reasonrl.engines.packing import check_packing
from reasonrl.errors import InputError
from reasonrl.models.isolation import check_padding
from reasonrl.models.loading import unclamp_time_steps


@pytest.mark.parametrize("family", [*FAMILIES, *LEGACY_ATTENTION])
def test_sampler_logprobs_equal_every_training_forwards(family):
    model = _model(family)
    check_padding(model)
    batch, sampler = _sampled(model)
    check_packing(model)  # every family packs (a refusal is a ConfigError)
    for name, forward in FORWARDS.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        gap = ((lp - sampler) * batch.mask).abs().max().item()
        assert gap < FORWARD_GAP.get(family, 2e-5), (
            f"{family} {name}: sampler vs recomputed log-probs differ by {gap:.2e}"
        )


@pytest.mark.parametrize("family", list(LEGACY_ATTENTION))
def test_a_model_with_attention_of_its_own_packs_with_a_block_mask(family, monkeypatch):
    """BLOOM, CodeGen, GPT-J, GPT-Neo, MPT and XGLM attend in code of their own, which segment attention
    cannot reach: their packs run their own attention with transformers' mask made causal within each
    sequence, and keep the invariant in every forward. Without that mask, packed log-probs are off."""
    from transformers import masking_utils

    from reasonrl.engines.packing import PACK_MASK

    model = _model(family)
    batch, sampler = _sampled(model)
    check_packing(model)
    assert getattr(model.config, PACK_MASK) is True
    for name, forward in FORWARDS.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        assert ((lp - sampler) * batch.mask).abs().max() < 2e-5, name
    # with transformers' plain causal mask over the whole pack instead, sequences attend to each other
    monkeypatch.setattr(
        masking_utils, "packed_sequence_mask_function", lambda segments: lambda b, h, q, k: q >= 0
    )
    with torch.no_grad():
        lp, _ = FORWARDS["packed"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() > 0.1


@pytest.mark.parametrize("family", list(LEGACY_ATTENTION))
def test_packs_of_models_with_attention_of_their_own_equal_their_padded_forward_in_bf16(family):
    """In 16 bits too, as each sequence alone: BLOOM's ALiBi, built from the mask, counted positions
    along the pack, and its larger biases rounded coarser (0.07 off its padded forward)."""
    model = _model(family)
    batch, _ = _sampled(model)
    model = model.to(torch.bfloat16)
    check_packing(model)
    with torch.no_grad():
        padded, _ = FORWARDS["padded"](model, batch)
        packed, _ = FORWARDS["packed"](model, batch)
    assert ((packed - padded) * batch.mask).abs().max() == 0


@pytest.mark.parametrize("family", CLAMPED_TIME_STEPS)
def test_mamba2_mixers_that_clamp_dt_outside_decoding_only_are_unclamped(
    family, tiny_model_and_tokenizer, tmp_path
):
    """transformers' Nemotron-H and Zamba2 clamp dt at time_step_min (1e-3) in the chunked scan that
    prefills and trains, not in the step that decodes: sampled log-probs came from another model than the
    trained ones. Unclamped (as `load_policy` leaves them), the two agree."""
    import transformers

    from reasonrl.models.loading import load_policy

    model = _model(family)
    batch, sampler = _sampled(model)
    for m in model.modules():  # as transformers builds them
        if hasattr(m, "time_step_limit"):
            m.time_step_limit = (m.config.time_step_min, float("inf"))
    with torch.no_grad():
        clamped, _ = FORWARDS["padded"](model, batch)
    assert ((clamped - sampler) * batch.mask).abs().max() > 1e-3  # what the clamp cost (0.006-0.02 here)
    assert unclamp_time_steps(model, log=lambda *a: None) > 0
    with torch.no_grad():
        unclamped, _ = FORWARDS["padded"](model, batch)
    assert ((unclamped - sampler) * batch.mask).abs().max() < 1e-4
    cls, extra = HYBRIDS[family]
    _, tok = tiny_model_and_tokenizer
    settings = {**{k: v for k, v in COMMON.items() if k != "head_dim"}, **extra, "vocab_size": len(tok)}
    transformers.AutoModelForCausalLM.from_config(getattr(transformers, cls)(**settings)).save_pretrained(
        tmp_path
    )
    tok.save_pretrained(tmp_path)
    logs = []
    loaded, _ = load_policy(str(tmp_path), device="cpu", log=logs.append)
    limits = {tuple(m.time_step_limit) for m in loaded.modules() if hasattr(m, "time_step_limit")}
    assert limits == {(0.0, float("inf"))} and any("Mamba-2 mixers clamped dt" in line for line in logs)


@pytest.mark.parametrize("family", list(NAMED_ATTENTION))
def test_sparse_attention_packs_over_the_keys_its_indexer_picks(family, monkeypatch):
    """DeepSeek-V3.2, GLM-5, A.X K2 and Hunyuan V4 turn their indexer's top-k keys into a mask under
    "eager" / "sdpa" only, and pass them on as `indices` under any other name: segment attention reads
    them (before: refused packing, the keys unread turned their attention dense, 7.6 nats off). In a
    pack the indexer and the attention get the block mask, causal within each sequence. Every forward
    keeps the invariant, gradients with checkpointing too; with the picked keys unread, the packing
    check refuses and a pack's log-probs are far off."""
    import functools

    from reasonrl.engines import packing
    from reasonrl.engines.packing import PACK_MASK, SEGMENT_ATTENTION

    model = _model(family)
    check_padding(model)
    batch, sampler = _sampled(model)
    assert batch.input_ids.shape[1] > 2 * 4  # longer than the 4 keys each query picks: the choice matters
    check_packing(model)
    assert model.config._attn_implementation == SEGMENT_ATTENTION and getattr(model.config, PACK_MASK) is True
    for name, forward in FORWARDS.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        assert ((lp - sampler) * batch.mask).abs().max() < 2e-5, name  # measured 2.1e-6 to 4.1e-6
    again, resampled = _sampled(model)  # generation (with its cache) under segment attention: the same
    assert torch.equal(again.input_ids, batch.input_ids)
    torch.testing.assert_close(resampled, sampler, rtol=0, atol=1e-5)
    model.train()

    def run(forward):
        model.zero_grad()
        lp, _ = forward(model, batch)
        (lp * batch.mask).sum().backward()
        return (lp * batch.mask).detach(), {
            n: q.grad.clone() for n, q in model.named_parameters() if q.grad is not None
        }

    lp0, g0 = run(FORWARDS["padded"])
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lp1, g1 = run(functools.partial(packing.packed_logprobs, pack_tokens=64))
    torch.testing.assert_close(lp1, lp0, rtol=0, atol=2e-5)
    assert len(g1) == len(g0) > 20
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], rtol=0, atol=1e-4 * g0[n].abs().max().item(), msg=n)
    model.eval()
    monkeypatch.setattr(
        packing, "selected_keys", lambda mask, *rest: mask
    )  # every key, as under a kernel's name
    with torch.no_grad():
        lp, _ = FORWARDS["packed"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() > 1e-2
    fresh = _model(family)
    implementation = fresh.config._attn_implementation  # (Hunyuan V4 loads with eager attention)
    with pytest.raises(
        ConfigError, match=r"model.pack_tokens: .* computes another forward under segment attention"
    ):
        check_packing(fresh)
    assert fresh.config._attn_implementation == implementation  # left as it was


def test_compressed_attention_is_refused_by_its_config():
    """DeepSeek-V4 compresses keys and values in blocks counted from the input's start (past a 128-token
    window in the real model, so no short probe sees it): left padding moves its blocks, and so would a
    pack. Refused at load and for packing, by its layer types."""
    model = _model("deepseek_v4")
    batch, sampler = _sampled(model)
    with torch.no_grad():  # what it would get wrong (the engine's and the trainer's padding differ)
        lp, _ = FORWARDS["padded"](model, batch)
    assert ((lp - sampler) * batch.mask).abs().max() > 0.1
    with pytest.raises(
        InputError, match="compressed_sparse_attention, heavily_compressed_attention layers compress"
    ):
        check_padding(model)
    with pytest.raises(ConfigError, match=r"model.pack_tokens: .*compressed_sparse_attention"):
        check_packing(model)


def test_a_non_finite_backward_under_left_padding_is_named_not_taken_for_a_leak():
    """Gemma 3n whose pad embedding is zero (as `padding_idx` initialises it): its pad positions' hidden
    states are exactly 0, and `mean(h ** 2) ** 0.5` has a NaN gradient there, which reaches the
    parameters (all 49 gradients NaN for one left-padded row, fp32 and bf16). Before, the check turned
    the NaNs into zeros: it passed in fp32 and refused bf16 as depending on its padding (dependence
    inf). Padded with a token whose embedding is not zero, it passes."""
    model = _model("gemma3n", spread=False)
    assert model.get_input_embeddings().weight[0].abs().max() == 0
    for dtype in (torch.float32, torch.bfloat16):
        with pytest.raises(
            InputError, match=r"'gemma3n_text': the backward of a row left-padded with pad id 0 is not"
        ):
            check_padding(model.to(dtype), pad_id=0)
        check_padding(model, pad_id=1)


def test_loading_a_model_whose_pad_token_gives_nan_gradients_pads_with_its_eos_token(
    tiny_model_and_tokenizer, tmp_path
):
    """`load_policy` falls back to the EOS token as pad where the tokenizer's own pad token gives NaN
    gradients (Gemma 3n, pad embedding zero), and says so; it refused the model before."""
    import transformers

    from reasonrl.models.loading import load_policy

    _, tok = tiny_model_and_tokenizer
    assert (tok.pad_token_id, tok.eos_token_id) == (0, 1)
    cls, extra = FAMILIES["gemma3n"]
    settings = {**COMMON, **extra, "vocab_size": len(tok), "vocab_size_per_layer_input": len(tok)}
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(getattr(transformers, cls)(**settings)).save_pretrained(
        tmp_path
    )
    tok.save_pretrained(tmp_path)
    logs = []
    model, loaded = load_policy(str(tmp_path), device="cpu", log=logs.append)
    assert model.get_input_embeddings().weight[0].abs().max() == 0  # the pad embedding, zero as saved
    assert loaded.pad_token_id == 1 and model.generation_config.pad_token_id == 1
    assert any("padding with the EOS token '<|endoftext|>' instead" in line for line in logs)


@pytest.mark.parametrize("family", ["llama", "rwkv", "recurrent_gemma"])
def test_without_input_embeddings_left_padding_is_checked_by_the_outputs(family):
    """A model with no input embedding layer to take the gradient against has a left-padded row's logits
    compared with the row's alone: RWKV and RecurrentGemma are refused all the same, Llama passes."""
    model = _model(family)

    def no_embeddings():
        raise NotImplementedError

    model.get_input_embeddings = no_embeddings
    logs = []
    if family in LEFT_PADDING_BREAKS:
        with pytest.raises(InputError, match=r"left-padded row's logits differ from the row's alone by"):
            check_padding(model, log=logs.append)
    else:
        check_padding(model, log=logs.append)
        assert logs and "left padding checked by its outputs" in logs[0]


def test_a_path_that_reads_the_pad_ids_is_refused_by_the_outputs():
    """A model whose logits read the preceding token's id (as hashed n-gram embeddings do) past its
    embedding layer: no gradient reaches the embeddings from there, so only the comparison of a padded
    row with the row alone shows that the pad ids change its log-probs."""
    import transformers

    from reasonrl.models.isolation import dependence

    class ReadsIds(transformers.LlamaForCausalLM):
        def forward(self, input_ids=None, **kwargs):
            out = super().forward(input_ids=input_ids, **kwargs)
            previous = torch.cat([torch.full_like(input_ids[:, :1], 2), input_ids[:, :-1]], dim=1)
            out.logits = out.logits + self.by_previous_id(previous)  # a table of its own: no embeddings
            return out

    cls, extra = FAMILIES["llama"]
    torch.manual_seed(0)
    model = ReadsIds(getattr(transformers, cls)(**{**COMMON, **extra})).eval()
    model.by_previous_id = torch.nn.Embedding(COMMON["vocab_size"], COMMON["vocab_size"])
    ids, attn = torch.tensor([[0, 0, 0, 5, 6, 7, 8, 9]]), torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    inputs = dict(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp_min(0))
    assert dependence(model, inputs, src=[(0, j) for j in range(3)], dst=[(0, j) for j in range(3, 8)]) == 0
    with pytest.raises(InputError, match=r"cannot see, e.g. one that reads the pad token ids"):
        check_padding(model)
    check_padding(transformers.LlamaForCausalLM(model.config).eval())  # the same without the table passes


@pytest.mark.parametrize("family", list(LEFT_PADDING_BREAKS))
def test_a_model_that_left_padding_changes_is_refused(family):
    model = _model(family)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():  # what it would get wrong: a padded row's log-probs move with its padding
        alone = torch.log_softmax(
            model(input_ids=ids, use_cache=False).logits, -1
        )  # (xLSTM's cache breaks a forward)
        padded = torch.log_softmax(model(input_ids=torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], 1), use_cache=False,
                                         attention_mask=torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])).logits, -1)  # fmt: skip
    assert (alone - padded[:, 3:]).abs().max() > 0.5
    with pytest.raises(
        InputError, match=rf"model '{family}': a left-padded row's outputs depend on its padding"
    ):
        check_padding(model)


def test_loading_such_a_model_fails_before_any_work(tiny_model_and_tokenizer, tmp_path):
    import transformers

    from reasonrl.models.loading import load_policy

    _, tok = tiny_model_and_tokenizer
    cls, extra = LEFT_PADDING_BREAKS["rwkv"]
    settings = {**{k: v for k, v in COMMON.items() if k != "head_dim"}, **extra, "vocab_size": len(tok)}
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(getattr(transformers, cls)(**settings)).save_pretrained(
        tmp_path
    )
    tok.save_pretrained(tmp_path)
    with pytest.raises(InputError, match="model 'rwkv': a left-padded row's outputs depend on its padding"):
        load_policy(str(tmp_path), device="cpu", log=lambda *a: None)


@pytest.mark.parametrize("family", list(MULTIMODAL))
def test_a_multimodal_checkpoint_loads_as_its_language_model_and_keeps_the_invariant(family, tiny_model_and_tokenizer,
                                                                                     tmp_path):  # fmt: skip
    """Qwen3.5, Gemma 4, Mistral 3, Qwen3-VL and Llama 4 ship as multimodal checkpoints
    (`model.language_model.*`, a vision tower): `load_policy` gives the model saved, with the same logits
    (not freshly initialised weights), as its image-text-to-text class (Mistral 3 and Qwen3-VL have no
    other; Qwen3.5's and Llama 4's causal-LM classes are the language model alone, so their checkpoints
    and exports lost the vision tower before), and it samples and trains with the same log-probs (Llama 4
    attends by position in the whole input: packing refused; Qwen3.5, a hybrid, packs)."""
    import transformers

    from reasonrl.models.loading import load_policy

    _, tok = tiny_model_and_tokenizer
    cls, loaded_as = MULTIMODAL[family][0], MULTIMODAL[family][3]
    torch.manual_seed(0)
    saved = getattr(transformers, cls.replace("Config", "ForConditionalGeneration"))(
        _multimodal_config(family)
    ).eval()
    saved.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, _ = load_policy(str(tmp_path), device="cpu", log=lambda *a: None)
    assert type(model).__name__ == loaded_as
    ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        # (Qwen3-VL-MoE: weights identical, logits 3e-8 apart, its experts summed in another order)
        torch.testing.assert_close(
            model(input_ids=ids).logits, saved(input_ids=ids).logits, rtol=0, atol=1e-6
        )
    model = spread_weights(model.eval(), 0.3)
    batch, sampler = _sampled(model)
    forwards = dict(FORWARDS)
    refused = (family in HYBRIDS and family not in PACKING_HYBRIDS) or family in NO_PACKING
    if refused:
        refusals = "carries state from one sequence|attends by position in the whole"
        with pytest.raises(ConfigError, match=refusals):
            check_packing(model)
        forwards = {k: v for k, v in FORWARDS.items() if "packed" not in k}
    else:
        check_packing(model)
    for name, forward in forwards.items():
        with torch.no_grad():
            lp, _ = forward(model, batch)
        gap = ((lp - sampler) * batch.mask).abs().max().item()
        assert gap < (1e-4 if family in HYBRIDS else 2e-5), (
            f"{family} {name}: sampler vs recomputed: {gap:.2e}"
        )
