"""The CLI turns every expected error into one line `reasonrl: error: ...` with exit status 2, before
any work; `--debug` shows the traceback instead."""

from __future__ import annotations

import errno

import pytest

from reasonrl.cli import main as cli


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["eval", "/nonexistent/model"], "model path not found: /nonexistent/model"),
        (["eval", "demo", "--n", "0"], "--n must be >= 1, got 0"),
        (["eval", "demo", "--data"], "--data needs at least one parquet / jsonl / json file"),
        (["eval"], "eval needs a MODEL"),
        (["eval", "compare", "a/results.json"], "eval compare needs two results.json files"),
        (["train", "no_such_recipe.yaml"], "recipe file not found: no_such_recipe.yaml"),
        (["train", "train.grad_clip=-1"], "train.grad_clip must be > 0"),
        (["train", "train.lr=nan"], "train.lr=nan is not a finite number"),
        (["train", "log.run_dir=/dev/null/x"], "/dev/null"),
    ],
)
def test_expected_errors_are_one_line_with_exit_2(capsys, argv, needle):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("reasonrl: error: ") and err.count("\n") == 1 and needle in err, err
    assert "Traceback" not in err


def test_eval_directories_without_model_or_tokenizer_are_named(tmp_path, capsys):
    assert cli.main(["eval", str(tmp_path)]) == 2
    assert f"{tmp_path} is not a Hugging Face model directory (no config.json)" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    assert cli.main(["eval", str(tmp_path)]) == 2
    assert f"{tmp_path} has no tokenizer" in capsys.readouterr().err


def test_eval_of_a_run_directory_uses_its_newest_valid_checkpoint(tmp_path, tiny_model_and_tokenizer):
    from reasonrl.engines.checkpoint import save_checkpoint

    model, tok = tiny_model_and_tokenizer
    for step in (1, 2):
        save_checkpoint(tmp_path, step, model, tok, {}, {"sampler": {}}, keep_last=5)
    (tmp_path / "checkpoints" / "step_000002" / "rng.pt").write_bytes(b"")  # the newest is corrupt
    assert cli._eval_model_path(str(tmp_path)) == str(tmp_path / "checkpoints" / "step_000001")


def test_list_benchmarks_names_every_benchmark_its_sampling_and_the_suites(capsys):
    from reasonrl.eval.benchmarks import BENCHMARKS, SUITES

    assert cli.main(["eval", "--list-benchmarks"]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    assert set(BENCHMARKS.names()) <= set(rows)
    assert "| aime24 | math | 16 | 0.6 | 0.95 | 32768 | aime24*.parquet" in rows["aime24"]
    assert "| gsm8k | math | 1 | 0.0 |" in rows["gsm8k"] and "| generated |" in rows["rg_countdown"]
    for name, members in SUITES.items():
        assert f"  {name}: {', '.join(members)}" in out


def test_debug_shows_the_traceback():
    with pytest.raises(Exception, match="train.lr=nan is not a finite number"):
        cli.main(["--debug", "train", "train.lr=nan"])


def test_a_full_disk_names_the_file(monkeypatch, capsys):
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "runs/x/metrics.jsonl")

    import reasonrl.cli.data as data_cli

    monkeypatch.setattr(data_cli, "cmd_generate", full)
    assert cli.main(["data", "generate", "addsub", "--out", "out.jsonl"]) == 2
    assert (
        capsys.readouterr().err
        == "reasonrl: error: no space left on device while writing runs/x/metrics.jsonl\n"
    )


def test_real_bugs_keep_their_traceback(monkeypatch):
    def bug(args):
        raise KeyError("a real bug")

    import reasonrl.cli.data as data_cli

    monkeypatch.setattr(data_cli, "cmd_generate", bug)
    with pytest.raises(KeyError):
        cli.main(["data", "generate", "addsub", "--out", "out.jsonl"])
