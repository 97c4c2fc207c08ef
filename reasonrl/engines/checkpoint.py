"""Checkpoints: model in Hugging Face format + optimizer + RNG states + trainer state, atomically.

Layout: `<run_dir>/checkpoints/step_000010/` holding the HF model (safetensors, config, tokenizer),
`engine.pt` (optimizer + scheduler), `rng.pt` (python / torch / cuda RNG states) and `state.json`
(step, data-sampler position, anything the trainer adds), and `complete.json`, written last: every
file's size and the sha256 of the small ones. Everything is written to a temp directory, fsynced
(files, then the directory), renamed, and the parent directory fsynced, so a crash mid-write never
leaves a half checkpoint; only the newest `keep_last` valid ones are kept. `latest_valid_checkpoint`
verifies against `complete.json` and falls back to an older one, naming the bad file;
`run_checkpoint` is what a run directory stands for where a model is expected (eval, export), and
`best_checkpoint` the one its `checkpoints/best.json` names (`--best`).

Owns: the layout, atomic save, verification, listing / pruning and loading of those files, leftover
temp directories, and RNG capture.
Does not own: when to save or what the trainer state holds (`trainer`), or the optimizer state
itself (the engine's `state_dict`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

PREFIX = "step_"
MARKER = "complete.json"
_HASH_LIMIT = 64 << 20  # files up to this size are hashed; larger ones (weights, optimizer) by size


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


def verify_checkpoint(path: str | Path) -> str | None:
    """None if the checkpoint at `path` is complete and intact, else what is wrong (naming the file)."""
    path = Path(path)
    try:
        manifest = json.loads((path / MARKER).read_text())
        files, hashes = manifest["files"], manifest["sha256"]
        if not isinstance(files, dict) or not isinstance(hashes, dict):
            raise TypeError("files and sha256 must be mappings")
    except FileNotFoundError:
        return f"{path / MARKER} is missing (the save never finished)"
    except (ValueError, KeyError, TypeError) as e:
        return f"{path / MARKER} is unreadable ({type(e).__name__})"
    for name, size in files.items():
        f = path / name
        if not f.is_file():
            return f"{f} is missing"
        if f.stat().st_size != size:
            return f"{f} has {f.stat().st_size} bytes, {size} were written"
        if name in hashes and _sha256(f) != hashes[name]:
            return f"{f} is corrupt (sha256 mismatch)"
    return None


def latest_valid_checkpoint(run_dir: str | Path, warn: Callable[[str], None] = print) -> Path | None:
    """The newest checkpoint that verifies; each newer bad one is reported through `warn`."""
    for path in reversed(list_checkpoints(run_dir)):
        problem = verify_checkpoint(path)
        if problem is None:
            return path
        warn(f"warning: skipping checkpoint {path.name}: {problem}")
    return None


def run_checkpoint(path: str | Path, warn: Callable[[str], None] = print) -> Path | None:
    """The checkpoint a run directory stands for (its newest valid one), None if `path` is not a run
    directory; InputError for a run with no checkpoint yet or none that verifies (export, eval)."""
    from reasonrl.errors import InputError

    path = Path(path)
    if list_checkpoints(path):
        ckpt = latest_valid_checkpoint(path, warn)
        if ckpt is None:
            raise InputError(f"run directory {path} has no valid checkpoint")
        return ckpt
    if checkpoint_dir(path).is_dir() or (path / "metrics.jsonl").is_file():
        raise InputError(f"run directory {path} has no checkpoint yet (a run saves one every checkpoint.every "
                         "steps and at its last step)")  # fmt: skip
    return None


def best_checkpoint(run_dir: str | Path) -> Path:
    """The checkpoint `checkpoints/best.json` names (a run trained with `checkpoint.keep_best`; the
    trainer writes the file with each new best's checkpoint); InputError when the run has none or it
    no longer verifies (`--best` of eval and export)."""
    from reasonrl.errors import InputError

    run = Path(run_dir)
    if not list_checkpoints(run):
        raise InputError(f"--best: {run} is not a run directory with checkpoints")
    record = checkpoint_dir(run) / "best.json"
    try:
        name = json.loads(record.read_text())["checkpoint"]
    except FileNotFoundError:
        raise InputError(f"--best: {record} not found: the run kept no best checkpoint "
                         "(train with checkpoint.keep_best=METRIC)") from None  # fmt: skip
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
        raise InputError(f"--best: {record} does not name a checkpoint") from None
    ckpt = checkpoint_dir(run) / str(name)
    if not re.fullmatch(rf"{PREFIX}\d+", str(name)) or not ckpt.is_dir():
        raise InputError(f"--best: {record} names {name!r}, which is not a checkpoint of the run")
    if (problem := verify_checkpoint(ckpt)) is not None:
        raise InputError(f"--best: {ckpt}: {problem}")
    return ckpt


def remove_temp_dirs(run_dir: str | Path) -> list[Path]:
    """Delete half-written checkpoint directories that a crash left behind; returns what was removed."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(f".{PREFIX}")]
    for p in found:
        shutil.rmtree(p, ignore_errors=True)
    return found


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _seal(tmp: Path) -> None:
    """fsync every file, then write the manifest (last), then fsync the directory."""
    files = {}
    for f in sorted(p for p in tmp.rglob("*") if p.is_file()):
        _fsync(f)
        files[str(f.relative_to(tmp))] = f.stat().st_size
    hashes = {name: _sha256(tmp / name) for name, size in files.items() if size <= _HASH_LIMIT}
    marker = tmp / MARKER
    marker.write_text(json.dumps({"files": files, "sha256": hashes}, indent=1))
    _fsync(marker)
    _fsync(tmp)


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
    run_dir,
    step: int,
    model,
    tokenizer,
    engine_state: dict,
    state: dict,
    keep_last: int,
    protect=(),
    model_state: dict | None = None,
    tmp: Path | None = None,
    manifest: dict | None = None,
    lora_state: dict | None = None,
    weights_written: bool = False,
) -> Path:
    """protect: steps never pruned (the best checkpoint). model_state: the full tensors to write
    instead of the model's own state dict (a sharded model's, gathered by the caller). tmp: a
    directory from `new_checkpoint_dir` that other ranks already wrote their shards into. lora_state: a
    sharded LoRA policy's live state gathered in full (model_state is then its merged weights).
    weights_written: the weight files and config are already in `tmp` (`engines.hf_shards`)."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{PREFIX}{step:06d}"
    tmp = Path(tmp) if tmp is not None else new_checkpoint_dir(run_dir, step)
    try:
        if weights_written:
            pass
        elif hasattr(model, "peft_config"):
            _save_lora(model, tokenizer, tmp, live=lora_state, merged=model_state)
        else:
            model.save_pretrained(tmp, safe_serialization=True, state_dict=model_state)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        torch.save(engine_state, tmp / "engine.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps({"step": step, **state}, indent=1))
        if manifest is not None:  # what produced these weights (trainer.manifest)
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
        _seal(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        _fsync(root)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    valid = [p for p in list_checkpoints(run_dir) if verify_checkpoint(p) is None]
    keep = set(valid[-keep_last:]) | {p for p in valid if int(p.name[len(PREFIX) :]) in set(protect)}
    for old in list_checkpoints(run_dir):
        if old not in keep and int(old.name[len(PREFIX) :]) < step:
            shutil.rmtree(old, ignore_errors=True)
    return target


def new_checkpoint_dir(run_dir, step: int) -> Path:
    """A fresh temporary directory beside the checkpoints, renamed into place by `save_checkpoint`."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{PREFIX}{step:06d}.", dir=root))


def _save_lora(model, tokenizer, tmp: Path, live: dict | None = None, merged: dict | None = None) -> None:
    """A LoRA policy: its live state (base + adapters, for exact resume) in model.safetensors, the peft
    adapter in adapter/, and a merged Hugging Face model in merged/ (for eval, serving, vLLM). `live` /
    `merged`: those tensors already gathered in full (an FSDP2-sharded model; see trainer.state)."""
    from safetensors.torch import save_file

    from reasonrl.engines.weights import full_weights

    own = model.state_dict()
    state, seen = {}, set()
    for name, t in own.items():
        ptr = getattr(t, "_local_tensor", t).data_ptr()
        if ptr not in seen:  # tied tensors once (safetensors refuses shared storage)
            seen.add(ptr)
            state[name] = (live[name] if live is not None else t).detach().contiguous().cpu()
    save_file(state, str(tmp / "model.safetensors"))
    model.save_pretrained(tmp / "adapter", state_dict=live)  # None: peft reads the model's own
    model.get_base_model().save_pretrained(
        tmp / "merged",
        state_dict=merged if merged is not None else full_weights(model),
        safe_serialization=True,
    )
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "merged")


def load_checkpoint(path: str | Path) -> tuple[dict, dict, dict]:
    """(state, engine_state, rng) of a checkpoint directory; the model is loaded from the same path."""
    path = Path(path)
    if not (path / "state.json").is_file():
        raise FileNotFoundError(f"{path} is not a reasonrl checkpoint (no state.json)")
    state = json.loads((path / "state.json").read_text())
    engine_state = torch.load(path / "engine.pt", weights_only=False)
    rng = torch.load(path / "rng.pt", weights_only=False)
    return state, engine_state, rng
