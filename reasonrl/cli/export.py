"""`reasonrl export RUN_DIR_OR_CHECKPOINT OUT_DIR`: a consolidated Hugging Face model directory
(safetensors, config, generation config, tokenizer) from a run's newest valid checkpoint or a given
one, loadable by transformers and vLLM. A LoRA checkpoint exports its merged model. Written to a
temporary directory and renamed, so OUT_DIR is complete or absent.

Owns: choosing the files and the atomic copy. Does not own: writing checkpoints (`engines.checkpoint`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from reasonrl.errors import InputError

_SKIP = {"engine.pt", "rng.pt", "state.json", "complete.json", "best.json"}


def export(source: str | Path, out: str | Path, log=print) -> dict:
    from reasonrl.engines.checkpoint import latest_valid_checkpoint, list_checkpoints, verify_checkpoint

    src, dst = Path(source), Path(out)
    if not src.is_dir():
        raise InputError(f"{src}: not a run directory or checkpoint")
    if dst.exists():
        raise InputError(f"{dst} exists; choose a new output directory")
    if list_checkpoints(src):
        ckpt = latest_valid_checkpoint(src, warn=log)
        if ckpt is None:
            raise InputError(f"{src}: no valid checkpoint")
    else:
        ckpt = src
        problem = verify_checkpoint(ckpt) if (ckpt / "state.json").exists() else None
        if problem:
            raise InputError(f"{ckpt}: {problem}")
    model_dir = ckpt / "merged" if (ckpt / "merged" / "config.json").is_file() else ckpt
    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: no config.json (not a model checkpoint)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        files = [f for f in sorted(model_dir.iterdir()) if f.is_file() and f.name not in _SKIP]
        for f in files:
            shutil.copy2(f, tmp / f.name)
        if model_dir != ckpt:  # a LoRA checkpoint: the merged model, plus its adapter for reference
            shutil.copytree(ckpt / "adapter", tmp / "adapter")
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    step = json.loads((ckpt / "state.json").read_text())["step"] if (ckpt / "state.json").is_file() else None
    return {"checkpoint": str(ckpt), "step": step, "out": str(dst), "files": [f.name for f in files]}
