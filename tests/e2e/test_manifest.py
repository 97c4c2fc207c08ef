"""The run manifest written with every checkpoint: the resolved config, installed versions, the git
revision of the working directory, data-file hashes, verifier code versions, host and devices."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess

from test_train_loop import _cfg

from reasonrl.config import to_dict
from reasonrl.data.schema import write_problems
from reasonrl.data.tasks import generate
from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
from reasonrl.trainer.loop import train


def test_every_checkpoint_has_a_manifest(tiny_model_dir, tmp_path, monkeypatch):
    repo = tmp_path / "project"
    repo.mkdir()
    for args in (
        ["init", "-q"],
        ["-c", "user.email=a@b", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    monkeypatch.chdir(repo)
    data = tmp_path / "train.parquet"
    write_problems(data, generate("arithmetic", 64, seed=0, difficulty=2, split="train"))
    cfg = _cfg(tiny_model_dir, tmp_path / "run", 2, f"data.train_files=[{data}]", "checkpoint.every=1")
    train(cfg, log=lambda *a: None)
    ckpts = list_checkpoints(tmp_path / "run")
    assert len(ckpts) == 2
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    for c in ckpts:
        assert verify_checkpoint(c) is None  # the manifest is sealed with the rest
        m = json.loads((c / "manifest.json").read_text())
        assert m["step"] == int(c.name.split("_")[1])
        assert m["config"] == json.loads(json.dumps(to_dict(cfg), default=str))
        assert (
            m["packages"]["torch"] == importlib.metadata.version("torch") and "transformers" in m["packages"]
        )
        assert m["git"] == {"revision": head, "dirty": False}
        (digest,) = m["data_files"]
        assert digest == {"path": str(data), "bytes": data.stat().st_size,
                          "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}  # fmt: skip
        assert m["verifiers"]["arithmetic"].startswith("reasonrl.rewards.verifiers.procedural:")
        assert m["host"]["cpus"] >= 1 and m["devices"]["world_size"] == 1
