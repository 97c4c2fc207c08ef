"""`--verifier-option VERIFIER.KEY=VALUE` reaches the scorer of `reasonrl eval --benchmarks` and of
`reasonrl data passrate` (the runner's own handling: tests/e2e/test_eval_runner.py; bad values:
test_cli_errors.py)."""

from __future__ import annotations

import json

from reasonrl.cli import main as cli
from reasonrl.cli.evaluate import verifier_options


def _math_file(tmp_path):
    """A one-row math data file (verl's row layout)."""
    row = {
        "prompt": [{"role": "user", "content": "2+2?"}],
        "reward_model": {"ground_truth": "4"},
        "data_source": "math",
    }
    (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n")
    return tmp_path / "d.jsonl"


def test_values_are_read_as_json_else_as_text_and_grouped_by_verifier():
    assert verifier_options(
        ["math.accept_unevaluated=true", "gsm8k.float_rounding=4", "math.float_rounding=3", "code.backend=local"]
    ) == {"math": {"accept_unevaluated": True, "float_rounding": 3}, "gsm8k": {"float_rounding": 4},
          "code": {"backend": "local"}}  # fmt: skip
    assert verifier_options([]) == {}


def test_eval_and_passrate_pass_them_to_their_runs(tmp_path, monkeypatch, capsys):
    import reasonrl.data.passrate as passrate
    import reasonrl.eval.runner as runner

    seen = {}

    def fake_run(model, benches, out, **kw):
        seen["eval"] = kw["reward_options"]
        return {"benchmarks": {}, "macro": {}}

    monkeypatch.setattr(runner, "run_benchmarks", fake_run)
    argv = ["eval", "demo", "--benchmarks", "gsm8k", "--out", str(tmp_path / "e")]
    assert cli.main([*argv, "--verifier-option", "gsm8k.accept_unevaluated=true"]) == 0
    assert seen["eval"] == {"gsm8k": {"accept_unevaluated": True}}
    assert cli.main(argv) == 0
    assert seen["eval"] == {}

    def fake_rates(model, problems, samples, params, **kw):
        seen["passrate"] = kw["reward_options"]
        return [0.5] * len(problems)

    monkeypatch.setattr(passrate, "pass_rates", fake_rates)
    data = _math_file(tmp_path)
    argv = ["data", "passrate", str(data), "--model", "demo", "--out", str(tmp_path / "o.jsonl"), "--quiet"]
    assert cli.main([*argv, "--verifier-option", "math.accept_unevaluated=true"]) == 0
    assert seen["passrate"] == {"math": {"accept_unevaluated": True}}
    capsys.readouterr()


def test_held_out_eval_scores_with_them(tmp_path, monkeypatch, capsys):
    """`reasonrl eval MODEL --data F` (no benchmarks) builds its scorer with the options."""
    import reasonrl.eval.accuracy as accuracy
    import reasonrl.models.loading as loading
    import reasonrl.rollout.factory as factory

    seen = {}

    def fake_evaluate(
        engine, tok, problems, params, batch_size=256, think_from_prompt=True, scorer=None, interaction=None
    ):
        seen["options"] = None if scorer is None else scorer.options
        return accuracy.Evaluation(0.5, [], [])

    monkeypatch.setattr(loading, "load_policy", lambda *a, **k: (None, None))
    monkeypatch.setattr(
        factory, "build_rollout_engine", lambda *a, **k: type("E", (), {"close": lambda s: None})()
    )
    monkeypatch.setattr(accuracy, "evaluate", fake_evaluate)
    data = _math_file(tmp_path)
    assert (
        cli.main(["eval", "demo", "--data", str(data), "--verifier-option", "math.accept_unevaluated=true"])
        == 0
    )
    assert seen["options"] == {"math": {"accept_unevaluated": True}}
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["verifier_options"] == seen["options"]
    assert cli.main(["eval", "demo", "--data", str(data)]) == 0
    assert seen["options"] is None  # the default runner
