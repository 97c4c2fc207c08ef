"""The HF engine under 2 real gloo ranks (`rollout.hf._sharded`): a model sharded with FSDP2 runs every
forward as a collective, so a rank whose rows all stop early must keep stepping until the other rank's
rows are done (transformers' synced_gpus), or the other rank waits forever for its half of the
weights; a whole model (a rollout worker's) generates alone, with no collective to wait on.

Rank 0's rows stop at their first token (every token is a stop token there); rank 1's run to the
token limit. Each rank's completions must equal one process generating with the whole model."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
from gloo_ranks import run_ranks

from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.hf import HFRolloutEngine

VOCAB, NEW = 48, 8
PROMPTS = {0: [[3, 4, 5], [7, 8]], 1: [[9, 10, 11, 12], [13, 14]]}


class _Tokenizer:  # what the engine reads of a tokenizer
    pad_token_id, eos_token_id, bos_token_id = 0, 1, None

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def _model():
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)  # fmt: skip
    return AutoModelForCausalLM.from_config(cfg).float()


def _generate(model, rank: int, drop_finished: bool = True) -> list[tuple[list[int], str, list[float]]]:
    engine = HFRolloutEngine(model, _Tokenizer(), drop_finished=drop_finished)
    engine.stop_ids = tuple(range(VOCAB)) if rank == 0 else ()  # rank 0 stops at once, rank 1 never
    out = engine.generate(PROMPTS[rank], SamplingParams.greedy(NEW))
    return [(c.token_ids, c.finish_reason, c.sampler_logprobs) for group in out for c in group]


def _rank(r: int, port: int, out):
    # a rank left waiting on a collective fails within 30 s instead of hanging the test
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2,
                                         timeout=timedelta(seconds=30))  # fmt: skip
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import shard_model

        # a whole model, generating on rank 1 only (rank 0 is busy elsewhere, as a trainer beside a
        # rollout worker is): no collective
        whole = _generate(_model(), 1) if r == 1 else None
        sharded = shard_model(_model(), "cpu")
        # both decoding paths: rollout.decode and transformers' generate
        got = (_generate(sharded, r), _generate(sharded, r, drop_finished=False))
        out.put((r, got, whole))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(240)
def test_sharded_generation_keeps_ranks_in_step_and_a_whole_model_generates_alone():
    results = run_ranks(_rank, 2, timeout=120)
    model = _model()
    want = {r: _generate(model, r) for r in (0, 1)}
    assert all(len(t) == 1 and why == "stop" for t, why, _ in want[0])  # rank 0 stopped at once
    assert all(len(t) == NEW and why == "length" for t, why, _ in want[1])  # rank 1 ran to the limit
    for r, (decoded, generated), whole in results:
        for got in (decoded, generated, *([whole] if r == 1 else [])):
            assert [(t, why) for t, why, _ in got] == [(t, why) for t, why, _ in want[r]], r
            for (_, _, lp), (_, _, lp_want) in zip(got, want[r]):
                assert lp == pytest.approx(lp_want, abs=1e-5), r
    assert results[0][2] is None and results[1][2] is not None
