"""`reasonrl plan`: batch arithmetic and memory terms checked by hand, and one test per flagged mistake
asserting the finding names the key to change (`reasonrl train` stopping on them: tests/e2e/test_planner_memory.py)."""

from __future__ import annotations

import json

import pytest

from reasonrl.cli.main import main
from reasonrl.config import load_cli, load_config
from reasonrl.errors import InputError
from reasonrl.planner.checks import batch_figures, make_plan
from reasonrl.planner.memory import Settings, estimate
from reasonrl.planner.shape import ModelShape, model_shape

SHAPE = ModelShape(name="t", params=1000, trainable=1000, layers=2, hidden=8, intermediate=16, heads=2,
                   kv_heads=1, head_dim=4, vocab=50, context=64, largest_layer=300)  # fmt: skip


def _cfg(*overrides):
    return load_config(None, ["model.device=cpu", "train.global_batch=128", "rollout.n=8", "train.mini_batch=32",
                              "train.micro_batch=8", "train.epochs=2", *overrides])  # fmt: skip


def test_batch_figures_per_step_and_rank():
    b = batch_figures(_cfg("rollout.max_new_tokens=28"), world=2, prompt_tokens=100)
    assert b == {"prompts_per_step": 16, "sequences_per_step": 128, "max_tokens_per_step": 128 * 128,
                 "sequences_per_rank": 64, "optimizer_steps_per_rollout_batch": 8, "mini_batch_per_rank": 16,
                 "micro_batches_per_optimizer_step_per_rank": 2, "world_size": 2}  # fmt: skip


def test_memory_terms_by_hand():
    s = Settings(dtype="float32", micro_batch=2, seq_tokens=10, completion_tokens=6, generation_rows=3)
    m = estimate(SHAPE, s)
    assert m["weights"] == 4000 and m["gradients"] == 4000 and m["optimizer"] == 8000
    assert m["reference"] == 0 and m["critic"] == 0
    # values per token and layer, 20 tokens, fp32: norms 4h, q + attention output twice 3h, k / v / rotated
    # k repeated to both heads (a padding mask) 3 x 8, MLP 4I, and one more h with the mask
    per_layer = (7 * 8 + 3 * 8 + 4 * 16 + 8) * 20 * 4
    assert m["activations"] == 2 * per_layer + 3 * 8 * 20 * 4
    assert m["logits"] == 2 * 50 * (2 * 10 * 4 + 2 * 6 * 4)
    assert m["kv_cache"] == 3 * 10 * 2 * 2 * 1 * 4 * 4
    assert m["training_peak"] == 16000 + m["activations"] + m["logits"]
    assert m["peak"] == max(m["training_peak"], m["generation_peak"])
    ck = estimate(SHAPE, Settings(**{**vars(s), "gradient_checkpointing": True}))
    assert ck["activations"] == 2 * 8 * 20 * 4 + per_layer + 3 * 8 * 20 * 4 < m["activations"]
    sharded = estimate(SHAPE, Settings(**{**vars(s), "world": 4, "sharded": True}))
    assert sharded["weights"] == 1000 + 2 * 300 * 4 and sharded["optimizer"] == 2000
    off = estimate(SHAPE, Settings(**{**vars(s), "world": 4, "sharded": True, "cpu_offload": True}))
    assert off["optimizer"] == 0 and off["weights"] == 2 * 300 * 4
    chunk = estimate(SHAPE, Settings(**{**vars(s), "logprob_chunk": 2}))
    assert chunk["logits"] == 2 * 50 * (2 * 2 * 4 + 2 * 2 * 4) < m["logits"]
    bf16 = estimate(SHAPE, Settings(**{**vars(s), "dtype": "bfloat16"}))
    assert bf16["weights"] == 2000 and bf16["logits"] == 2 * 50 * (2 * 10 * 2 + 3 * 6 * 4 + 6 * 2)
    # 16 bits: the norms' fp32 upcast keeps 2h more values of 2 bytes
    assert bf16["activations"] == 2 * (7 * 8 + 3 * 8 + 4 * 16 + 8 + 2 * 8) * 20 * 2 + 3 * 8 * 20 * 2
    full = estimate(SHAPE, Settings(**{**vars(s), "padded": False}))  # no mask: k / v at their own 1 head
    assert full["activations"] == 2 * (7 * 8 + 3 * 4 + 4 * 16) * 20 * 4 + 3 * 8 * 20 * 4
    ref = estimate(SHAPE, Settings(**{**vars(s), "reference": True}))
    assert ref["reference"] == 4000 and ref["activations"] == m["activations"]


def test_shape_from_config_without_weights(tiny_model_and_tokenizer, tmp_path):
    model, tok = tiny_model_and_tokenizer
    model.config.save_pretrained(tmp_path)  # a config.json alone: no weights needed
    sh = model_shape(str(tmp_path))
    assert sh.params == sum(p.numel() for p in model.parameters())
    assert (sh.layers, sh.hidden, sh.vocab, sh.context) == (2, 32, model.config.vocab_size, 128)
    lora = model_shape(str(tmp_path), 4, ["q_proj", "v_proj"])
    q, v = model.model.layers[0].self_attn.q_proj, model.model.layers[0].self_attn.v_proj
    assert lora.trainable == 2 * 4 * (q.in_features + q.out_features + v.in_features + v.out_features)


def test_state_space_and_hybrid_models_cache_keys_and_values_only_in_their_attention_layers():
    """A Mamba config has no attention heads (before, the planner, and so `reasonrl train`, stopped on
    an AttributeError); a hybrid's convolution / linear-attention layers keep no per-position cache."""
    import transformers

    small = dict(hidden_size=64, num_hidden_layers=4, vocab_size=100)
    mamba = model_shape("m", config=transformers.MambaConfig(**small))
    assert (mamba.heads, mamba.kv_layers) == (0, 0)
    assert mamba.largest_layer < mamba.params / 4  # one MambaBlock (what FSDP2 unshards at once)
    s = Settings(dtype="float32", micro_batch=2, seq_tokens=10, completion_tokens=6, generation_rows=3)
    assert estimate(mamba, s)["kv_cache"] == 0 and estimate(mamba, s)["training_peak"] > 0
    types = ["linear_attention", "full_attention", "linear_attention", "full_attention"]
    nxt = model_shape("q", config=transformers.Qwen3NextConfig(**small, layer_types=types))
    assert nxt.kv_layers == 2
    full = model_shape("l", config=transformers.LlamaConfig(**small, num_attention_heads=4))
    assert full.kv_layers == 4
    per_layer = estimate(full, s)["kv_cache"] / 4
    assert estimate(ModelShape(**{**vars(full), "kv_layers": 2}), s)["kv_cache"] == 2 * per_layer


def _keys(cfg, **kw):
    return {(f.level, f.key) for f in make_plan(cfg, **kw).findings}


def test_each_mistake_names_its_key():
    demo = ("model.path=demo", "data.max_prompt_tokens=40")  # the demo model: context 128
    assert _keys(_cfg(*demo, "rollout.max_new_tokens=64"), world=1) == set()
    assert ("error", "rollout.max_new_tokens") in _keys(_cfg(*demo, "rollout.max_new_tokens=128"))
    assert ("warn", "rollout.max_new_tokens") in _keys(_cfg(*demo, "rollout.max_new_tokens=100"))
    assert ("error", "rollout.max_new_tokens") in _keys(
        _cfg(*demo, "rollout.max_new_tokens=100"), prompt_tokens=30
    )
    assert ("error", "train.global_batch") in _keys(
        _cfg(*demo, "train.global_batch=16", "train.mini_batch=16"), world=4
    )
    # batches that do not divide over the ranks (what a torchrun launch of 3 refuses; before, the plan was clean)
    split = make_plan(_cfg(*demo, "train.global_batch=128", "train.mini_batch=128"), world=3)
    assert [(f.key, f.message) for f in split.findings if f.level == "error"] == [
        ("train.global_batch", "train.global_batch / rollout.n = 16 prompts and train.mini_batch = 128 must both "
                               "divide evenly over 3 ranks")]  # fmt: skip
    assert not [
        f for f in make_plan(_cfg(*demo, "train.global_batch=128"), world=2).findings if f.level == "error"
    ]
    assert ("warn", "rollout.n") in _keys(_cfg(*demo, "train.global_batch=16", "train.mini_batch=16"))
    assert ("warn", "train.mini_batch") in _keys(_cfg(*demo, "rollout.n=16", "train.mini_batch=8"))
    plan = make_plan(_cfg(*demo, "train.micro_batch=32"), memory_bytes=2**27)  # 128 MiB per device
    (f,) = [f for f in plan.findings if f.level == "error"]
    assert (
        f.key == "train.micro_batch"
        and "lower train.micro_batch" in f.message
        and "gradient_checkpointing" in f.message
    )
    gen = make_plan(_cfg(*demo, "train.micro_batch=1", "train.global_batch=4096", "train.mini_batch=4096",
                         "rollout.engine_kwargs={max_batch: 4096}"), memory_bytes=2**28)  # fmt: skip
    assert ("error", "rollout.engine_kwargs.max_batch") in {(x.level, x.key) for x in gen.findings}


def test_half_precision_on_a_cpu_without_its_instructions_warns(monkeypatch):
    import torch

    from reasonrl.planner import checks

    demo = ("model.path=demo", "data.max_prompt_tokens=40", "rollout.max_new_tokens=64", "model.device=cpu")
    for dtype, check in (("bfloat16", "_is_mkldnn_bf16_supported"), ("float16", "_is_mkldnn_fp16_supported")):
        monkeypatch.setattr(torch.ops.mkldnn, check, lambda: False)  # an AVX2 CPU (this machine's kind)
        (f,) = [
            f
            for f in make_plan(_cfg(*demo, f"model.dtype={dtype}"), world=1).findings
            if f.key == "model.dtype"
        ]
        assert f.level == "warn" and "17x slower" in f.message and "model.dtype=float32" in f.message
        assert f"without {dtype} instructions" in f.message
        assert _keys(_cfg(*demo, "model.dtype=float32"), world=1) == set()
        monkeypatch.setattr(torch.ops.mkldnn, check, lambda: True)  # AVX-512 bf16 / AMX
        assert _keys(_cfg(*demo, f"model.dtype={dtype}"), world=1) == set()
    assert checks.cpu_computes("bfloat16") is True


def test_large_logits_suggest_chunking(tmp_path):
    from transformers import Qwen2Config

    Qwen2Config(vocab_size=152_064, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=128, max_position_embeddings=4096).save_pretrained(tmp_path)  # fmt: skip
    cfg = _cfg(f"model.path={tmp_path}", "rollout.max_new_tokens=1024", "data.max_prompt_tokens=512")
    assert ("warn", "model.logprob_chunk") in _keys(cfg)
    assert ("warn", "model.logprob_chunk") not in _keys(_cfg(f"model.path={tmp_path}", "rollout.max_new_tokens=1024",
                                                             "data.max_prompt_tokens=512", "model.logprob_chunk=128"))  # fmt: skip


def test_plan_command_report_json_and_exit_status(capsys):
    assert main(["plan", "model.path=demo", "data.max_prompt_tokens=40", "--world-size", "1"]) == 0
    text = capsys.readouterr().out
    assert "prompts per step" in text and "peak, training phase" in text and "findings: none" in text
    assert "engines: rollout hf, train single" in text
    assert main(["plan", "model.path=demo", "rollout.max_new_tokens=128", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["batch"]["prompts_per_step"] == 16 and out["model"]["params"] > 800_000
    assert {"level": "error", "key": "rollout.max_new_tokens"}.items() <= out["findings"][0].items()


def test_plan_command_measures_the_longest_prompt_as_train_does(capsys):
    from pathlib import Path

    from transformers import AutoTokenizer

    from reasonrl.data.prompts import encode_prompt
    from reasonrl.models.loading import resolve_model_path
    from reasonrl.trainer.setup import load_data

    recipe = str(Path(__file__).parents[2] / "recipes" / "demo.yaml")
    cfg = load_cli(recipe, [])
    tok = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model.path, log=lambda *a: None))
    train, val = load_data(cfg)
    longest = max(len(encode_prompt(tok, p)) for p in train + val)
    assert 0 < longest < cfg.data.max_prompt_tokens
    per_step = cfg.train.global_batch * (longest + cfg.rollout.max_new_tokens)
    assert main(["plan", recipe, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prompt_tokens"] == longest and out["batch"]["max_tokens_per_step"] == per_step
    assert out["findings"] == []  # the worst case (512 + 48 > the tiny model's 128) would warn
    assert main(["plan", recipe, "--worst-case", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prompt_tokens"] == cfg.data.max_prompt_tokens and out["findings"][0]["level"] == "warn"
    assert main(["plan", recipe, "--prompt-tokens", "20"]) == 0
    assert "prompt: 20 tokens (--prompt-tokens)" in capsys.readouterr().out


def test_plan_of_a_large_file_measures_its_longest_prompts_by_characters(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from reasonrl.cli import plan
    from reasonrl.data.prompts import encode_prompt
    from reasonrl.data.schema import write_problems
    from reasonrl.models.loading import resolve_model_path
    from reasonrl.types import Problem

    rows = [Problem([{"role": "user", "content": "1 + 1 = ?" * (1 + i % 7)}], "2", "math__x", "math", {}, uid=str(i))
            for i in range(300)]  # fmt: skip
    rows[123].prompt[0]["content"] = "2 + 2 = ? " * 30  # the longest, in the middle of the file
    write_problems(tmp_path / "t.parquet", rows)
    cfg = load_cli(
        None,
        ["model.path=demo", f"data.train_files=[{tmp_path / 't.parquet'}]", "data.max_prompt_tokens=4096"],
    )
    tok = AutoTokenizer.from_pretrained(resolve_model_path("demo", log=lambda *a: None))
    want = max(len(encode_prompt(tok, p)) for p in rows)
    assert want == len(encode_prompt(tok, rows[123]))
    monkeypatch.setattr(plan, "MEASURE_ALL", 20)  # 300 rows: only the 20 longest by characters
    seen = []
    import reasonrl.data.prompts as prompts  # longest_prompt imports encode_prompt from here when called

    orig = prompts.encode_prompt
    monkeypatch.setattr(prompts, "encode_prompt", lambda tok, p: seen.append(p.uid) or orig(tok, p))
    assert plan.longest_prompt(cfg) == want and len(seen) == 20
    # a prompt over the budget stops plan as it stops train (unless the run drops such prompts)
    small = [f"data.train_files=[{tmp_path / 't.parquet'}]", f"data.max_prompt_tokens={want - 1}"]
    with pytest.raises(
        InputError, match=f"prompt of uid '123' has {want} tokens > data.max_prompt_tokens={want - 1}"
    ):
        plan.longest_prompt(load_cli(None, ["model.path=demo", *small]))
    assert (
        plan.longest_prompt(load_cli(None, ["model.path=demo", *small, "data.drop_overlong_prompts=true"]))
        < want
    )


def test_a_colocated_engine_reservation_leaves_less_for_training():
    from reasonrl.rollout.factory import memory_share

    assert memory_share("hf") == 0.0 and memory_share("vllm") == 0.5  # the builder's own default
    assert memory_share("vllm", {"gpu_memory_utilization": 0.8}) == 0.8
    base = ("model.path=demo", "model.device=cuda", "data.max_prompt_tokens=40", "train.micro_batch=32")
    need = make_plan(_cfg(*base)).memory["training_peak"]
    fits = need * 1.5  # enough alone, not once vLLM takes 80% of it
    assert not make_plan(_cfg(*base), memory_bytes=fits).errors
    plan = make_plan(_cfg(*base, "rollout.engine=vllm", "rollout.engine_kwargs={gpu_memory_utilization: 0.8}"),
                     memory_bytes=fits)  # fmt: skip
    assert [f.key for f in plan.errors] == ["train.micro_batch"]


def test_a_gpu_estimate_close_to_the_memory_warns_with_the_measured_error():
    """GPU peaks measured on an H100 reached 1.02x the estimate: within 10% of the device's memory the
    plan warns (naming train.micro_batch); with room to spare it does not."""
    base = _cfg("model.path=demo", "model.device=cuda", "data.max_prompt_tokens=40", "train.micro_batch=32")
    need = make_plan(base).memory["training_peak"]
    close = make_plan(base, memory_bytes=need * 1.05)
    assert not close.errors
    assert [(f.level, f.key) for f in close.findings if "1.02x" in f.message] == [
        ("warn", "train.micro_batch")
    ]
    assert not [f for f in make_plan(base, memory_bytes=need * 1.2).findings if "1.02x" in f.message]
    assert [f.key for f in make_plan(base, memory_bytes=need * 0.9).errors] == ["train.micro_batch"]


def test_micro_batches_by_tokens_hold_as_many_full_rows_as_fit():
    demo = (
        "model.path=demo",
        "data.max_prompt_tokens=40",
        "rollout.max_new_tokens=64",
        "train.micro_batch=32",
    )
    rows = lambda *extra: make_plan(_cfg(*demo, *extra)).memory["activations"]  # noqa: E731
    assert rows("train.micro_tokens=420") == rows("train.micro_batch=4")  # 4 rows of 40 + 64 tokens
    assert rows("train.micro_tokens=50") == rows("train.micro_batch=1")  # a longer row runs alone
    assert rows("train.micro_tokens=100000") == rows()  # the row count still caps it
    batch = make_plan(_cfg(*demo, "train.micro_tokens=420")).batch
    assert batch["micro_batches_per_optimizer_step_per_rank"] == 8  # 32 rows, 4 at a time at most


def test_a_config_with_per_layer_head_dims_is_read_per_layer():
    """Gemma 4 sets head_dim per layer (its sliding-window layers and its full-attention ones differ);
    reading the global value raises in transformers, which stopped the planner and so `reasonrl
    train`. The KV cache is summed layer by layer; the activation estimate takes the largest."""
    import transformers

    text = dict(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, global_head_dim=32, sliding_window=8,
                layer_types=["sliding_attention", "full_attention"], hidden_size_per_layer_input=8,
                vocab_size_per_layer_input=100)  # fmt: skip
    shape = model_shape("g", config=transformers.Gemma4Config(text_config=text))
    assert (shape.head_dim, shape.kv_heads, shape.kv_layers, shape.kv_width) == (32, 2, 2, 2 * 16 + 2 * 32)
    s = Settings(dtype="float32", micro_batch=2, seq_tokens=10, completion_tokens=6, generation_rows=3)
    assert estimate(shape, s)["kv_cache"] == 3 * 10 * 2 * (2 * 16 + 2 * 32) * 4


def test_a_reward_model_on_the_training_device_is_counted_in_both_phases(tmp_path):
    """reward.weights' reward_model stays loaded for the whole run: its weights (in its dtype) add to the
    training and the generation peaks on the device it is on, and to neither where it is elsewhere."""
    from test_reward_model import _save_rm
    from transformers import AutoModelForSequenceClassification

    path = _save_rm(tmp_path / "rm")
    params = sum(p.numel() for p in AutoModelForSequenceClassification.from_pretrained(path).parameters())
    base = ("model.path=demo", "model.device=cuda", "data.max_prompt_tokens=40")
    with_rm = (*base, "reward.weights={correctness: 1.0, reward_model: 0.5}")
    alone = make_plan(_cfg(*base)).memory
    plan = make_plan(_cfg(*with_rm, f"reward.options={{reward_model: {{path: '{path}'}}}}"))
    assert plan.memory["reward_model"] == params * 2  # bfloat16 on a GPU ("auto")
    for peak in ("training_peak", "generation_peak"):
        assert plan.memory[peak] - alone[peak] == pytest.approx(params * 2)
    fp32 = make_plan(_cfg(*with_rm, f"reward.options={{reward_model: {{path: '{path}', dtype: float32}}}}"))
    assert fp32.memory["reward_model"] == params * 4
    on_cpu = make_plan(_cfg(*with_rm, f"reward.options={{reward_model: {{path: '{path}', device: cpu}}}}"))
    assert on_cpu.memory["reward_model"] == 0 and on_cpu.memory["training_peak"] == alone["training_peak"]
    unread = make_plan(_cfg(*with_rm, f"reward.options={{reward_model: {{path: '{tmp_path}/none'}}}}"))
    assert [(f.level, f.key) for f in unread.findings if "reward model" in f.message] == [
        ("warn", "reward.options.reward_model.path")]  # fmt: skip
