"""`torchrun --nproc-per-node 2 -m reasonrl.cli.main train` on CPU (gloo, FSDP2): one metrics line per
step written by rank 0 only, checkpoints with full (consolidated) weights that transformers loads; a
2-rank run resumed from its checkpoint reproduces the uninterrupted run's metrics, and the 2-rank
checkpoint resumes on one process. Bad settings for several ranks fail before any work."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
from test_async_rollouts import _interrupted_copy
from test_train_loop import _stable

from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint

pytestmark = pytest.mark.timeout(600)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _overrides(model_dir, run_dir, steps, *extra):
    return [f"model.path={model_dir}", "model.device=cpu", f"log.run_dir={run_dir}", f"train.steps={steps}",
            "train.global_batch=16", "rollout.n=4", "train.mini_batch=8", "train.micro_batch=2", "train.lr=1e-3",
            "rollout.max_new_tokens=8", "data.train_size=64", "val.size=4", "val.n=1", "log.progress=false",
            "log.tensorboard=false", "checkpoint.every=2", "checkpoint.keep_last=5", "algo.entropy_coef=0.05",
            *extra]  # fmt: skip


def _launch(n, overrides, *flags, plugins=False):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}  # a rank that crashes: its stack
    if plugins:  # this folder's plugin modules (parity_verifier, ...) importable by every process
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    if n == 1:
        cmd = [sys.executable, "-m", "reasonrl.cli.main", "train", *flags, *overrides]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={n}", f"--master-port={_port()}",
               "-m", "reasonrl.cli.main", "train", *flags, *overrides]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=500, env=env)


def _ok(res):
    """A run that must succeed; on failure, the ranks' own errors (torchrun's summary alone names none)."""
    assert res.returncode == 0, (
        f"exit {res.returncode}\n{res.stderr[-12000:]}\n--- stdout ---\n{res.stdout[-2000:]}"
    )


def _metrics(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def test_two_rank_training_sharded_checkpoints_and_resumes(tiny_model_dir, tmp_path):
    sharded = "checkpoint.sharded=true"
    full = tmp_path / "full"
    res = _launch(2, _overrides(tiny_model_dir, full, 4, sharded))
    _ok(res)
    rows = _metrics(full)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]  # rank 0 alone writes, once per step
    assert all(r["grad_norm"] > 0 for r in rows[1:])
    ckpts = list_checkpoints(full)
    assert [c.name for c in ckpts] == ["step_000002", "step_000004"]
    assert all(verify_checkpoint(c) is None for c in ckpts)
    ckpt = ckpts[-1]
    assert json.loads((ckpt / "state.json").read_text())["world_size"] == 2
    assert (ckpt / "dcp" / ".metadata").is_file() and len(
        list((ckpt / "dcp").glob("*.distcp"))
    ) == 2  # per rank
    assert "optimizer" not in torch.load(ckpt / "engine.pt", weights_only=False)  # no full gather on rank 0
    # nor of the weights: their HF files were consolidated from the ranks' shards (HuggingFaceStorageWriter)
    assert (ckpt / "model.safetensors.index.json").is_file() and not (ckpt / "sharded").exists()
    assert (ckpt / "model-00001-of-00001.safetensors").is_file() and (
        ckpt / "tokenizer_config.json"
    ).is_file()

    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(ckpt)  # full weights, loadable as they are
    start = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert not all(torch.equal(a, b) for a, b in zip(trained.parameters(), start.parameters()))

    # cut after step 2, resumed to 4 on 2 ranks: the same metrics as `full`
    part = _interrupted_copy(full, tmp_path / "part", 2)
    _ok(_launch(2, _overrides(tiny_model_dir, part, 4, sharded), "--resume"))
    assert [r["step"] for r in _metrics(part)] == [0, 1, 2, 3, 4]  # went on from step 2, once
    resumed = {r["step"]: _stable(r) for r in _metrics(part)}
    for r in rows[3:]:
        assert resumed[r["step"]] == _stable(r), r["step"]

    res = _launch(
        1, _overrides(tiny_model_dir, full, 5, sharded), "--resume", "--allow-config-change"
    )  # 2 -> 1
    _ok(res)
    assert [r["step"] for r in _metrics(full)] == [0, 1, 2, 3, 4, 5]


def test_two_rank_dynamic_sampling_runs_in_lock_step(tiny_model_dir, tmp_path):
    run = tmp_path / "ds"
    extra = ("algo.dynamic_sampling.enabled=true", "algo.dynamic_sampling.max_rounds=2", "checkpoint.every=0")
    res = _launch(2, _overrides(tiny_model_dir, run, 2, *extra))
    _ok(res)
    rows = _metrics(run)[1:]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:  # the untrained model solves nothing: both ranks refill up to the cap, then fall back
        assert r["reward/mean"] == 0.0
        assert r["rollout/ds_rounds"] == 3 and r["rollout/ds_fallback"] == 1.0
        assert r["rollout/ds_dropped_groups"] == 3 * 4  # every group of the 3 whole-step rounds


def test_two_rank_async_rollouts_resume_exactly(tiny_model_dir, tmp_path):
    """max_staleness=1 on 2 ranks: each rank's own worker generates its share; a checkpoint holds every
    rank's pending batches, so a resumed run equals the uninterrupted one; on 1 rank they are dropped."""
    extra = ("rollout.max_staleness=1", "algo.off_policy.tis_cap=2.0")
    full = tmp_path / "full"
    res = _launch(2, _overrides(tiny_model_dir, full, 4, *extra))
    _ok(res)
    rows = _metrics(full)
    assert [r["rollout/policy_version"] for r in rows[1:]] == [0, 0, 1, 2]  # one version stale when full
    assert all(r["rollout/staleness"] == (s > 1) for s, r in enumerate(rows[1:], 1))
    part = _interrupted_copy(full, tmp_path / "part", 2)  # its checkpoint holds the batches of steps 3, 4
    shutil.copytree(part, tmp_path / "one")
    state = torch.load(list_checkpoints(part)[-1] / "engine.pt", weights_only=False)
    assert [[p["step"] for p in r] for r in state["rollouts_by_rank"]] == [[3, 4], [3, 4]]
    shares = [r[0]["rollouts"].groups for r in state["rollouts_by_rank"]]
    assert len(shares[0]) == len(shares[1]) == 2  # each rank's worker made its own 2 of the 4 prompts
    assert {g.problem.uid for g in shares[0]}.isdisjoint(g.problem.uid for g in shares[1])
    res = _launch(2, _overrides(tiny_model_dir, part, 4, *extra), "--resume")
    _ok(res)
    resumed = {r["step"]: _stable(r) for r in _metrics(part)}
    for r in rows[3:]:
        assert resumed[r["step"]] == _stable(r), r["step"]
    one = _launch(1, _overrides(tiny_model_dir, tmp_path / "one", 4, *extra), "--resume")  # 2 ranks -> 1
    _ok(one)
    assert "generated for 2 rank(s), this run has 1: they are generated again" in one.stdout + one.stderr
    assert [r["step"] for r in _metrics(tmp_path / "one")] == [0, 1, 2, 3, 4]


def test_two_rank_async_workers_decide_on_the_whole_step_and_resume_exactly(tiny_model_dir, tmp_path):
    """Dynamic sampling and the curriculum with max_staleness=1 on 2 ranks: the ranks' rollout workers form
    their own group, so they keep, refill and move levels on the whole step's rollouts, exactly as a
    synchronous 2-rank run does (step 1: both sample policy 0); a resumed run equals the uninterrupted one."""
    from test_mixture_resume import _files

    files = _files(tmp_path)
    mixture = json.dumps([{"name": "parity", "files": [str(files)], "weight": 2},
                          {"name": "arith", "task": "arithmetic", "difficulty": 3}])  # fmt: skip
    extra = (f"data.mixture={mixture}", "data.max_prompt_tokens=1024", "plugins=[parity_verifier]", "val.every=0",
             "data.curriculum.enabled=true", "data.curriculum.last_k=2", "algo.dynamic_sampling.enabled=true",
             "algo.dynamic_sampling.max_rounds=2")  # fmt: skip
    asynchronous = ("rollout.max_staleness=1", "algo.off_policy.tis_cap=2.0")
    sync = _launch(2, _overrides(tiny_model_dir, tmp_path / "sync", 1, *extra), plugins=True)
    _ok(sync)
    full = tmp_path / "full"
    res = _launch(2, _overrides(tiny_model_dir, full, 4, *extra, *asynchronous), plugins=True)
    _ok(res)
    rows = _metrics(full)
    first = _metrics(tmp_path / "sync")[1]
    rollout_keys = [k for k in first if k.startswith(("reward/", "rollout/ds_", "curriculum/"))
                    or k.endswith(("/count", "/mean_score"))]  # fmt: skip
    assert {"rollout/ds_dropped_groups", "curriculum/arithmetic/level", "verifier/parity/count"} <= set(
        rollout_keys
    )
    # the same whole-step decisions: with only its own share, a worker would drop at most 2 groups a round
    assert {k: rows[1][k] for k in rollout_keys} == {k: first[k] for k in rollout_keys}
    assert sum(r["rollout/ds_dropped_groups"] for r in rows[1:]) > 0  # refills happened
    assert [r["rollout/policy_version"] for r in rows[1:]] == [0, 0, 1, 2]
    state = torch.load(list_checkpoints(full)[0] / "engine.pt", weights_only=False)
    pending = [r[0]["rollouts"] for r in state["rollouts_by_rank"]]  # step 3 of each rank
    assert pending[0].sampler_state == pending[1].sampler_state  # both workers saw every round
    assert {g.problem.uid for g in pending[0].groups}.isdisjoint(g.problem.uid for g in pending[1].groups)
    part = _interrupted_copy(full, tmp_path / "part", 2)
    res = _launch(2, _overrides(tiny_model_dir, part, 4, *extra, *asynchronous), "--resume", plugins=True)
    _ok(res)
    resumed = {r["step"]: _stable(r) for r in _metrics(part)}
    for r in rows[3:]:
        assert resumed[r["step"]] == _stable(r), r["step"]


def test_settings_several_ranks_cannot_run_fail_first(tiny_model_dir, tmp_path):
    res = _launch(
        2, _overrides(tiny_model_dir, tmp_path / "r", 2, "train.global_batch=12", "train.mini_batch=12")
    )
    assert res.returncode != 0 and "must both divide evenly over 2 ranks" in res.stderr
    res = _launch(1, _overrides(tiny_model_dir, tmp_path / "s", 2, "train.engine=fsdp2"))
    assert res.returncode == 2 and "launch with torchrun" in res.stderr
    assert not (tmp_path / "s" / "metrics.jsonl").exists()
    tp = ("rollout.engine=vllm", "rollout.engine_kwargs={tensor_parallel_size: 2}")
    res = _launch(1, _overrides(tiny_model_dir, tmp_path / "u", 2, *tp))
    assert (
        res.returncode == 2
        and "tensor_parallel_size=2 needs a multiple of that many torchrun ranks" in res.stderr
    )
    res = _launch(2, _overrides(tiny_model_dir, tmp_path / "v", 2, *tp, "rollout.max_staleness=1",
                                "algo.off_policy.tis_cap=2"))  # fmt: skip
    assert res.returncode != 0 and "each rank's rollout worker has its own engine" in res.stderr
    assert not (tmp_path / "v" / "metrics.jsonl").exists()  # before any work


def test_a_hung_rank_fails_the_others_within_the_timeout(tiny_model_dir, tmp_path):
    import time
    from pathlib import Path

    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": f"{Path(__file__).parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", f"--master-port={_port()}", "-m",
           "reasonrl.cli.main", "train", *_overrides(tiny_model_dir, tmp_path / "h", 2, "plugins=[hang_rank1]",
                                                     "train.dist_timeout_s=8")]  # fmt: skip
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode != 0 and time.monotonic() - t0 < 240
    assert (
        "rank 0 of 2: a collective in phase" in res.stderr and "another rank crashed or hangs" in res.stderr
    ), res.stderr[-3000:]
    out = subprocess.run(["pgrep", "-f", str(tmp_path / "h")], capture_output=True, text=True)
    assert out.stdout.strip() == ""  # no rank left behind


def test_full_checkpoint_of_a_two_rank_run_exports_and_resumes_on_one(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from reasonrl.cli.main import main

    run = (
        tmp_path / "run"
    )  # checkpoint.sharded false: the full optimizer state gathered and written by rank 0
    _ok(_launch(2, _overrides(tiny_model_dir, run, 2)))
    assert "optimizer" in torch.load(list_checkpoints(run)[-1] / "engine.pt", weights_only=False)
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ckpt = AutoModelForCausalLM.from_pretrained(list_checkpoints(run)[-1]).eval()
    prompt = torch.tensor([[3, 5, 7, 9]])
    gen = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(exported.generate(prompt, **gen), ckpt.generate(prompt, **gen))
    assert (tmp_path / "hf" / "tokenizer_config.json").is_file() and not (
        tmp_path / "hf" / "engine.pt"
    ).exists()
    assert main(["export", str(run), str(tmp_path / "hf")]) == 2  # never over an existing directory
    res = _launch(1, _overrides(tiny_model_dir, run, 3), "--resume", "--allow-config-change")  # 2 ranks -> 1
    _ok(res)
    assert [r["step"] for r in _metrics(run)] == [0, 1, 2, 3]


def test_two_rank_lora_checkpoints_merged_export_and_exact_resume(tiny_model_dir, tmp_path):
    """LoRA under FSDP2: rank 0 writes the live state (gathered in full), the peft adapter and the
    merged model; a 2-rank run resumed from step 2 reproduces the uninterrupted run's metrics."""
    from transformers import AutoModelForCausalLM

    lora = ("model.lora.rank=4", "model.lora.alpha=8", "train.lr=1e-2", "checkpoint.every=2")
    full = tmp_path / "full"
    res = _launch(2, _overrides(tiny_model_dir, full, 3, *lora))
    _ok(res)
    rows = _metrics(full)
    ckpt = list_checkpoints(full)[0]
    assert ckpt.name == "step_000002" and verify_checkpoint(ckpt) is None
    assert (ckpt / "adapter" / "adapter_model.safetensors").is_file()
    merged = AutoModelForCausalLM.from_pretrained(ckpt / "merged")
    start = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    changed = [n for (n, a), b in zip(merged.named_parameters(), start.parameters()) if not torch.equal(a, b)]
    assert changed and all(
        any(t in n for t in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
        for n in changed
    )  # fmt: skip  (only adapted layers move)

    part = _interrupted_copy(full, tmp_path / "part", 2)
    _ok(_launch(2, _overrides(tiny_model_dir, part, 3, *lora), "--resume"))
    assert [r["step"] for r in _metrics(part)] == [0, 1, 2, 3]  # went on from step 2, once
    resumed = {r["step"]: _stable(r) for r in _metrics(part)}
    assert resumed[3] == _stable(rows[3])


def test_one_rank_fsdp2_under_torchrun_equals_the_single_device_engine(tiny_model_dir, tmp_path):
    """`torchrun --nproc-per-node 1 -m reasonrl train ... train.engine=fsdp2` (FSDP2 on one device, as
    on one GPU) joins a process group of one and trains like the single-device engine."""
    single, fsdp = tmp_path / "single", tmp_path / "fsdp"
    res = _launch(1, _overrides(tiny_model_dir, single, 2))
    _ok(res)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=1", f"--master-port={_port()}",
           "-m", "reasonrl", "train", *_overrides(tiny_model_dir, fsdp, 2, "train.engine=fsdp2")]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=500, env=env)
    _ok(res)
    a, b = _metrics(single), _metrics(fsdp)
    assert [r["step"] for r in b] == [r["step"] for r in a] == [0, 1, 2]
    assert b[1]["reward/mean"] == a[1]["reward/mean"]  # the same rollouts from the same weights
    for x, y in zip(a[1:], b[1:]):
        assert y["grad_norm"] > 0 and abs(x["grad_norm"] - y["grad_norm"]) <= 1e-4 * x["grad_norm"]
        assert abs(x["loss/total"] - y["loss/total"]) <= 1e-5 + 1e-4 * abs(x["loss/total"])
    # its checkpoint holds the full weights (gathered from one rank's DTensor shards), equal to the
    # single-device run's after the same two steps
    from safetensors.torch import load_file

    wa = load_file(list_checkpoints(single)[-1] / "model.safetensors")
    wb = load_file(list_checkpoints(fsdp)[-1] / "model.safetensors")
    assert wa.keys() == wb.keys() and len(wa) > 5
    assert all(torch.allclose(wa[k], wb[k], atol=1e-5) for k in wa)
    moved = load_file(os.path.join(tiny_model_dir, "model.safetensors"))
    assert any(not torch.allclose(moved[k], wb[k]) for k in wb)  # it trained


def test_two_rank_fsdp2_with_compiled_layers_trains_like_eager(tiny_model_dir, tmp_path):
    """model.compile=true under FSDP2 (layers compiled in place, then sharded): the same metrics as the
    eager 2-rank run."""
    from reasonrl.engines.compiled import cpp_compiler

    if cpp_compiler() is None:
        pytest.skip("torch.compile on CPU needs a C++ compiler")
    runs = {}
    for name, extra in (("eager", ()), ("compiled", ("model.compile=true",))):
        res = _launch(2, _overrides(tiny_model_dir, tmp_path / name, 3, *extra))
        _ok(res)
        runs[name] = (_metrics(tmp_path / name)[1:], res.stdout + res.stderr)
    assert "decoder layers compiled for training" in runs["compiled"][1]
    assert "decoder layers compiled" not in runs["eager"][1]
    for e, c in zip(runs["eager"][0], runs["compiled"][0], strict=True):
        assert c["reward/mean"] == e["reward/mean"]
        for key in ("loss/policy", "grad_norm", "actor/entropy"):
            assert c[key] == pytest.approx(e[key], rel=1e-4, abs=1e-7), key
