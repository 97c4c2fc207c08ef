"""A short run of the demo recipe's algorithm gives exactly the metrics recorded before a refactor
(tests/e2e/pinned/demo_short.json): the guard that moving seams changes no number. The run uses
recipes/demo.yaml (its warm-started tiny model, built once per machine and cached) with a smaller
batch, three steps, validation before and after.

Bit-for-bit equality holds on the machine and library versions that recorded a pin; the file keeps one
pin per machine fingerprint (an Intel Xeon and an AMD EPYC so far, both recorded from code that gives
the same numbers), and elsewhere, where floating-point details differ (sampling then diverges), the test
skips saying where it was recorded. Re-record deliberately after a change that is meant to change
numbers (this drops the other machines' pins, which would now fail; re-add them on those machines):

    .venv/bin/python tests/e2e/test_demo_pinned.py --record

and pin one more machine, from code that gives the pinned numbers elsewhere, with `--record --add`.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest

PINNED = Path(__file__).parent / "pinned" / "demo_short.json"
THREADS = 2  # the run's torch threads (recorded with 2)
KEYS = ("reward/mean", "reward/std", "reward/accuracy", "rollout/response_length", "actor/entropy",
        "actor/advantage_abs_mean", "grad_norm", "loss/policy", "loss/total", "eval/accuracy", "eval/mean@1")  # fmt: skip


def fingerprint() -> dict:
    """Where the pinned floats hold: the CPU, the libraries, and the demo model's warm-started weights
    (built on first use; its bits depend on the CPU's floating-point details, so a match says a lot)."""
    import hashlib

    import torch
    import transformers

    from reasonrl.models.loading import resolve_model_path

    weights = Path(resolve_model_path("demo:addsub")) / "model.safetensors"

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""  # fmt: skip
    return {"cpu": cpu, "torch": torch.__version__, "transformers": transformers.__version__,
            "demo_model_sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}  # fmt: skip


def short_run(run_dir: Path) -> list[dict]:
    from reasonrl.cli.demo import RECIPE
    from reasonrl.config import load_config
    from reasonrl.trainer.loop import train

    cfg = load_config(RECIPE, [f"log.run_dir={run_dir}", "train.steps=3",
                               "train.global_batch=32", "train.mini_batch=32", "train.micro_batch=16",
                               "val.size=32", "val.every=0", "data.train_size=256",
                               "checkpoint.every=0", "log.tensorboard=false", "log.progress=false"])  # fmt: skip
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)  # reductions split by thread count: fixed, whatever ran before
    try:
        hist = train(cfg, log=lambda *a: None)["history"]
    finally:
        torch.set_num_threads(threads)
    return [{"step": r["step"], **{k: r[k] for k in KEYS if k in r}} for r in hist]


def pins() -> list[dict]:
    """The recorded runs, one per machine fingerprint (each recorded from the same code)."""
    return json.loads(PINNED.read_text())["pins"]


def test_demo_recipe_metrics_are_unchanged(tmp_path):
    here = fingerprint()
    pin = next((p for p in pins() if p["fingerprint"] == here), None)
    if pin is None:
        where = [p["fingerprint"] for p in pins()]
        pytest.skip(f"pinned on {where}, this is {here}: exact floats differ across machines")
    got = short_run(tmp_path / "run")
    want = pin["history"]
    # exact: every float bit for bit, of the keys the pin holds (pins recorded before the diagnostics
    # became token means over each update, 2026-11-29, hold no actor/entropy: it was then the mean of
    # the micro-batches' means)
    assert len(got) == len(want)
    assert [{k: v for k, v in r.items() if k in w} for r, w in zip(got, want)] == want


if __name__ == "__main__" and "--record" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        hist = short_run(Path(tmp) / "run")
    here = fingerprint()
    keep = "--add" in sys.argv and PINNED.exists()  # another machine, same code: keep the other pins
    others = [p for p in pins() if p["fingerprint"] != here] if keep else []
    PINNED.parent.mkdir(exist_ok=True)
    PINNED.write_text(
        json.dumps({"pins": [*others, {"fingerprint": here, "history": hist}]}, indent=1) + "\n"
    )
    print(f"recorded {len(hist)} rows for {here} to {PINNED} ({len(others)} other machines kept)")
