"""The wandb backend in offline mode (no network): a training run creates wandb's run files under the
run directory with our metric names and config in them, and a resumed run continues the same wandb run
(same id), with its steps plotted against our own `step` metric."""

from __future__ import annotations

import pytest
from test_train_loop import _cfg

from reasonrl.config import ConfigError, load_config
from reasonrl.trainer.loop import train

pytest.importorskip("wandb")


@pytest.fixture(autouse=True, scope="module")
def _wandb_service_stopped():
    """wandb keeps its service process (wandb-core) until the process that started it exits: stop it
    with the module, like the process that runs `reasonrl train` does by exiting."""
    yield
    import wandb

    wandb.teardown()


def test_offline_wandb_run_files_and_resume(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    run = tmp_path / "run"
    opts = ("log.wandb=true", "log.wandb_mode=offline", "log.wandb_project=rr-test", "checkpoint.every=1")
    train(_cfg(tiny_model_dir, run, 2, *opts), log=lambda *a: None)
    run_id = (run / "wandb_run_id").read_text().strip()
    (first,) = sorted((run / "wandb").glob("offline-run-*"))
    record = first / f"run-{run_id}.wandb"
    data = record.read_bytes()
    for key in (b"reward/mean", b"actor/entropy", b"eval/accuracy", b"rr-test", b"step"):
        assert key in data, key
    assert b"clip_low" in data  # the resolved config went with it
    train(_cfg(tiny_model_dir, run, 3, *opts), resume=True, log=lambda *a: None)
    runs = sorted((run / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and (run / "wandb_run_id").read_text().strip() == run_id
    assert (runs[1] / f"run-{run_id}.wandb").is_file()  # the same wandb run, continued


def test_wandb_mode_is_checked():
    with pytest.raises(ConfigError, match="log.wandb_mode='cloud'"):
        load_config(None, ["log.wandb_mode=cloud"])
