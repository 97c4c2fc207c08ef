"""The GPU benchmark scripts' code paths run on the CPU with a tiny shape, so a GPU session (scarce
device time) never finds them broken: `bench/gpu_train_step.py --device cpu` through the single-device
engine with the bare loop beside it, and through the FSDP2 engine (gloo, world size 1), with activation
checkpointing off and on, and packed beside padded on uneven rows; `bench/rollout_throughput.py` with
the HF engine and transformers' continuous batching (`gpu_figures.sh rollout`); `bench/eval_throughput.py`
with all three sides (`gpu_figures.sh eval`); `bench/lean_attention.py` for sinks and soft-caps
(`gpu_figures.sh sinks`); `bench/gpu_figures.sh` parses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
TINY = ["--device", "cpu", "--hidden", "64", "--layers", "2", "--vocab", "256", "--seqs", "64",
        "--tokens-per-step", "512", "--tokens-per-micro", "256", "--steps", "1", "--ckpt", "off,on"]  # fmt: skip


def _run(*extra: str) -> dict:
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_train_step.py"), *TINY, *extra],
                         capture_output=True, text=True, timeout=240, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return {**json.loads(res.stdout.strip().splitlines()[-1]), "stdout": res.stdout}


@pytest.mark.parametrize("engine, extra", [("single", ["--bare", "--chunk", "16"]), ("fsdp2", [])])
def test_gpu_train_step_runs_on_cpu(engine, extra):
    out = _run("--engine", engine, *extra)
    assert (out["device"], out["engine"], out["params"] > 0) == ("cpu", engine, True)
    grid = [(r["seq"], r["ckpt"], r["rows"] * r["seq"]) for r in out["rows"]]
    assert grid == [(64, "off", 512), (64, "on", 512)]
    for row in out["rows"]:
        assert row["reasonrl"]["sec_per_step"] > 0 and "mfu" not in row["reasonrl"]  # no GPU peak, no MFU
        if "--bare" in extra:
            assert row["bare"]["sec_per_step"] > 0
            assert row["ratio"] == round(row["bare"]["sec_per_step"] / row["reasonrl"]["sec_per_step"], 3)
        else:
            assert "bare" not in row


def test_gpu_train_step_packed_runs_on_cpu():
    out = _run("--pack", "128", "--chunk", "16", "--profile", "5")
    # one profiled step per configuration (padded and packed), each with its operator table
    assert out["stdout"].count("profile of one step") == 2 * len(out["rows"])
    assert out["stdout"].count("Self CPU time total") == 2 * len(out["rows"])
    for row in out["rows"]:
        assert 0.1 < row["real_token_frac"] < 1  # uneven rows: real tokens only are counted
        assert abs(row["tokens_per_step"] - row["real_token_frac"] * row["rows"] * row["seq"]) <= 1
        assert row["reasonrl_packed"]["sec_per_step"] > 0
        assert row["packed_speedup"] == round(
            row["reasonrl"]["sec_per_step"] / row["reasonrl_packed"]["sec_per_step"], 3
        )


def _bench(script: str, *args: str) -> dict:
    res = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                         timeout=240, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_rollout_throughput_runs_on_cpu():
    out = _bench("rollout_throughput.py", "--engines", "hf,cb", "--prompts", "2", "--n", "2", "--new", "4",
                 "--prompt-len", "5", "--vocab", "128", "--hidden", "64", "--layers", "2", "--repeats", "1")  # fmt: skip
    assert (out["device"], out["prompts"] * out["n"] * out["new"]) == ("cpu", 16)
    for side in ("hf", "cb"):  # generate_batch returned every one of the 2 x 2 rows' 4 tokens (else it exits)
        o, b = out[side]["ours_tok_s"], out[side]["bare_tok_s"]
        assert o > 0 and b > 0 and out[side]["ratio"] == pytest.approx(o / b, rel=0.02, abs=1e-3)


def test_eval_throughput_runs_on_cpu(tiny_model_dir):
    out = _bench("eval_throughput.py", "--model", tiny_model_dir, "--problems", "8", "--max-tokens", "6",
                 "--batch", "4", "--repeats", "2")  # fmt: skip
    assert (out["problems"], out["device"]) == (8, "cpu")
    assert len(out["reasonrl_vs_raw_engine_each"]) == 2 and min(out["reasonrl_vs_raw_engine_each"]) > 0
    r, raw, lm = out["reasonrl_samples_per_s"], out["raw_engine_samples_per_s"], out["lm_eval_samples_per_s"]
    assert r > 0 and raw > 0 and lm > 0  # lm-eval is a dev dependency: its side ran
    assert out["reasonrl_vs_raw_engine"] == pytest.approx(r / raw, rel=0.02)
    t = out["reasonrl_seconds"]  # reasonrl's own timing: the parts add up to its total
    assert t["generate_s"] > 0 and t["total_s"] == pytest.approx(
        t["generate_s"] + t["score_wait_s"] + t["other_s"], abs=0.02
    )


@pytest.mark.parametrize("kind", ["sinks", "softcap"])
def test_lean_attention_runs_on_cpu(kind):
    """`gpu_figures.sh sinks`: reasonrl's attention for sinks and soft-caps beside the scores written out."""
    out = _bench("lean_attention.py", "--kind", kind, "--rows", "2", "--length", "48", "--reps", "1")
    ours = {"sinks": "SDPA", "softcap": "blocks"}[kind]
    for side in ("packed", "padded"):
        before, after = (
            out[f"{side}, written out" if side == "packed" else "padded, eager"],
            out[f"{side}, {ours}"],
        )
        assert before["seconds"] > 0 and after["seconds"] > 0 and out[f"{side}_logprob_gap"] < 1e-4
        assert after["kept_mib"] < before["kept_mib"]  # no scores kept for the backward


def test_gpu_figures_script_parses():
    res = subprocess.run(
        ["bash", "-n", str(ROOT / "bench" / "gpu_figures.sh")], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
