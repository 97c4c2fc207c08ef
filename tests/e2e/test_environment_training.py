"""Training and evaluating with a TRL environment (`rollout.tools.environment`, TRL's `environment_factory`):
every rollout is an episode of its own instance, reset from its row (the reset's text joins the prompt the
policy is trained on), whose method the completion calls (its tokens scored by the model itself), and whose
`get_reward` is the `environment` reward term; only the model's own tokens train."""

from __future__ import annotations

import json

import pytest
from test_function_tool_training import add_one_caller
from test_tool_training import _model_dir, gsm8k_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

CALL = '<tool_call>{"name": "increment", "arguments": {"by": 3}}</tool_call>'
TURN = "<|im_end|><|im_start|>user<tool_response>3</tool_response><|im_end|><|im_start|>assistant Reach 3."
ENV = '''
class Counter:
    def reset(self, **row):
        self.count = 0
        return " Reach 3."

    def increment(self, by: int) -> int:
        """Add to the count.

        Args:
            by: how much to add
        """
        self.count += by
        return self.count

    def get_reward(self) -> float:
        return 1.0 if self.count == 3 else -1.0
'''


def test_training_on_environment_episodes_rewards_each_by_its_own_instance(
    tmp_path, monkeypatch, user_module
):
    m = user_module(ENV, "run_envs")
    opens_with(monkeypatch, CALL, "<tool_response>")
    run = tmp_path / "run"
    cfg = _cfg(_model_dir(tmp_path, [CALL + TURN]), run, 2, "rollout.tools.enabled=true", "rollout.tools.format=hermes",
               "rollout.tools.names=[]", f"rollout.tools.environment={m}.Counter", "rollout.max_new_tokens=100",
               "reward.weights={correctness: 1, environment: 0.5}", "checkpoint.every=0",
               "log.rollouts_per_step=2")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 1.0 and h["rollout/tool_error_frac"] == 0.0
        # each rollout counted from 0 in its own instance: shared ones would count past 3 and score -1
        assert h["reward/term/environment"] == 1.0 and h["reward/term/environment_std"] == 0.0
        assert h["verifier/environment/count"] == 16.0 and h["verifier/environment/error_rate"] == 0.0
        assert h["reward/mean"] == h["reward/term/correctness"] + 0.5
        assert (
            h["rollout/logprob_gap_max"] < 1e-4
        )  # trained on the prompt it sampled from, reset's text in it
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    # (this tiny tokenizer, reloaded from its directory, drops spaces and newlines)
    assert texts and all(
        t.startswith(CALL.replace(" ", "")) and "<tool_response>3</tool_response>" in t for t in texts
    )
    assert all(r["prompt"].replace(" ", "").endswith("Reach3.") for r in rows)


ADDER = '''
class Adder:
    def reset(self, ground_truth, **row):
        self.calls = []
        return " (use add_one)"

    def add_one(self, x: int) -> int:
        """One more.

        Args:
            x: a whole number
        """
        self.calls.append(x)
        return x + 1

    def get_reward(self) -> float:
        return float(len(self.calls))
'''


def test_eval_runs_an_environment_and_keeps_its_reward_with_each_sample(tmp_path, monkeypatch, user_module):
    """`reasonrl eval --tools hermes --tool-environment M.Adder`: an engine that calls the environment's
    method on each question "i + 1?" (its prompt shows the reset's text) and answers with its output solves
    every problem; each sample keeps its episode's reward (one call each)."""
    from reasonrl.cli.eval_rollout import tools_arg
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks

    m = user_module(ADDER, "eval_envs")
    seen = []

    add_one_caller(monkeypatch, seen)
    data = gsm8k_dir(tmp_path)
    model = _model_dir(tmp_path, ['<tool_call>{"name": "add_one", "arguments": {"x": 12}}</tool_call>' + TURN,
                                  "#### 12 + 1? (use add_one)"])  # fmt: skip
    tools = tools_arg("hermes", None, environments=[f"{m}.Adder"])
    assert tools.environment == f"{m}.Adder"
    res = run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "out", data_dir=data, device="cpu",
                         overrides={"n": 2, "temperature": 0.0}, workers=1, log=lambda *a: None,
                         engine="caller", tools=tools)  # fmt: skip
    assert res["benchmarks"]["gsm8k"]["mean@n"] == 1.0
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    samples = [s for s in samples if "committed" not in s]
    assert len(samples) == 8 and all(s["prompt"].endswith('"####". (use add_one)') for s in samples)
    assert {(s["env_reward"], s["env_reason"]) for s in samples} == {(1.0, "environment_reward")}
    assert seen and all(
        "(useadd_one)" in t.replace(" ", "") for t in seen
    )  # (the tiny tokenizer drops spaces)


def test_async_rollouts_run_the_episodes_in_the_rollout_worker(tmp_path, user_module):
    """rollout.max_staleness=1: the rollout worker process builds its own environments; the model, which
    never calls the method, ends every episode with the count at 0 (reward -1), and the runner takes it."""
    m = user_module(ENV, "async_envs")
    cfg = _cfg(_model_dir(tmp_path), tmp_path / "run", 2, "rollout.tools.enabled=true", "rollout.tools.format=hermes",
               "rollout.tools.names=[]", f"rollout.tools.environment={m}.Counter", "rollout.max_new_tokens=20",
               "reward.weights={correctness: 1, environment: 0.5}", "checkpoint.every=0", "rollout.max_staleness=1",
               "algo.off_policy.tis_cap=2.0", "log.tensorboard=false")  # fmt: skip
    steps = [h for h in train(cfg, log=lambda *a: None)["history"] if "reward/term/environment" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["reward/term/environment"] == -1.0 and h["verifier/environment/count"] == 16.0
        assert h["reward/mean"] == h["reward/term/correctness"] - 0.5


REWARDS = """
import os


def counted(environments, log_metric, **kwargs):
    log_metric("calls", len(environments[0].calls) if hasattr(environments[0], "calls") else -1)
    return [float(getattr(environments[0], "count", len(getattr(environments[0], "calls", []))))]


def flaky(completions, **kwargs):  # fails until the file `fixed` exists (a verifier that was broken)
    if not os.path.exists("fixed"):
        raise RuntimeError("not fixed yet")
    return [0.0]
"""


def test_training_rewards_with_a_trl_function_reading_each_rollouts_environment(
    tmp_path, monkeypatch, user_module
):
    """TRL's `reward_func(environments, **kwargs)`: `counted` reads each rollout's own Counter after its call
    (3; a shared instance would count past it), as the trl_function term."""
    m, r = user_module(ENV, "fn_run_envs"), user_module(REWARDS, "fn_run_rewards")
    opens_with(monkeypatch, CALL, "<tool_response>")
    cfg = _cfg(_model_dir(tmp_path, [CALL + TURN]), tmp_path / "run", 2, "rollout.tools.enabled=true",
               "rollout.tools.format=hermes", "rollout.tools.names=[]", f"rollout.tools.environment={m}.Counter",
               "rollout.max_new_tokens=100", "reward.weights={correctness: 1, trl_function: 0.5}",
               f"reward.options.trl_function.functions=[{r}.counted]", "checkpoint.every=0")  # fmt: skip
    steps = [h for h in train(cfg, log=lambda *a: None)["history"] if "reward/term/trl_function" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["reward/term/trl_function"] == 3.0 and h["reward/function/counted/mean"] == 3.0
        assert h["verifier/trl_function/error_rate"] == 0.0 and h["reward/function_log/calls/mean"] == -1.0
        assert h["reward/mean"] == pytest.approx(h["reward/term/correctness"] + 1.5)


def test_eval_keeps_what_the_functions_gave_beside_the_instance_for_a_rescore(
    tmp_path, monkeypatch, user_module
):
    """An eval whose plain function fails at first: every sample is a verifier error; run again once it works,
    the samples are scored again with what `counted` gave beside each episode's instance (kept in
    samples.jsonl: the instances are long gone)."""
    from reasonrl.cli.eval_rollout import tools_arg
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks

    m, r = user_module(ADDER, "fn_eval_envs"), user_module(REWARDS, "fn_eval_rewards")
    add_one_caller(monkeypatch, [])
    data = gsm8k_dir(tmp_path)
    model = _model_dir(tmp_path, ['<tool_call>{"name": "add_one", "arguments": {"x": 12}}</tool_call>' + TURN,
                                  "#### 12 + 1? (use add_one)"])  # fmt: skip
    options = {"trl_function": {"functions": [f"{r}.counted", f"{r}.flaky"], "correctness": f"{r}.counted"}}
    from reasonrl.eval import runner
    from reasonrl.rewards.routing import with_verifier

    load = runner.load_benchmark  # the benchmark's rows scored by the TRL functions
    monkeypatch.setattr(runner, "load_benchmark", lambda *a: with_verifier(load(*a), "trl_function"))

    def run():
        return run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "out", data_dir=data, device="cpu",
                              overrides={"n": 2, "temperature": 0.0}, workers=1, log=lambda *a: None,
                              engine="caller", tools=tools_arg("hermes", None, environments=[f"{m}.Adder"]),
                              reward_options=options)  # fmt: skip

    first = run()["benchmarks"]["gsm8k"]
    assert first["mean@n"] == 0.0 and first["verifier_errors"] == 1.0
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    kept = [s["env_functions"] for s in samples if "committed" not in s]
    assert len(kept) == 8 and all(k == {"counted": {"value": 1.0, "metrics": {"calls": [1.0]}, "extra": {}}}
                                  for k in kept)  # fmt: skip
    (tmp_path / "fixed").write_text("")
    again = run()["benchmarks"]["gsm8k"]
    assert again["mean@n"] == 1.0 and again["verifier_errors"] == 0.0  # counted's 1.0: one add_one call each
