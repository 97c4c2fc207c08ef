"""The FSDP2 engine with 2 real gloo ranks on CPU, each holding half of every mini-batch, against one
process holding all of it (scaleout.md E3 T1/T2/T4): three optimizer steps give the same losses and
gradient norms (rtol 1e-5, atol 1e-6) and parameters (`_tolerance.adam_close`: the noise of summing in
another order); the full weights gathered for weight sync equal
the single-process model's, name for name; the consolidated export loads with transformers and
generates the same greedy text."""

from __future__ import annotations

import pytest
import torch
from _tolerance import adam_close
from gloo_ranks import run_ranks

from reasonrl import distributed as dist
from reasonrl.config import AlgoConfig
from reasonrl.engines.single import SingleDeviceEngine
from reasonrl.engines.weights import hf_weight_groups
from reasonrl.trainer.step import make_loss_fn
from reasonrl.types import TrainBatch

STEPS, B, P, T = 3, 6, 4, 5


def _model(family: str = "qwen2"):
    from transformers import AutoModelForCausalLM, Gemma2Config, Qwen2Config

    from reasonrl.models.loading import attention_kwargs

    torch.manual_seed(0)
    shape = dict(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, max_position_embeddings=32, tie_word_embeddings=True)  # fmt: skip
    if family == "gemma2":  # eager attention; caps small enough to bend these small-init scores and logits
        cfg = Gemma2Config(**shape, head_dim=16, sliding_window=4, attn_logit_softcapping=0.05,
                           final_logit_softcapping=0.1)  # fmt: skip
    else:
        cfg = Qwen2Config(**shape)
    return AutoModelForCausalLM.from_config(cfg, **attention_kwargs(cfg)).float()


def _batch(step: int, vocab: int = 48) -> TrainBatch:
    g = torch.Generator().manual_seed(step)
    attn = torch.ones(B, P + T, dtype=torch.long)
    attn[1, :2] = 0  # a left-padded prompt
    mask = torch.rand(B, T, generator=g) > 0.2
    return TrainBatch(input_ids=torch.randint(0, vocab, (B, P + T), generator=g), attention_mask=attn, mask=mask,
                      prompt_len=P, advantages=torch.randn(B, T, generator=g))  # fmt: skip


def _train(engine, rows, vocab: int = 48) -> list[dict]:
    algo = AlgoConfig(loss_agg="token_mean")
    out = []
    for step in range(STEPS):
        batch = _batch(step, vocab).select(rows)
        batch.old_logprobs = engine.logprobs(batch, 2)
        counts = dist.global_normalisers(batch.mask)
        m = engine.train_step(batch, make_loss_fn(algo, counts["total_tokens"], counts["total_seqs"], T), 2)
        out.append(dist.reduce_metrics({k: float(v) for k, v in m.items()}))
    return out


def _full(model) -> dict[str, torch.Tensor]:
    return {n: t.clone() for group in hf_weight_groups(model) for n, t in group}


def _rank(r: int, port: int, out, export_dir):
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine

        model = _model()
        engine = FSDP2Engine(model, lr=1e-2, grad_clip=0.5)
        metrics = _train(engine, slice(0, 3) if r == 0 else slice(3, 6))
        full = _full(model)  # every rank gathers (collectives), in lock-step
        engine.export_hf(export_dir)
        engine.export_hf(export_dir + "_shards", from_shards=True)  # torch's HuggingFaceStorageWriter
        from reasonrl.engines.hf_shards import save_hf_from_shards

        save_hf_from_shards(model, export_dir + "_files", max_file_bytes=16_000)  # several files
        out.put((r, metrics, {n: t.numpy() for n, t in full.items()} if r == 0 else None))  # by value
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(180)
def test_two_rank_fsdp2_steps_equal_one_process(tmp_path):
    results = run_ranks(_rank, 2, str(tmp_path / "export"))
    torch.set_num_threads(1)
    model = _model()
    single = _train(SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5), slice(0, B))
    for _, metrics, _ in results:
        assert len(metrics) == STEPS
        for got, want in zip(metrics, single):
            # the entropy: a token mean over both ranks' tokens (the ranks hold different numbers)
            for k in ("loss/policy", "grad_norm", "lr", "actor/entropy"):
                assert got[k] == pytest.approx(want[k], rel=1e-5, abs=1e-6), k
    want = _full(model)
    got = {n: torch.from_numpy(a) for n, a in results[0][2].items()}
    assert list(got) == list(want)  # the same HF names, in the same order, tied weights once
    adam_close(got, want)
    assert not torch.equal(
        want["model.layers.0.mlp.up_proj.weight"], _model().model.layers[0].mlp.up_proj.weight
    )

    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "export").float().eval()
    prompt = torch.tensor([[1, 5, 7, 9]])
    gen = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(exported.generate(prompt, **gen), model.eval().generate(prompt, **gen))
    # written from the shards: no rank gathered the model, the same tensors, tied weights once
    from_shards = tmp_path / "export_shards"
    assert sorted(p.name for p in from_shards.iterdir()) == [
        "config.json", "generation_config.json", "model-00001-of-00001.safetensors", "model.safetensors.index.json"
    ]  # fmt: skip
    loaded = AutoModelForCausalLM.from_pretrained(from_shards).float().eval()
    for (name, a), b in zip(exported.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
    assert torch.equal(loaded.generate(prompt, **gen), model.eval().generate(prompt, **gen))
    files = sorted((tmp_path / "export_files").glob("*.safetensors"))
    assert len(files) > 3 and files[-1].name == f"model-{len(files):05d}-of-{len(files):05d}.safetensors"
    split = AutoModelForCausalLM.from_pretrained(tmp_path / "export_files").float()
    assert all(torch.equal(a, b) for a, b in zip(exported.state_dict().values(), split.state_dict().values()))


PACK = 16  # rank 0's first micro-batch (9 + 7 tokens) fits one pack; rank 1's (9 + 9) needs two


def _packed_rank(r: int, port: int, out, chunk: int = 0, family: str = "qwen2"):
    import functools

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine
        from reasonrl.engines.packing import packed_logprobs, plan_packs

        model = _model(family)
        rows = slice(0, 3) if r == 0 else slice(3, 6)
        micro = _batch(0).select(rows).select(slice(0, 2))
        lengths = (micro.attention_mask.sum(-1)).tolist()
        engine = FSDP2Engine(
            model,
            lr=1e-2,
            grad_clip=0.5,
            forward=functools.partial(packed_logprobs, pack_tokens=PACK, chunk=chunk),
        )
        metrics = _train(engine, rows)
        out.put((r, len(plan_packs(lengths, PACK)), metrics, {n: t.numpy() for n, t in _full(model).items()}))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("chunk, family", [(0, "qwen2"), (2, "qwen2"), (2, "gemma2")])
def test_two_rank_fsdp2_with_packing_equals_one_padded_process(chunk, family):
    """Packed forwards on FSDP2 ranks with different pack counts (the rank with fewer runs empty ones,
    so both stay in lock-step) give the single padded process's losses and parameters; also with the
    log-probs from the hidden states in chunks (the root's forward gathers the head), and for Gemma 2
    (soft-capped attention run explicitly per sequence, its empty forwards through its own eager
    attention, the final soft-cap applied to the chunks' logits)."""
    results = run_ranks(_packed_rank, 2, chunk, family)
    assert [n for _, n, _, _ in results] == [1, 2]  # the ranks really pack differently
    torch.set_num_threads(1)
    model = _model(family)
    single = _train(SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5), slice(0, B))
    for _, _, metrics, _ in results:
        for got, want in zip(metrics, single):
            for k in ("loss/policy", "grad_norm"):
                assert got[k] == pytest.approx(want[k], rel=1e-4, abs=1e-6), k
    # (Gemma 2's small caps squash many gradients toward zero, where Adam turns rounding into the largest
    # step-size differences of these tests: _tolerance)
    adam_close({n: torch.from_numpy(a) for n, a in results[0][3].items()}, _full(model))


def _chunked_rank(r: int, port: int, out):
    import functools

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine
        from reasonrl.engines.single import completion_logprobs

        model = _model()
        engine = FSDP2Engine(
            model, lr=1e-2, grad_clip=0.5, forward=functools.partial(completion_logprobs, chunk=2)
        )
        metrics = _train(engine, slice(0, 3) if r == 0 else slice(3, 6))
        out.put((r, metrics, {n: t.numpy() for n, t in _full(model).items()}))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(180)
def test_two_rank_fsdp2_with_chunked_logprobs_equals_one_plain_process():
    """Chunked log-probs under FSDP2 (the root forward gathers the head, which the chunks then use)
    give the plain single process's losses and parameters, the tied head / embedding included."""
    results = run_ranks(_chunked_rank, 2)
    torch.set_num_threads(1)
    model = _model()
    single = _train(SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5), slice(0, B))
    for _, metrics, _ in results:
        for got, want in zip(metrics, single):
            for k in ("loss/policy", "grad_norm"):
                assert got[k] == pytest.approx(want[k], rel=1e-4, abs=1e-6), k
    want = _full(model)
    assert "model.embed_tokens.weight" in results[0][2]
    for name, a in results[0][2].items():
        if not name.endswith("k_proj.bias"):  # rounding noise, see the unpacked test
            assert torch.allclose(torch.from_numpy(a), want[name], rtol=1e-4, atol=1e-5), name


def _arch(family: str):
    from _architecture_models import _model as architecture

    return architecture(family, spread=False).float().train()  # vocabulary 40


def _arch_rank(r: int, port: int, out, family: str, packed: bool = False):
    """packed: packs of PACK tokens, the blocks checkpointed (recomputed in the backward)."""
    import functools

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    torch.set_num_threads(1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine
        from reasonrl.engines.packing import check_packing, packed_logprobs

        model = _arch(family)
        kw = {}
        if packed:
            check_packing(model)  # (DeepSeek-V3.2: its packs get the block mask its indexer needs)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            kw["forward"] = functools.partial(packed_logprobs, pack_tokens=PACK)
        metrics = _train(
            FSDP2Engine(model, lr=1e-2, grad_clip=0.5, **kw), slice(0, 3) if r == 0 else slice(3, 6), 40
        )
        full = _full(model)  # every rank gathers, in lock-step
        out.put((r, metrics, {n: t.numpy() for n, t in full.items()} if r == 0 else None))
        # neither rank tears its group down while the other may still use it (a CI run saw a rank abort
        # in teardown: "terminate called without an active exception")
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("family", ["qwen3_moe", "gpt_oss", "lfm2", "mamba", "mistral3"])
def test_two_rank_fsdp2_equals_one_process_across_architectures(family):
    """Experts (Qwen3-MoE; gpt-oss with its sinks), a convolution hybrid (LFM2), a state-space model
    whose `_no_split_modules` nests one block in another (Mamba: MambaBlock holds the MambaMixer; before,
    sharding both failed inside `fully_shard`), and a multimodal model trained on text (Mistral 3: its
    vision tower's block is sharded too and never runs)."""
    from reasonrl.engines.fsdp2 import decoder_layers

    blocks = decoder_layers(_arch(family))
    assert len(blocks) == (3 if family == "mistral3" else 2)
    assert not any(a is not b and b in a.modules() for a in blocks for b in blocks)
    _equal_to_one_process(run_ranks(_arch_rank, 2, family), family)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("family", ["mamba", "deepseek_v32", "gpt_oss"])
def test_two_rank_fsdp2_packs_recomputing_its_blocks(family):
    """Packed on 2 FSDP2 ranks, the blocks checkpointed, equal to the single padded process. Mamba: the
    blocks get no pack keywords, so each keeps the pack's bounds on its input for the recompute, and
    FSDP2's hook hands a sharded block a new view of that input each time; kept on the tensor viewed,
    the bounds reach the recompute (on the view alone, torch's checkpoint stopped on the mismatch).
    DeepSeek-V3.2: its sparse attention over the keys its indexer picks under the pack's block mask
    (the ranks' empty packs included). gpt-oss: its sinks through SDPA."""
    _equal_to_one_process(run_ranks(_arch_rank, 2, family, True), family)


def _equal_to_one_process(results, family: str) -> None:
    """The ranks' metrics (loss, gradient norm) and rank 0's parameters after training equal one padded
    process's."""
    torch.set_num_threads(1)
    model = _arch(family)
    before = {n: t.clone() for n, t in _full(model).items()}
    single = _train(SingleDeviceEngine(model, lr=1e-2, grad_clip=0.5), slice(0, B), 40)
    for _, metrics, _ in results:
        for got, want in zip(metrics, single):
            for k in ("loss/policy", "grad_norm"):  # DeepSeek-V3.2's gradient norm: up to 1.2e-5 relative
                assert got[k] == pytest.approx(want[k], rel=3e-5, abs=1e-6), k  # (AVX-512 Xeon, 2026-11-28)
    want = _full(model)
    got = {n: torch.from_numpy(a) for n, a in results[0][2].items()}
    assert list(got) == list(want)
    moved = max((want[n] - before[n]).abs().max().item() for n in want)
    assert moved > 1e-2  # three Adam steps of lr 1e-2 moved the weights; the ranks agree far closer
    adam_close(got, want, skip=())


def _mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, max_position_embeddings=32, num_local_experts=4, num_experts_per_tok=2)  # fmt: skip
    return MixtralForCausalLM(cfg).float()


def _export_rank(r: int, port: int, out, export_dir):
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=1)
    try:
        from reasonrl.engines.fsdp2 import FSDP2Engine

        engine = FSDP2Engine(_mixtral(), lr=1e-2)
        engine.export_hf(export_dir, from_shards=True)
        out.put((r,))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.timeout(120)
def test_a_model_saved_in_another_layout_is_exported_gathered(tmp_path):
    """transformers 5 holds Mixtral's experts fused (`mlp.experts.gate_up_proj`) and saves them split,
    as `block_sparse_moe.experts.N.w1` / `w3` (what vLLM's loader reads); the shards hold the fused
    tensors, so an export asked to go from the shards writes gathered ones, in the saved layout."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    from reasonrl.engines.hf_shards import writable_from_shards

    assert writable_from_shards(_model()) and not writable_from_shards(_mixtral())
    run_ranks(_export_rank, 1, str(tmp_path / "export"))
    names = set()
    for file in (tmp_path / "export").glob("*.safetensors"):
        with safe_open(file, "pt") as f:
            names |= set(f.keys())
    assert "model.layers.0.block_sparse_moe.experts.3.w1.weight" in names
    assert not any("gate_up_proj" in n for n in names)
    loaded, want = AutoModelForCausalLM.from_pretrained(tmp_path / "export").float(), _mixtral()
    for (name, a), b in zip(want.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
