"""`reasonrl train` and `reasonrl eval` reach the verifiers' network services before any work
(`rewards.services`; the unit tests are in tests/unit/test_services.py)."""

from __future__ import annotations

import json


def test_train_and_eval_stop_before_loading_the_model_when_the_judge_is_down(tiny_model_dir, tmp_path, refused_port,
                                                                           monkeypatch, capsys):  # fmt: skip
    """Through the CLI: a judge-routed data file whose judge does not answer is exit status 2 and one
    line, before the model's weights load and before a run directory holds anything."""
    import reasonrl.models.loading as loading
    import reasonrl.trainer.setup as setup
    from reasonrl.cli.main import main

    def never(*a, **kw):
        raise AssertionError("the model loaded")

    monkeypatch.setattr(setup, "load_model", never)
    monkeypatch.setattr(loading, "load_policy", never)

    monkeypatch.delenv("REASONRL_JUDGE_URL", raising=False)
    monkeypatch.setenv("REASONRL_SERVICE_WAIT_S", "0")
    down = f"http://127.0.0.1:{refused_port}/v1"
    data = tmp_path / "stem.jsonl"
    row = {"prompt": [{"role": "user", "content": "How much energy?"}], "reward_model": {"ground_truth": "42 J"},
           "data_source": "stem_web", "extra_info": {"judge": {"base_url": down}}}  # fmt: skip
    data.write_text("".join(json.dumps({**row, "uid": f"r{i}"}) + "\n" for i in range(4)))
    run = tmp_path / "run"
    argv = ["train", f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={run}", f"data.train_files=[{data}]",
            f"data.val_files=[{data}]", "reward.service_wait_s=0", "log.progress=false", "log.tensorboard=false"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"reasonrl: error: the LLM judge (extra_info.judge.base_url of data_source stem_web) at {down} cannot be "
                       "reached (Connection refused, for 0 s): start it or fix its URL; nothing was generated or "
                       "scored")  # fmt: skip
    assert not (run / "metrics.jsonl").exists() and not (run / "checkpoints").exists()
    assert main(["eval", str(tiny_model_dir), "--data", str(data), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("nothing was generated or scored")


def test_an_eval_of_benchmarks_reaches_its_verifiers_services_before_generating(tiny_model_dir, tmp_path,
                                                                               refused_port, monkeypatch):  # fmt: skip
    """Any verifier may declare services (`fn.services`): the benchmark eval waits for them, and fails
    with nothing written when one never answers."""
    import pytest

    from reasonrl.errors import InputError
    from reasonrl.eval.benchmarks import BENCHMARKS, load_benchmark
    from reasonrl.eval.runner import run_benchmarks
    from reasonrl.rewards.base import VERIFIERS
    from reasonrl.rewards.routing import verifier_name

    (tmp_path / "gsm8k.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "so\n#### 2"}) + "\n")
    gsm8k = BENCHMARKS.get("gsm8k")
    name = verifier_name(load_benchmark(gsm8k, tmp_path)[0])
    real = VERIFIERS.get(name)

    def served(response, problem):
        return real(response, problem)

    down = f"http://127.0.0.1:{refused_port}"
    served.services = lambda options, problems: {down: f"the grading service ({len(problems)} rows)"}
    monkeypatch.setattr(VERIFIERS, "_entries", {**VERIFIERS._entries, name: served})
    monkeypatch.setenv("REASONRL_SERVICE_WAIT_S", "0.2")
    logs = []
    with pytest.raises(InputError, match=rf"^the grading service \(1 rows\) at {down} cannot be reached"):
        run_benchmarks(str(tiny_model_dir), [gsm8k], tmp_path / "out", data_dir=tmp_path, device="cpu",
                       log=logs.append)  # fmt: skip
    assert not (tmp_path / "out").exists()
    assert len(logs) == 1 and "(Connection refused; REASONRL_SERVICE_WAIT_S sets the wait)" in logs[0]


def test_a_judge_that_is_up_but_refuses_the_key_stops_train_and_eval_before_the_model_loads(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """Reached is not enough: the judge is asked to grade two test answers with the run's own settings.
    A wrong API key (every call http 401) is one line and exit 2, before the weights load; with the key
    fixed the same command trains, and the judge scores its rollouts."""
    from _judge_standin import StandIn

    import reasonrl.trainer.setup as setup
    from reasonrl.cli.main import main

    loads = []
    real_load = setup.load_model
    monkeypatch.setattr(setup, "load_model", lambda *a, **kw: loads.append(1) or real_load(*a, **kw))
    monkeypatch.delenv("REASONRL_JUDGE_URL", raising=False)
    monkeypatch.setenv("REASONRL_JUDGE_API_KEY", "sk-wrong")
    judge = StandIn()
    try:
        judge.script = [("status", 401)]
        data = tmp_path / "stem.jsonl"
        row = {"prompt": [{"role": "user", "content": "How much energy?"}], "reward_model": {"ground_truth": "42 J"},
               "data_source": "stem_web", "extra_info": {"judge": {"base_url": judge.url}}}  # fmt: skip
        data.write_text("".join(json.dumps({**row, "uid": f"r{i}"}) + "\n" for i in range(4)))
        run = tmp_path / "run"
        argv = ["train", f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={run}",
                f"data.train_files=[{data}]", f"data.val_files=[{data}]", "log.progress=false", "log.tensorboard=false",
                "train.steps=1", "rollout.n=2", "train.global_batch=4", "train.mini_batch=4", "train.micro_batch=4",
                "rollout.max_new_tokens=8", "val.every=0", "reward.options.judge.retries=0"]  # fmt: skip
        assert main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"reasonrl: error: the LLM judge at {judge.url} (model 'default') could not grade a test answer: error: "
            "http 401: the endpoint refused the API key (REASONRL_JUDGE_API_KEY); nothing was generated or scored"
        )
        assert loads == [] and not (run / "metrics.jsonl").exists() and len(judge.requests) == 1
        assert main(["eval", str(tiny_model_dir), "--data", str(data), "--device", "cpu"]) == 2
        assert "http 401: the endpoint refused the API key" in capsys.readouterr().err

        judge.requests.clear()
        judge.script = [
            ("reply", "Final verdict: YES"),
            ("reply", "Final verdict: NO"),
            ("reply", "Final verdict: NO"),
        ]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"the LLM judge at {judge.url} (model 'default') graded two test answers right" in out
        assert loads == [1] and len(judge.requests) > 2  # the test's two calls, then the rollouts' own
        asked = [r["body"]["messages"][0]["content"] for r in judge.requests]
        assert all("What is 2 + 3?" in q for q in asked[:2]) and all(
            "How much energy?" in q for q in asked[2:]
        )
        steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [s["step"] for s in steps if "reward/mean" in s] == [1]
    finally:
        judge.close()
