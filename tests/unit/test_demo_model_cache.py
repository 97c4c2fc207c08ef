"""The demo model's cache (models/tiny.py `ensure_demo_model`): processes that ask for it at once (test
workers, ranks, a demo beside a test run) build it once; the others wait for that build and reuse it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_BUILD = """
import json, sys
from reasonrl.models.tiny import TinySpec, ensure_demo_model
spec = TinySpec(vocab_size=48, hidden_size=16, layers=1, heads=2, intermediate_size=32, sft_examples=64,
                sft_batch=16, sft_max_steps=2, sft_check_every=1)
print(json.dumps({"path": str(ensure_demo_model(spec, sys.argv[1]))}), flush=True)
"""


@pytest.mark.timeout(180)
def test_processes_asking_at_once_build_the_demo_model_once(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=150) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    logs = [out.splitlines() for out, _ in outs]
    builds = [line for lines in logs for line in lines if line.startswith("building the tiny demo model")]
    assert len(builds) == 1, logs  # one process built it; the other waited and reused it
    paths = {json.loads(lines[-1])["path"] for lines in logs}
    assert len(paths) == 1
    (path,) = paths
    assert json.loads((Path(path) / "reasonrl_demo.json").read_text())["spec"]["hidden_size"] == 16
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(path).config.hidden_size == 16
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith(".demo-"))
    assert leftovers == []  # no half-built directory left behind
