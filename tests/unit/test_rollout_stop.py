"""Completions end at the tokenizer's EOS and at every EOS the model's generation config names (chat
models end a turn with a token of their own, e.g. Gemma's <end_of_turn>); without them a completion
ran past the end of its turn. Both HF paths (the decode loop and transformers' `generate`) cut at the
first stop token and call it a stop."""

from __future__ import annotations

import copy

import pytest

from reasonrl.rollout.base import SamplingParams, cut_at_stop, stop_token_ids
from reasonrl.rollout.hf import HFRolloutEngine

TEXTS = ("12+7=", "3*4-2=", "the quick brown fox", "9", "reasoning with", "1+1")


def test_stop_token_ids_and_cut():
    class Model:
        class config:  # noqa: N801
            @staticmethod
            def get_text_config():
                return type("C", (), {"vocab_size": 50})

        generation_config = type("G", (), {"eos_token_id": [3, 7, 3, 10**6]})

    tok = type("T", (), {"eos_token_id": 2})
    assert stop_token_ids(Model, tok) == (2, 3, 7)  # tokenizer's first, no repeats, none outside the vocab
    Model.generation_config.eos_token_id = 7
    assert stop_token_ids(Model, tok) == (2, 7)
    assert cut_at_stop([5, 9, 7, 4, 2], (2, 7)) == ([5, 9, 7], "stop")
    assert cut_at_stop([5, 9, 4], (2, 7)) == ([5, 9, 4], "length")


@pytest.mark.parametrize("drop_finished", [True, False])
def test_engine_stops_at_the_models_own_end_of_turn_token(tiny_model_and_tokenizer, drop_finished):
    model, tok = tiny_model_and_tokenizer
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=20, seed=3)
    before = [
        c
        for g in HFRolloutEngine(model, tok, drop_finished=drop_finished).generate(prompts, params)
        for c in g
    ]
    # a token the model draws often, inside completions: now the model's end of turn
    counts = {}
    for c in before:
        for t in c.token_ids[:-1]:
            counts[t] = counts.get(t, 0) + 1
    turn_end = max((t for t in counts if t != tok.eos_token_id), key=counts.get)
    m = copy.deepcopy(model)
    m.generation_config.eos_token_id = [tok.eos_token_id, turn_end]
    engine = HFRolloutEngine(m, tok, drop_finished=drop_finished)
    assert engine.stop_ids == (tok.eos_token_id, turn_end)
    after = [c for g in engine.generate(prompts, params) for c in g]
    cut = 0
    for b, a in zip(before, after):  # the same draws, each cut at its first stop token
        want, reason = cut_at_stop(b.token_ids, (tok.eos_token_id, turn_end))
        assert a.token_ids == want and a.finish_reason == reason
        # rows leave the batch at other steps: two threads round differently (1.4e-6 seen on an AMD EPYC)
        assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs[: len(want)], abs=1e-5)
        cut += len(want) < len(b.token_ids)
    assert cut >= 5  # the new stop token ended many completions early
