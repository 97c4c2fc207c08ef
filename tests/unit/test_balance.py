"""Balancing a step's rows across ranks by tokens (trainer/balance.py): the greedy split, the re-layout of
every rank's rows into one batch, trimming unused padding, and 2 real gloo FSDP2 ranks whose
mini-batches are re-split by tokens training exactly like one process (loss, gradient norm, parameters;
rel 1e-5) while the ranks' token counts come out even. Micro-batches by tokens (`train.micro_tokens`):
the split, one process and 2 ranks with different micro-batch counts training like row micro-batches."""

from __future__ import annotations

import itertools

import pytest
import torch
from _tolerance import adam_close
from gloo_ranks import run_ranks

from reasonrl import distributed as dist
from reasonrl.config import AlgoConfig
from reasonrl.engines.single import SingleDeviceEngine, completion_logprobs
from reasonrl.trainer.balance import balanced_minibatches, balanced_parts, concat_batches, gather_batch, repad
from reasonrl.trainer.batching import minibatches
from reasonrl.trainer.step import make_loss_fn
from reasonrl.types import TrainBatch

PAD = 0


def test_balanced_parts_equal_sizes_and_near_equal_tokens():
    tokens = [100, 90, 60, 50, 10, 5, 45, 40]
    parts = balanced_parts(tokens, 2)
    assert sorted(i for p in parts for i in p) == list(range(8))  # every row exactly once
    assert [len(p) for p in parts] == [4, 4]
    sums = [sum(tokens[i] for i in p) for p in parts]
    assert sums == [200, 200]  # the contiguous split would be [300, 100]
    for p in parts:  # longest first within a part
        assert [tokens[i] for i in p] == sorted((tokens[i] for i in p), reverse=True)
    # against the best equal-size split found by brute force: within the longest row
    best = min(abs(2 * sum(tokens[i] for i in c) - sum(tokens)) for c in itertools.combinations(range(8), 4))
    assert abs(sums[0] - sums[1]) - best <= max(tokens)
    assert balanced_parts([3, 3, 3], 1) == [[0, 1, 2]]
    # one long row: the short ones would all go to the other part, but each part holds half the rows
    assert balanced_parts([100, 1, 1, 1], 2) == [[0, 3], [1, 2]]
    with pytest.raises(ValueError, match="7 rows cannot be split into 2"):
        balanced_parts([1] * 7, 2)


def _batch(rows: list[tuple[int, int]], seed: int = 0) -> TrainBatch:
    """Rows of (prompt tokens, completion tokens), laid out like trainer.batching.build_batch."""
    g = torch.Generator().manual_seed(seed)
    P, T = max(p for p, _ in rows), max(1, max(c for _, c in rows))
    B = len(rows)
    ids = torch.full((B, P + T), PAD, dtype=torch.long)
    attn = torch.zeros(B, P + T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for i, (p, c) in enumerate(rows):
        ids[i, P - p : P + c] = torch.randint(1, 48, (p + c,), generator=g)
        attn[i, P - p : P + c] = 1
        mask[i, :c] = True
    adv = torch.randn(B, T, generator=g) * mask
    return TrainBatch(input_ids=ids, attention_mask=attn, mask=mask, prompt_len=P, advantages=adv,
                      rewards=torch.randn(B, generator=g), group_ids=torch.arange(B) // 2,
                      sampler_logprobs=-torch.rand(B, T, generator=g) * mask)  # fmt: skip


def test_repad_and_concat_keep_every_row_and_token():
    a, b = _batch([(2, 3), (3, 1)], 1), _batch([(4, 5), (1, 2)], 2)
    both = concat_batches([a, b], PAD)
    assert both.prompt_len == 4 and both.mask.shape == (4, 5) and both.input_ids.shape == (4, 9)
    assert both.group_ids.tolist() == [0, 0, 1, 1]  # rank b's group 0 is not rank a's group 0
    for src, rows in ((a, [0, 1]), (b, [2, 3])):
        for i, j in enumerate(rows):  # the same real tokens, the same completion values
            assert torch.equal(
                src.input_ids[i][src.attention_mask[i].bool()],
                both.input_ids[j][both.attention_mask[j].bool()],
            )
            n = int(src.mask[i].sum())
            assert torch.equal(both.advantages[j, :n], src.advantages[i, :n]) and not both.mask[j, n:].any()
            assert torch.equal(both.sampler_logprobs[j, :n], src.sampler_logprobs[i, :n])
    assert int(both.attention_mask.sum()) == int(a.attention_mask.sum() + b.attention_mask.sum())
    with pytest.raises(ValueError, match="cannot repad"):
        repad(b, 2, 5, PAD)
    c = _batch([(1, 1)])
    c.old_logprobs = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="'old_logprobs' is set on some"):
        concat_batches([a, c], PAD)
    d = _batch([(1, 1)])
    d.extras = {"plugin": torch.zeros(1)}
    with pytest.raises(ValueError, match="batches with plugin extras cannot be balanced across ranks"):
        concat_batches([a, d], PAD)
    assert gather_batch(a, PAD) is a  # one process: the batch itself


def test_repad_fills_new_token_positions_with_the_pad_id_and_everything_else_with_zero():
    b = _batch([(2, 3), (1, 1)])
    wide = repad(b, 4, 5, pad_id=7)  # 2 prompt columns on the left, 2 completion columns on the right
    assert wide.prompt_len == 4 and wide.input_ids.shape == (2, 9) and wide.mask.shape == (2, 5)
    new = torch.tensor([True, True, False, False, False, False, False, True, True])
    assert (wide.input_ids[:, new] == 7).all() and torch.equal(wide.input_ids[:, ~new], b.input_ids)
    assert not wide.attention_mask[:, new].any() and torch.equal(
        wide.attention_mask[:, ~new], b.attention_mask
    )
    assert not wide.mask[:, 3:].any() and wide.mask.dtype == torch.bool
    assert not wide.advantages[:, 3:].any() and torch.equal(wide.advantages[:, :3], b.advantages)


def test_trimmed_batch_gives_the_same_logprobs():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1)).eval()  # fmt: skip
    wide = repad(_batch([(2, 3), (3, 2)]), 6, 8, PAD)  # 3 prompt and 5 completion columns nobody uses
    narrow = wide.trimmed()
    assert narrow.prompt_len == 3 and narrow.mask.shape == (2, 3) and narrow.input_ids.shape == (2, 6)
    with torch.no_grad():
        lw, _ = completion_logprobs(model, wide)
        ln, _ = completion_logprobs(model, narrow)
    assert torch.allclose(lw[:, :3][wide.mask[:, :3]], ln[narrow.mask], atol=1e-5)
    assert narrow.trimmed() is narrow


DIAGNOSTICS = ("actor/entropy", "rollout/logprob_gap_mean")  # token means over the update's tokens


def _assert_trained_alike(
    metrics, want_metrics, params, want_params, keys=("loss/policy", "grad_norm", *DIAGNOSTICS)
) -> None:
    """Same losses, gradient norms and token-mean diagnostics (rel 1e-5) step by step, however the rows
    are split into micro-batches or over ranks; same parameters (Adam's tolerance)."""
    assert len(metrics) == len(want_metrics)
    for got, want in zip(metrics, want_metrics):
        for k in keys:
            assert got[k] == pytest.approx(want[k], rel=1e-5, abs=1e-6), k
    adam_close(params, want_params)


def test_one_process_length_ordered_trimmed_micro_batches_train_like_padded_ones():
    """model.remove_padding on one process: the same shuffled mini-batches, each longest first and cut
    per micro-batch, give the padded run's losses, gradient norms and parameters."""
    rows = [(3, 9), (2, 1), (3, 8), (2, 2), (1, 1), (3, 9), (2, 7), (1, 2)]
    results = []
    for remove_padding in (False, True):
        model = _model()
        engine = SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5)
        engine.trim_padding = remove_padding
        metrics, widths = [], []
        for step in range(2):
            whole, gen = _batch(rows, seed=step), torch.Generator().manual_seed(step)
            minis = balanced_minibatches(whole, 4, gen) if remove_padding else minibatches(whole, 4, gen)
            widths += [m.select(slice(2, 4)).trimmed().input_ids.shape[1] for m in minis]
            metrics += _updates(engine, minis)
        results.append((metrics, widths, model.state_dict()))
    (padded, w_padded, p_padded), (trimmed, w_trimmed, p_trimmed) = results
    assert sum(w_trimmed) < sum(w_padded)  # the short rows' micro-batches really are narrower
    _assert_trained_alike(trimmed, padded, p_trimmed, p_padded)


# --------------------------------------------------------------------------------- two gloo ranks

STEPS, MINI = 2, 4
# rank 0 holds the long completions, rank 1 the short ones: the unbalanced split is 4x uneven
RANK_ROWS = [[(3, 9), (2, 8), (3, 9), (2, 7)], [(3, 1), (2, 2), (3, 1), (2, 1)]]


def _model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=32, tie_word_embeddings=True)  # fmt: skip
    return Qwen2ForCausalLM(cfg).float()


def _step_batch(step: int, rank: int) -> TrainBatch:
    return _batch(RANK_ROWS[rank], seed=10 * step + rank)


def _updates(engine, minis: list[TrainBatch], micro: int = 1) -> list[dict]:
    algo = AlgoConfig(loss_agg="token_mean")
    out = []
    for mini in minis:
        counts = dist.global_normalisers(mini.mask)
        loss_fn = make_loss_fn(algo, counts["total_tokens"], counts["total_seqs"], 9)
        m = engine.train_step(mini, loss_fn, micro)
        out.append(dist.reduce_metrics({k: float(v) for k, v in m.items()}))
    return out


def _balanced_rank(r: int, port: int, out, micro_tokens: int = 0):
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine

        model = _model()
        engine = FSDP2Engine(model, lr=1e-2, grad_clip=0.5)
        engine.trim_padding, engine.micro_tokens = True, micro_tokens
        metrics, tokens = [], []
        for step in range(STEPS):
            whole = gather_batch(_step_batch(step, r), PAD)
            minis = balanced_minibatches(whole, MINI, torch.Generator().manual_seed(step))
            if micro_tokens:  # this rank's own micro-batches (fillers left out)
                tokens.append([sum(x is not None for x in engine.micro_rows(m, MINI)) for m in minis])
            else:
                tokens.append([int(m.attention_mask.sum()) for m in minis])
            metrics += _updates(engine, minis, MINI if micro_tokens else 1)
        from torch.distributed.tensor import DTensor

        full = {n: (t.full_tensor() if isinstance(t, DTensor) else t).detach().numpy()
                for n, t in model.state_dict().items()}  # fmt: skip
        out.put((r, metrics, tokens, full))
    finally:
        torch.distributed.destroy_process_group()


def test_micro_rows_by_tokens():
    engine = SingleDeviceEngine(_model(), lr=1e-3)
    batch = _batch([(2, 10), (2, 8), (3, 6), (1, 2), (2, 1), (1, 1), (1, 1), (1, 0)])  # 12 10 9 3 3 2 2 1
    assert engine.micro_rows(batch, 3) == [slice(0, 3), slice(3, 6), slice(6, 8)]  # rows only
    engine.micro_tokens = 12
    assert engine.micro_rows(batch, 3) == [slice(0, 1), slice(1, 2), slice(2, 4), slice(4, 7), slice(7, 8)]
    engine.micro_tokens = 9  # a row over the budget runs alone; the rest fill up to it, in order
    assert engine.micro_rows(batch, 8) == [slice(0, 1), slice(1, 2), slice(2, 3), slice(3, 6), slice(6, 8)]


def test_one_process_micro_batches_by_tokens_train_like_row_micro_batches():
    rows = [(3, 9), (2, 1), (3, 8), (2, 2), (1, 1), (3, 9), (2, 7), (1, 2)]
    results = []
    for micro_tokens in (0, 14):
        model = _model()
        engine = SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5)
        engine.trim_padding, engine.micro_tokens = True, micro_tokens
        seen = []

        def counted(m, b, seen=seen, forward=engine.forward, **kw):
            seen.append(int(b.attention_mask.sum()))
            return forward(m, b, **kw)

        engine.forward = counted
        metrics = []
        for step in range(2):
            minis = balanced_minibatches(_batch(rows, seed=step), 4, torch.Generator().manual_seed(step))
            metrics += _updates(engine, minis, micro=4)
        results.append((metrics, seen, model.state_dict()))
    (rows_m, rows_seen, rows_p), (tok_m, tok_seen, tok_p) = results
    assert len(rows_seen) == 4 and len(tok_seen) > 4  # one micro-batch per mini-batch, or more by tokens
    assert max(tok_seen) <= 14 < max(rows_seen)
    _assert_trained_alike(tok_m, rows_m, tok_p, rows_p)


@pytest.mark.timeout(180)
def test_two_ranks_with_micro_batches_by_tokens_train_like_one_process():
    """Ranks whose balanced parts fill different numbers of 15-token micro-batches (fillers keep their
    collectives in lock-step) train like one process with row micro-batches."""
    results = run_ranks(_balanced_rank, 2, 15)
    torch.set_num_threads(1)
    model = _model()
    engine = SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5)
    single = []
    for step in range(STEPS):
        whole = concat_batches([_step_batch(step, 0), _step_batch(step, 1)], PAD)
        single += _updates(engine, minibatches(whole, MINI, torch.Generator().manual_seed(step)))
    (_, m0, counts0, full), (_, m1, counts1, _) = results
    pairs = list(zip(itertools.chain(*counts0), itertools.chain(*counts1)))
    assert any(a > b for a, b in pairs) and any(a < b for a, b in pairs)  # each rank sometimes runs fillers
    for got in (m0, m1):
        _assert_trained_alike(got, single, full, model.state_dict())


@pytest.mark.timeout(180)
def test_two_ranks_balanced_by_tokens_train_like_one_process():
    results = run_ranks(_balanced_rank, 2)
    torch.set_num_threads(1)
    model = _model()
    engine = SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5)
    single = []
    for step in range(STEPS):  # one process: both ranks' rows, the same shuffled mini-batches
        whole = concat_batches([_step_batch(step, 0), _step_batch(step, 1)], PAD)
        single += _updates(engine, minibatches(whole, MINI, torch.Generator().manual_seed(step)))
    (_, m0, tok0, full), (_, m1, tok1, _) = results
    assert len(single) == STEPS * 2
    for got in (m0, m1):
        _assert_trained_alike(got, single, full, model.state_dict(), keys=("loss/policy", "grad_norm", "lr"))
    # every mini-batch's tokens are split evenly (within the longest row); unbalanced it would be 4x
    for a, b in zip(itertools.chain(*tok0), itertools.chain(*tok1)):
        assert abs(a - b) <= 12, (a, b)
    assert not torch.equal(
        model.model.layers[0].mlp.up_proj.weight, _model().model.layers[0].mlp.up_proj.weight
    )
