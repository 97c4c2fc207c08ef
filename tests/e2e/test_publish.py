"""Export with a model card, the Hub upload (against a local stand-in server), `--with-optimizer`, and
`hub.push` at the end of training: the folder loads with transformers and gives the checkpoint's
logits, the card carries the curves, the eval table and the recipe, the uploaded bytes equal the
folder's, and training_state/ rebuilds a checkpoint that verifies and resumes."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import yaml
from hub_standin import HubStandIn
from test_eval_runner import _data
from test_train_loop import _cfg

from reasonrl.cli.main import main
from reasonrl.config import ConfigError
from reasonrl.engines.checkpoint import list_checkpoints, verify_checkpoint
from reasonrl.trainer.loop import train


@pytest.fixture
def hub(monkeypatch):
    h = HubStandIn()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_TOKEN", "hf_standin_token")
    yield h
    h.close()


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_export_card_optimizer_and_push(tiny_model_dir, tmp_path, hub, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = tmp_path / "run"
    train(_cfg(tiny_model_dir, run, 2, "checkpoint.every=1", "name=card-test"), log=lambda *a: None)
    data = _data(tmp_path, n_problems=3)
    assert main(["eval", str(run), "--benchmarks", "gsm8k", "--data-dir", str(data), "--n", "1",
                 "--max-new-tokens", "4", "--device", "cpu"]) == 0  # fmt: skip
    results = json.loads((run / "eval" / "step_000002" / "results.json").read_text())  # the run's default out
    capsys.readouterr()
    out = tmp_path / "export"
    assert main(["export", str(run), str(out), "--with-optimizer", "--push-to-hub", "me/card-test"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["step"] == 2 and printed["hub"]["repo"] == "me/card-test"

    ckpt = list_checkpoints(run)[-1]
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    ref = AutoModelForCausalLM.from_pretrained(ckpt).eval()
    ids = AutoTokenizer.from_pretrained(out)("1+2=", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref(ids).logits)

    card = (out / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["library_name"] == "transformers" and {"reasonrl", "grpo", "ppo_clip"} <= set(meta["tags"])
    assert "# card-test" in card and "![training curves](training_curves.png)" in card
    assert (out / "training_curves.png").stat().st_size > 5_000
    g = results["benchmarks"]["gsm8k"]
    assert f"| gsm8k | {g['problems']} | {g['n']} | {g['mean@n']:.4f} |" in card  # this checkpoint's eval
    recipe = yaml.safe_load(card.split("```yaml\n")[1].split("```")[0])
    assert recipe == json.loads((ckpt / "state.json").read_text())["config"]

    # the upload: a private repo, one commit, the folder byte for byte
    private = [
        c.get("private", c.get("visibility") == "private") for c in hub.created
    ]  # by hub client version
    assert [(c["name"], c.get("organization")) for c in hub.created] == [("card-test", "me")] and private == [
        True
    ]
    assert hub.validated == [meta]  # the card's metadata went through the Hub's YAML check
    assert all(auth == "Bearer hf_standin_token" for _, _, auth in hub.requests)
    assert len(hub.commits) == 1 and hub.repos["me/card-test"] == _files(out)

    # training_state/ + the top-level model files rebuild the checkpoint: it verifies and resumes
    state = out / "training_state"
    assert (state / "engine.pt").is_file() and (state / "complete.json").is_file()
    assert not (state / "model.safetensors").exists()  # identical to the top level: not stored twice
    rebuilt = tmp_path / "resumed" / "checkpoints" / ckpt.name
    shutil.copytree(out, rebuilt, ignore=shutil.ignore_patterns("training_state"))
    shutil.copytree(state, rebuilt, dirs_exist_ok=True)
    assert verify_checkpoint(rebuilt) is None
    opts = ("checkpoint.every=1", "name=card-test")
    shutil.copy(run / "config.yaml", tmp_path / "resumed" / "config.yaml")
    hist = train(_cfg(tiny_model_dir, tmp_path / "resumed", 3, *opts), resume=True, log=lambda *a: None)[
        "history"
    ]
    assert [r["step"] for r in hist if r["step"] >= 3] == [3]


def test_push_at_the_end_of_training_and_a_failed_upload(tiny_model_dir, tmp_path, hub, monkeypatch, capsys):
    run = tmp_path / "run"
    out = train(_cfg(tiny_model_dir, run, 2, "hub.push=true", "hub.repo=org/final"), log=lambda *a: None)
    assert out["hub"]["repo"] == "org/final"
    folder = run / "hub_export" / "step_000002"
    assert hub.repos["org/final"] == _files(folder) and "README.md" in hub.repos["org/final"]
    with pytest.raises(ConfigError, match="hub.push=true: hub.repo: '' is not a Hub repository id"):
        _cfg(tiny_model_dir, tmp_path / "r2", 2, "hub.push=true")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: the upload fails
    from reasonrl.errors import InputError

    with pytest.raises(
        InputError, match="upload of .* to org/final failed .* the run and its checkpoints are saved"
    ):
        train(
            _cfg(tiny_model_dir, tmp_path / "r3", 2, "hub.push=true", "hub.repo=org/final"),
            log=lambda *a: None,
        )
    assert verify_checkpoint(list_checkpoints(tmp_path / "r3")[-1]) is None
    # `reasonrl export --push-to-hub` with the upload failing: one line, the export kept (before: a traceback)
    capsys.readouterr()
    assert main(["export", str(tmp_path / "r3"), str(tmp_path / "exp"), "--push-to-hub", "org/final"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"reasonrl: error: --push-to-hub: upload of {tmp_path / 'exp'} to org/final failed ("
    )
    assert err.strip().endswith(f"the export is in {tmp_path / 'exp'}; retry with: huggingface-cli upload org/final "
                                f"{tmp_path / 'exp'}") and (tmp_path / "exp" / "config.json").is_file()  # fmt: skip
