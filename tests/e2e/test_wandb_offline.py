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
    # each step's sampled rollouts as a table, one row per completion of rollouts.jsonl
    import json

    tables = sorted((first / "files" / "media" / "table").glob("rollouts_*.table.json"))
    logged = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(tables) == 2 and b"rollouts" in data
    table = json.loads(tables[0].read_text())
    step_rows = [c for g in logged if g["step"] == table["data"][0][0] for c in g["completions"]]
    assert table["columns"][:5] == ["step", "data_source", "prompt", "ground_truth", "completion"]
    assert [r[4] for r in table["data"]] == [c["text"] for c in step_rows]
    assert [r[5] for r in table["data"]] == [c["reward"] for c in step_rows]
    train(_cfg(tiny_model_dir, run, 3, *opts), resume=True, log=lambda *a: None)
    runs = sorted((run / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and (run / "wandb_run_id").read_text().strip() == run_id
    assert (runs[1] / f"run-{run_id}.wandb").is_file()  # the same wandb run, continued


def test_wandb_mode_is_checked():
    with pytest.raises(ConfigError, match="log.wandb_mode='cloud'"):
        load_config(None, ["log.wandb_mode=cloud"])


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    """wandb finds no API key: none in the environment, no .netrc, no settings file of its own."""
    for var in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("HOME", str(tmp_path))


def test_online_logging_that_cannot_work_is_refused_before_any_work(tiny_model_dir, tmp_path, monkeypatch,
                                                                    no_credentials):  # fmt: skip
    """Before: wandb's traceback once the model had loaded (no key), or after 90 s of retries (no network)."""
    import os
    import socket
    import subprocess
    import sys

    from reasonrl.errors import InputError
    from reasonrl.trainer.wandb_log import check_online

    for mode in ("offline", "disabled"):  # nothing to check: nothing leaves the machine
        check_online(mode)
    monkeypatch.setenv("WANDB_MODE", "offline")
    check_online("")  # the mode wandb would take from its environment
    monkeypatch.delenv("WANDB_MODE")
    with pytest.raises(InputError, match=r"wandb has no API key here: run `wandb login` or set WANDB_API_KEY; or "
                                         r"log.wandb_mode=offline logs to RUN_DIR/wandb"):  # fmt: skip
        check_online("")
    monkeypatch.setenv("WANDB_API_KEY", "short")
    with pytest.raises(InputError, match="WANDB_API_KEY invalid"):
        check_online("online")
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef" * 3)
    with socket.socket() as closed:  # bound, never listening: refuses connections
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
        with pytest.raises(InputError, match=rf"the W&B server \(127.0.0.1:{port}\) cannot be reached from here; "
                                             "log.wandb_mode=offline"):  # fmt: skip
            check_online("online")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
        check_online("online")  # a key and a server that answers: the run goes on

    # the whole command: one line, exit 2, and nothing written (the run directory holds only its lock)
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    run = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "reasonrl", "train", "recipes/demo.yaml", f"model.path={tiny_model_dir}",
                          f"log.run_dir={run}", "log.wandb=true", "train.steps=1", "log.progress=false"],
                         capture_output=True, text=True, env={**env, "OMP_NUM_THREADS": "1"}, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))  # fmt: skip
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1].startswith("reasonrl: error: log.wandb=true logs online to ")
    assert "Traceback" not in res.stderr and [p.name for p in run.iterdir()] == [".lock"]


def test_a_failing_wandb_init_is_one_line(tmp_path, monkeypatch):
    import wandb

    from reasonrl.errors import InputError
    from reasonrl.trainer.wandb_log import WandbLog

    def refuse(**kwargs):
        raise wandb.errors.CommError('Timed out while retrying: Post "https://x/graphql": no such host\nmore')

    monkeypatch.setattr(wandb, "init", refuse)
    with pytest.raises(InputError) as e:
        WandbLog(tmp_path, "p", None, "online", "n", {}, resume=False)
    assert str(e.value) == ('log.wandb=true: wandb could not start its run (CommError: Timed out while retrying: '
                            'Post "https://x/graphql": no such host); log.wandb_mode=offline logs to RUN_DIR/wandb '
                            'without the network (upload later: `wandb sync`)')  # fmt: skip
