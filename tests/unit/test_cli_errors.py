"""The CLI turns every expected error into one line `reasonrl: error: ...` with exit status 2, before
any work; `--debug` shows the traceback instead."""

from __future__ import annotations

import errno

import pytest

from reasonrl.cli import main as cli

PASSRATE = ["data", "passrate", "x.parquet", "--model", "demo", "--out", "y.parquet"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["eval", "/nonexistent/model"], "model path not found: /nonexistent/model"),
        (["eval", "demo", "--n", "0"], "--n must be >= 1, got 0"),
        # before: accepted (a negative temperature ran greedy, top-p 1.5 ran, NaN failed in transformers
        # after the model loaded, an empty --benchmarks evaluated the built-in task instead)
        (
            ["eval", "demo", "--temperature", "-1"],
            "--temperature must be a number >= 0 (0: greedy), got -1.0",
        ),
        (
            ["eval", "demo", "--benchmarks", "gsm8k", "--temperature", "nan"],
            "--temperature must be a number >= 0",
        ),
        (["eval", "demo", "--benchmarks", "gsm8k", "--top-p", "1.5"], "--top-p must be in (0, 1], got 1.5"),
        (["eval", "demo", "--top-p", "0"], "--top-p must be in (0, 1], got 0.0"),
        (["eval", "demo", "--benchmarks", "gsm8k", "--top-p", "nan"], "--top-p must be in (0, 1], got nan"),
        (["eval", "demo", "--benchmarks", " , "], "--benchmarks names no benchmark (see --list-benchmarks)"),
        # before: ValueError / RuntimeError tracebacks
        (
            ["eval", "demo", "--task", "nope"],
            "--task='nope' is not a valid choice; valid: addsub, arithmetic",
        ),
        (["eval", "demo", "--size", "4", "--device", "tpu"], "device 'tpu': not a torch device"),
        (["eval", "demo", "--data"], "--data needs at least one parquet / jsonl / json file"),
        (["eval", "demo", "--verifier", "math"], "--verifier applies to the rows of --data files"),
        (
            ["eval", "demo", "--benchmarks", "gsm8k", "--verifier", "math"],
            "--verifier applies to the rows of --data",
        ),
        (
            ["eval", "demo", "--data", "x.jsonl", "--verifier", "nope"],
            "--verifier 'nope': no such verifier; known:",
        ),
        ([*PASSRATE, "--verifier", "nope"], "--verifier 'nope': no such verifier; known:"),
        ([*PASSRATE, "--engine", "nope"], "--engine 'nope' is not a rollout engine; known: hf"),
        (["eval"], "eval needs a MODEL"),
        (["eval", "compare", "a/results.json"], "eval compare needs two results.json files"),
        (["train", "no_such_recipe.yaml"], "recipe file not found: no_such_recipe.yaml"),
        (["train", "train.grad_clip=-1"], "train.grad_clip must be > 0"),
        (["train", "train.lr=nan"], "train.lr=nan is not a finite number"),
        (["train", "log.run_dir=/dev/null/x"], "/dev/null"),
        (
            ["plan", "model.path=demo", "--device-memory", "-1"],
            "--device-memory must be a finite number > 0 (GiB), got -1.0",
        ),
        (
            ["plan", "model.path=demo", "--device-memory", "inf"],
            "--device-memory must be a finite number > 0 (GiB), got inf",
        ),
        (["plan", "model.path=demo", "--prompt-tokens", "0"], "--prompt-tokens must be >= 1, got 0"),
        (["plan", "grpo", "model.path=/no/such/model"], "model path not found: /no/such/model"),
        (["train", "dapo", "model.path=./no/such/model"], "model path not found: ./no/such/model"),
        (
            [
                "data",
                "filter",
                "x.parquet",
                "--out",
                "y.parquet",
                "--max-prompt-tokens",
                "0",
                "--tokenizer",
                "t",
            ],
            "--max-prompt-tokens must be >= 1, got 0",
        ),
        (
            ["data", "generate", "countdown", "--out", "x.parquet", "--size", "0"],
            "--size must be >= 1, got 0",
        ),
        (
            ["data", "dedup", "x.parquet", "--out", "y.parquet", "--threshold", "2"],
            "--threshold must be in (0, 1]",
        ),
        (
            ["data", "dedup", "x.parquet", "--out", "y.parquet", "--threshold", "0"],
            "--threshold must be in (0, 1]",
        ),
        ([*PASSRATE, "--correct-threshold", "1.5"], "--correct-threshold must be in (0, 1], got 1.5"),
        ([*PASSRATE, "--top-p", "2"], "--top-p must be in (0, 1], got 2.0"),
        ([*PASSRATE, "--max-new-tokens", "0"], "--max-new-tokens must be >= 1, got 0"),
        # verifier options, as a recipe's reward.options: checked before the data or the model
        (
            [*PASSRATE, "--verifier-option", "math=1"],
            "--verifier-option 'math=1': expected VERIFIER.KEY=VALUE",
        ),
        (
            ["eval", "demo", "--benchmarks", "gsm8k", "--verifier-option", "math.nope=1"],
            "--verifier-option math: verifier 'math' has no option(s) 'nope'; valid: float_rounding,",
        ),
        (
            [*PASSRATE, "--verifier-option", "nope.x=1"],
            "--verifier-option nope: unknown verifier 'nope'; known:",
        ),
        (
            [*PASSRATE, "--verifier-option", "math.accept_unevaluated=yes"],
            "option 'accept_unevaluated' of 'math' must be true or false, got 'yes'",
        ),
    ],
)
def test_expected_errors_are_one_line_with_exit_2(capsys, argv, needle, tmp_path, monkeypatch):
    """With an empty model cache: no model is built or loaded before the error (before: `eval demo --device
    tpu` and `eval demo --task nope` built the demo model first, its progress bar ahead of the error)."""
    monkeypatch.setenv("REASONRL_CACHE", str(tmp_path / "cache"))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("reasonrl: error: ") and err.count("\n") == 1 and needle in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_train_on_a_model_that_does_not_load_is_one_line(tmp_path, capsys, tiny_model_and_tokenizer):
    """Before: transformers' OSError as a traceback, for the weights after everything else loaded."""
    runs = f"log.run_dir={tmp_path / 'run'}"
    assert cli.main(["train", f"model.path={tmp_path / 'none'}", runs]) == 2
    assert f"model path not found: {tmp_path / 'none'}" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["train", f"model.path={tmp_path / 'empty'}", runs]) == 2
    assert f"model directory {tmp_path / 'empty'} has no config.json" in capsys.readouterr().err
    model, tok = tiny_model_and_tokenizer
    model.config.save_pretrained(tmp_path / "no_weights")
    tok.save_pretrained(tmp_path / "no_weights")
    assert cli.main(["train", f"model.path={tmp_path / 'no_weights'}", runs, "train.steps=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"reasonrl: error: model {tmp_path / 'no_weights'}: cannot load its weights ("
    ) and ("model.safetensors" in err and "Traceback" not in err and err.count("\n") == 1), err


def test_eval_of_a_run_without_validation_problems_is_an_error_not_a_zero_score(tmp_path, capsys,
                                                                                tiny_model_and_tokenizer):  # fmt: skip
    """A run trained on a reasoning-gym mixture has no held-out set of its own (before: "problems": 0,
    "mean_score": 0.0)."""
    import json

    from reasonrl.config import load_config, to_dict

    model, tok = tiny_model_and_tokenizer
    ckpt = tmp_path / "checkpoints" / "step_000001"
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    cfg = load_config(None, ["data.mixture=[{name: g, weight: 1, reasoning_gym: 'leg_counting:1'}]"])
    (ckpt / "state.json").write_text(json.dumps({"step": 1, "config": to_dict(cfg)}))
    assert cli.main(["eval", str(ckpt)]) == 2
    assert "its run has no validation problems" in capsys.readouterr().err


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


@pytest.mark.parametrize("command", ["eval", "export"])
def test_a_run_directory_without_a_usable_checkpoint_is_named_as_such(command, tmp_path, capsys,
                                                                      tiny_model_and_tokenizer):  # fmt: skip
    """A run that saved no checkpoint yet, then one whose only checkpoint is corrupt: each named as a run
    directory (before: "no config.json (not a model checkpoint)", as if it were a model directory)."""
    from reasonrl.engines.checkpoint import save_checkpoint

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    argv = [command, str(run)] + ([str(tmp_path / "out")] if command == "export" else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"reasonrl: error: run directory {run} has no checkpoint yet (a run saves one every " \
                  "checkpoint.every steps and at its last step)\n"  # fmt: skip
    model, tok = tiny_model_and_tokenizer
    save_checkpoint(run, 2, model, tok, {}, {"sampler": {}}, keep_last=5)
    (run / "checkpoints" / "step_000002" / "rng.pt").write_bytes(b"")
    assert cli.main(argv) == 2
    out = capsys.readouterr()
    warning = [x for x in (out.out + out.err).splitlines() if x.startswith("warning: skipping checkpoint")]
    assert len(warning) == 1 and warning[0].startswith("warning: skipping checkpoint step_000002: "), out
    assert "rng.pt" in warning[0]
    assert out.err.splitlines()[-1] == f"reasonrl: error: run directory {run} has no valid checkpoint"
    assert not (tmp_path / "out").exists()


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


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="asks for CUDA where there is none")
def test_cuda_asked_for_without_one_is_one_line(capsys, tmp_path):
    for argv in (["eval", "demo", "--size", "4", "--device", "cuda"],
                 ["train", "model.device=cuda", f"log.run_dir={tmp_path}"]):  # fmt: skip
        assert cli.main(argv) == 2
        assert "device 'cuda' asked for (model.device / --device), but torch" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["data", "filter", "x.parquet", "--out", "y.parquet", "--max", "100"],  # was --max-prompt-tokens 100
        ["train", "--resum"],  # was --resume
        ["eval", "demo", "--temp", "0.7"],  # was --temperature 0.7
    ],
)
def test_abbreviated_flags_are_refused_in_every_subcommand(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert (
        e.value.code == 2
        and f"unrecognized arguments: {' '.join(argv[-2:] if argv[-1][0] != '-' else argv[-1:])}"
        in (capsys.readouterr().err)
    )


def test_validation_prompts_that_all_drop_for_length_are_an_error(tmp_path, capsys, tiny_model_and_tokenizer):
    """Before: validation was skipped without a word (and `checkpoint.keep_best` never met its metric)."""
    import json

    model, tok = tiny_model_and_tokenizer
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    row = {"prompt": [{"role": "user", "content": "What is 1 + 1? " * 200}], "data_source": "openai/gsm8k",
           "reward_model": {"ground_truth": "2"}}  # fmt: skip
    (tmp_path / "val.jsonl").write_text(json.dumps(row) + "\n")
    argv = ["train", f"model.path={tmp_path / 'm'}", f"log.run_dir={tmp_path / 'run'}", "train.steps=1",
            "data.max_prompt_tokens=100", "data.drop_overlong_prompts=true"]  # fmt: skip
    assert cli.main([*argv, f"data.val_files=[{tmp_path / 'val.jsonl'}]"]) == 2
    out, err = capsys.readouterr()
    assert err.endswith("reasonrl: error: no validation prompt fits data.max_prompt_tokens=100\n"), err
    assert "validation data: dropped 1 of 1 prompts over 100 tokens" in out + err
    assert not list(tmp_path.rglob("*.safetensors"))[
        1:
    ]  # nothing trained or saved (the model's own file only)
    # (before: data.val_files was ignored when training on a built-in task, and validated on its test split)
    row["prompt"][0]["content"] = "What is 1 + 1?"
    (tmp_path / "val.jsonl").write_text(json.dumps(row) + "\n")
    from reasonrl.config import load_config
    from reasonrl.trainer.setup import load_data

    _, val = load_data(load_config(None, [f"data.val_files=[{tmp_path / 'val.jsonl'}]"]))
    assert [p.user_text for p in val] == ["What is 1 + 1?"]


@pytest.mark.parametrize(
    "override, key",
    [
        ("data.val_files=[{ok},{missing}]", "data.val_files[1]"),
        ("data.train_files=[{missing}]", "data.train_files[0]"),
        (
            "data.mixture=[{{name: a, task: addsub}}, {{name: b, files: [{ok}, {missing}]}}]",
            "data.mixture[1].files[1]",
        ),
    ],
)
def test_a_missing_data_file_is_named_by_its_key_before_any_is_read(tmp_path, override, key):
    from reasonrl.config import load_config
    from reasonrl.data.schema import write_problems
    from reasonrl.data.tasks import generate
    from reasonrl.errors import InputError
    from reasonrl.trainer.setup import load_data

    ok, missing = tmp_path / "ok.jsonl", tmp_path / "missing.parquet"
    write_problems(ok, generate("addsub", 3, seed=0))
    with pytest.raises(InputError) as e:
        load_data(load_config(None, [override.format(ok=ok, missing=missing)]))
    assert str(e.value) == f"{key}: data file not found: {missing}"
