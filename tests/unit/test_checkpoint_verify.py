"""Checkpoint verification without a model: a sealed directory verifies; a missing, resized or changed
file and a manifest of any damaged shape are reported naming the file (a resume then falls back to an
older checkpoint), never raised."""

from __future__ import annotations

import json

import pytest

from reasonrl.engines.checkpoint import MARKER, _seal, latest_valid_checkpoint, verify_checkpoint


def _sealed(root, step: int):
    path = root / "checkpoints" / f"step_{step:06d}"
    (path / "model").mkdir(parents=True)
    (path / "state.json").write_text(json.dumps({"step": step}))
    (path / "model" / "weights.bin").write_bytes(bytes(range(256)) * 4)
    _seal(path)
    return path


def test_a_sealed_checkpoint_verifies_and_each_kind_of_damage_is_named(tmp_path):
    path = _sealed(tmp_path, 1)
    assert verify_checkpoint(path) is None
    manifest = json.loads((path / MARKER).read_text())
    assert manifest["files"] == {"model/weights.bin": 1024, "state.json": 11}  # {"step": 1}
    weights = path / "model" / "weights.bin"
    weights.write_bytes(bytes(1024))  # same size, other bytes
    assert verify_checkpoint(path) == f"{weights} is corrupt (sha256 mismatch)"
    weights.write_bytes(bytes(10))
    assert verify_checkpoint(path) == f"{weights} has 10 bytes, 1024 were written"
    weights.unlink()
    assert verify_checkpoint(path) == f"{weights} is missing"


@pytest.mark.parametrize(
    "manifest",
    ["", "{", "[]", "5", '{"files": {}}', '{"files": [], "sha256": {}}', '{"files": {}, "sha256": []}',
     '{"files": "x", "sha256": {}}', '{"files": null, "sha256": null}'],
)  # fmt: skip
def test_a_damaged_manifest_is_named_not_raised_and_an_older_checkpoint_is_used(tmp_path, manifest):
    old = _sealed(tmp_path, 1)
    new = _sealed(tmp_path, 2)
    (new / MARKER).write_text(manifest)
    problem = verify_checkpoint(new)
    assert problem is not None and problem.startswith(f"{new / MARKER} is unreadable (")
    warnings = []
    assert latest_valid_checkpoint(tmp_path, warn=warnings.append) == old
    assert warnings == [f"warning: skipping checkpoint step_000002: {problem}"]
    (new / MARKER).unlink()
    assert verify_checkpoint(new) == f"{new / MARKER} is missing (the save never finished)"
