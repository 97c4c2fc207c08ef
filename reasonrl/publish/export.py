"""Export: a consolidated Hugging Face model directory (safetensors, config, generation config,
tokenizer, `manifest.json`) from a run's newest valid checkpoint or a given one, loadable by
transformers and vLLM, with a model card (`README.md`, plus `training_curves.png`). A LoRA checkpoint
exports its merged model (and its adapter under `adapter/`). `with_optimizer=True` adds
`training_state/`: every file of the checkpoint that the top level does not hold byte for byte
(optimizer + scheduler `engine.pt`, sharded optimizer `dcp/`, `rng.pt`, `state.json`, the integrity
record `complete.json`; a LoRA run's live weights and adapter). The top-level files plus
training_state/'s, put in RUN/checkpoints/step_N/, are the checkpoint again: it verifies and resumes. Written to a temporary directory and
renamed, so the output directory is complete or absent.

Owns: choosing the checkpoint and the files, and the atomic copy. Does not own: writing checkpoints
(`engines.checkpoint`), the card's contents (`publish.card`) or uploading (`publish.hub`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from reasonrl.errors import InputError

_SKIP = {"engine.pt", "rng.pt", "state.json", "complete.json", "best.json"}


def resolve_checkpoint(source: str | Path, log=print) -> Path:
    """A run directory's newest valid checkpoint, or `source` itself if it is a (valid) checkpoint."""
    from reasonrl.engines.checkpoint import run_checkpoint, verify_checkpoint

    src = Path(source)
    if not src.is_dir():
        raise InputError(f"{src}: not a run directory or checkpoint")
    if (ckpt := run_checkpoint(src, warn=log)) is not None:
        return ckpt
    problem = verify_checkpoint(src) if (src / "state.json").exists() else None
    if problem:
        raise InputError(f"{src}: {problem}")
    return src


def _training_state(ckpt: Path, out: Path) -> None:
    import filecmp

    for f in sorted(p for p in ckpt.rglob("*") if p.is_file()):
        rel = f.relative_to(ckpt)
        top = out / rel
        if top.is_file() and top.stat().st_size == f.stat().st_size and filecmp.cmp(top, f, shallow=False):
            continue
        (out / "training_state" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, out / "training_state" / rel)


def export(
    source: str | Path, out: str | Path, log=print, with_optimizer: bool = False, card: bool = True
) -> dict:
    dst = Path(out)
    if dst.exists():
        raise InputError(f"{dst} exists; choose a new output directory")
    ckpt = resolve_checkpoint(source, log)
    model_dir = ckpt / "merged" if (ckpt / "merged" / "config.json").is_file() else ckpt
    if not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: no config.json (not a model checkpoint)")
    if with_optimizer and not (ckpt / "engine.pt").is_file():
        raise InputError(f"{ckpt}: --with-optimizer, but the checkpoint has no engine.pt (optimizer state)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        files = [f for f in sorted(model_dir.iterdir()) if f.is_file() and f.name not in _SKIP]
        for f in files:
            shutil.copy2(f, tmp / f.name)
        if model_dir != ckpt:  # a LoRA checkpoint: the merged model, plus its adapter for reference
            shutil.copytree(ckpt / "adapter", tmp / "adapter")
            if (ckpt / "manifest.json").is_file():  # the merged model's own directory has none
                shutil.copy2(ckpt / "manifest.json", tmp / "manifest.json")
        if with_optimizer:
            _training_state(ckpt, tmp)
        if card:
            from reasonrl.publish.card import write_card

            write_card(ckpt, tmp, with_optimizer=with_optimizer)
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    step = json.loads((ckpt / "state.json").read_text())["step"] if (ckpt / "state.json").is_file() else None
    return {"checkpoint": str(ckpt), "step": step, "out": str(dst),
            "files": sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())}  # fmt: skip
