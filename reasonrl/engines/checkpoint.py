"""Checkpoints: model in Hugging Face format + optimizer + RNG states + trainer state, atomically.

Layout: `<run_dir>/checkpoints/step_000010/` holding the HF model (safetensors, config, tokenizer),
`engine.pt` (optimizer + scheduler), `rng.pt` (python / torch / cuda RNG states) and `state.json`
(step, data-sampler position, anything the trainer adds). Written to a temp directory and renamed,
so a crash mid-write never leaves a half checkpoint; only the newest `keep_last` are kept.

Owns: the layout, atomic save, listing / pruning and loading of those files, and RNG capture.
Does not own: when to save or what the trainer state holds (`trainer`), or the optimizer state
itself (the engine's `state_dict`).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from pathlib import Path

import torch

PREFIX = "step_"


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        return []
    found = [
        p
        for p in d.iterdir()
        if p.is_dir() and re.fullmatch(rf"{PREFIX}\d+", p.name) and (p / "state.json").is_file()
    ]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX) :]))


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir, step: int, model, tokenizer, engine_state: dict, state: dict, keep_last: int
) -> Path:
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{PREFIX}{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        torch.save(engine_state, tmp / "engine.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps({"step": step, **state}, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(path: str | Path) -> tuple[dict, dict, dict]:
    """(state, engine_state, rng) of a checkpoint directory; the model is loaded from the same path."""
    path = Path(path)
    if not (path / "state.json").is_file():
        raise FileNotFoundError(f"{path} is not a reasonrl checkpoint (no state.json)")
    state = json.loads((path / "state.json").read_text())
    engine_state = torch.load(path / "engine.pt", weights_only=False)
    rng = torch.load(path / "rng.pt", weights_only=False)
    return state, engine_state, rng
