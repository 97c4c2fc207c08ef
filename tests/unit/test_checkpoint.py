"""Checkpoints: exact model / optimizer / RNG round trip, pruning to keep_last, and that temp or broken
directories are never taken for the latest checkpoint."""

from __future__ import annotations

import copy
import json
import random

import pytest
import torch

from reasonrl.engines.checkpoint import (
    checkpoint_dir,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from reasonrl.engines.single import SingleDeviceEngine

pytestmark = pytest.mark.timeout(120)


def _steps(run_dir) -> list[int]:
    return [int(p.name.split("_")[1]) for p in list_checkpoints(run_dir)]


def _trained_engine(model) -> SingleDeviceEngine:
    """An engine after one real optimizer step, so AdamW has non-trivial moments."""
    engine = SingleDeviceEngine(copy.deepcopy(model), lr=1e-3, warmup_steps=5)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    out = engine.model(input_ids=ids, labels=ids)
    out.loss.backward()
    engine.optimizer.step()
    engine.scheduler.step()
    engine.optimizer.zero_grad()
    return engine


def test_round_trip_model_optimizer_state(tmp_path, tiny_model_and_tokenizer):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = tiny_model_and_tokenizer
    engine = _trained_engine(model)
    path = save_checkpoint(
        tmp_path,
        7,
        engine.model,
        tok,
        engine.state_dict(),
        {"sampler": {"epoch": 1, "index": 3}},
        keep_last=2,
    )
    assert path == tmp_path / "checkpoints" / "step_000007"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "engine.pt", "rng.pt", "state.json"):
        assert (path / name).is_file(), name

    # model weights: exact, tied embeddings included
    loaded = AutoModelForCausalLM.from_pretrained(path)
    want = engine.model.state_dict()
    got = loaded.state_dict()
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k
    ids = torch.tensor([[2, 17, 8, 3]])
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, engine.model.eval()(input_ids=ids).logits)

    # tokenizer with its chat template
    tok2 = AutoTokenizer.from_pretrained(path)
    msgs = [{"role": "user", "content": "3+4="}]
    assert (
        tok2.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        == "<|user|>3+4=<|assistant|>"
    )
    assert tok2("12+3")["input_ids"] == tok("12+3")["input_ids"]
    assert (tok2.pad_token_id, tok2.eos_token_id) == (tok.pad_token_id, tok.eos_token_id)

    # trainer state and engine state
    state, engine_state, rng = load_checkpoint(path)
    assert state == {"step": 7, "sampler": {"epoch": 1, "index": 3}}
    fresh = SingleDeviceEngine(loaded, lr=1e-3, warmup_steps=5)
    fresh.load_state_dict(engine_state)
    sa, sb = engine.optimizer.state_dict(), fresh.optimizer.state_dict()
    assert sa["state"].keys() == sb["state"].keys() and len(sa["state"]) > 0
    for i in sa["state"]:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(sa["state"][i][key], sb["state"][i][key]), (i, key)
    assert sa["state"][0]["exp_avg"].abs().sum() > 0
    assert fresh.scheduler.get_last_lr() == engine.scheduler.get_last_lr() == [1e-3 * 2 / 5]
    assert set(rng) >= {"python", "torch"}


def test_rng_round_trip(tmp_path, tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    random.seed(1)
    torch.manual_seed(1)
    path = save_checkpoint(tmp_path, 1, model, None, {}, {}, keep_last=1)
    after_save = (random.random(), torch.rand(3))
    random.seed(99)
    torch.manual_seed(99)
    _, _, rng = load_checkpoint(path)
    set_rng_state(rng)
    again = (random.random(), torch.rand(3))
    assert after_save[0] == again[0]
    assert torch.equal(after_save[1], again[1])
    # and a fresh capture / restore works in memory too
    snap = rng_state()
    x = torch.rand(2)
    set_rng_state(snap)
    assert torch.equal(torch.rand(2), x)


def test_keep_last_prunes_oldest(tmp_path, tiny_model_and_tokenizer):
    model, _ = tiny_model_and_tokenizer
    for step in (1, 2, 10, 3):  # numeric order, not insertion or string order, decides
        save_checkpoint(tmp_path, step, model, None, {}, {"tag": step}, keep_last=2)
    assert _steps(tmp_path) == [3, 10]
    assert latest_checkpoint(tmp_path).name == "step_000010"
    assert sorted(p.name for p in checkpoint_dir(tmp_path).iterdir()) == ["step_000003", "step_000010"]


def test_pruning_keeps_the_last_valid_ones_the_protected_and_any_later_step(
    tmp_path, tiny_model_and_tokenizer
):
    """keep_last counts checkpoints that verify: a corrupt one (a torn copy, a full disk) never pushes
    a good one out, and is itself pruned once older than the new save; a protected step (the best) is
    kept besides them; a step later than the one saved (a run resumed from an earlier checkpoint) is
    not touched."""
    model, _ = tiny_model_and_tokenizer
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, step, model, None, {}, {}, keep_last=2, protect={1})
    assert _steps(tmp_path) == [1, 3, 4]
    weights = checkpoint_dir(tmp_path) / "step_000004" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])  # step 4 torn: it no longer verifies
    save_checkpoint(tmp_path, 5, model, None, {}, {}, keep_last=2, protect={1})
    assert _steps(tmp_path) == [1, 3, 5]  # 3 and 5 are the last two that verify; torn 4 is gone
    save_checkpoint(tmp_path, 2, model, None, {}, {}, keep_last=1)  # resumed from 1, saving 2 again
    assert _steps(tmp_path) == [2, 3, 5]  # nothing later than 2 is pruned; 1, unprotected now, is


def test_saving_a_step_again_replaces_it(tmp_path, tiny_model_and_tokenizer):
    model, _ = tiny_model_and_tokenizer
    save_checkpoint(tmp_path, 5, model, None, {}, {"v": 1}, keep_last=3)
    save_checkpoint(tmp_path, 5, model, None, {}, {"v": 2}, keep_last=3)
    assert _steps(tmp_path) == [5]
    assert load_checkpoint(latest_checkpoint(tmp_path))[0] == {"step": 5, "v": 2}


def test_latest_ignores_temp_and_incomplete_dirs(tmp_path, tiny_model_and_tokenizer):
    model, _ = tiny_model_and_tokenizer
    assert latest_checkpoint(tmp_path) is None  # no checkpoints dir at all
    save_checkpoint(tmp_path, 4, model, None, {}, {}, keep_last=5)
    root = checkpoint_dir(tmp_path)
    # a half-written temp dir from a crash (even one that already has its state.json)
    tmp = root / ".step_000009.abc123"
    tmp.mkdir()
    (tmp / "state.json").write_text(json.dumps({"step": 9}))
    # a final-looking dir without state.json, and a stray file
    (root / "step_000008").mkdir()
    (root / "step_000011").write_text("not a dir")
    assert latest_checkpoint(tmp_path).name == "step_000004"
    assert _steps(tmp_path) == [4]
    with pytest.raises(FileNotFoundError, match="no state.json"):
        load_checkpoint(root / "step_000008")


def test_failed_save_leaves_no_trace(tmp_path, tiny_model_and_tokenizer):
    model, _ = tiny_model_and_tokenizer
    save_checkpoint(tmp_path, 1, model, None, {}, {}, keep_last=2)
    before = sorted(p.name for p in checkpoint_dir(tmp_path).iterdir())
    with pytest.raises(Exception):  # noqa: B017 - pickling a lambda fails; the type is torch's business
        save_checkpoint(tmp_path, 2, model, None, {"bad": lambda: 0}, {}, keep_last=2)
    assert sorted(p.name for p in checkpoint_dir(tmp_path).iterdir()) == before == ["step_000001"]
    assert latest_checkpoint(tmp_path).name == "step_000001"


def test_latest_ignores_non_numeric_step_dirs(tmp_path, tiny_model_and_tokenizer):
    model, _ = tiny_model_and_tokenizer
    save_checkpoint(tmp_path, 4, model, None, {}, {}, keep_last=5)
    backup = checkpoint_dir(tmp_path) / "step_000004.bak"
    backup.mkdir()
    (backup / "state.json").write_text(json.dumps({"step": 4}))
    assert latest_checkpoint(tmp_path).name == "step_000004"


@pytest.mark.parametrize("mode", ["max", "min"])
def test_keep_best_records_each_strict_improvement_and_nothing_else(mode):
    from types import SimpleNamespace

    from reasonrl.trainer.state import is_new_best

    cfg = SimpleNamespace(checkpoint=SimpleNamespace(keep_best="eval/acc", best_mode=mode))
    run = SimpleNamespace(best=None)
    sign = 1 if mode == "max" else -1
    seen = []
    for step, value in [
        (0, 9.0),
        (1, float("nan")),
        (2, 0.5),
        (3, 0.5),
        (4, 0.4),
        (5, 0.7),
        (6, None),
        (7, 0.6),
    ]:
        metrics = {} if value is None else {"eval/acc": value if value != value else sign * value}
        seen.append(is_new_best(run, cfg, step, metrics))
    # step 0 (before training) and a NaN never count; equal is not better; a missing metric is skipped
    assert seen == [False, False, True, False, False, True, False, False]
    assert run.best == {"metric": "eval/acc", "step": 5, "value": sign * 0.7}
    cfg.checkpoint.keep_best = None
    assert is_new_best(run, cfg, 9, {"eval/acc": sign * 5.0}) is False


def test_every_file_is_fsynced_before_the_manifest_and_the_rename_is_fsynced_last(
    tmp_path, tiny_model_and_tokenizer, monkeypatch
):
    """Durability order: each file, then complete.json, then its directory, then (after the rename) the
    checkpoints directory; no descriptor is left open."""
    import os

    import reasonrl.engines.checkpoint as ck

    model, tok = tiny_model_and_tokenizer
    synced, real = [], os.fsync
    monkeypatch.setattr(
        ck.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))
    )
    open_before = len(os.listdir("/proc/self/fd"))
    path = save_checkpoint(tmp_path, 3, model, tok, {"x": 1}, {"sampler": {}}, keep_last=2)
    assert len(os.listdir("/proc/self/fd")) == open_before
    root = str(checkpoint_dir(tmp_path))
    assert synced[-1] == root
    tmp_dir = synced[-2]
    assert os.path.dirname(tmp_dir) == root and os.path.basename(tmp_dir).startswith(".step_000003.")
    assert synced[-3] == f"{tmp_dir}/complete.json"
    files = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()} - {"complete.json"}
    assert {os.path.relpath(s, tmp_dir) for s in synced[:-3]} == files and len(synced) == len(files) + 3
