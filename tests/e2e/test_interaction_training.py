"""Training with `rollout.interaction`: every first attempt is a wrong answer (its tokens scored by the
model itself, as if it had sampled them), the verifier finds it wrong, the feedback joins the completion
as a user turn of the model's chat template, and the HF engine samples the next attempt after it. The
trainer's log-probs of every token the model wrote equal the sampler's: a loss mask that missed the
feedback's tokens (sampler log-prob 0) or a next attempt conditioned on another prefix would open a gap
of nats. The same through the asynchronous rollout worker."""

from __future__ import annotations

import json

import pytest
from test_async_rollouts import ASYNC
from test_tool_training import opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(300)
WRONG = "<answer>99</answer>"  # no problem of the arithmetic task's difficulty 2 sums to 99
MESSAGE = "=0=0="  # (the tiny tokenizer knows the arithmetic task's characters only)


def _train(model_dir, run, *extra):
    cfg = _cfg(model_dir, run, 2, "rollout.interaction.enabled=true", f"rollout.interaction.message={MESSAGE}",
               "rollout.interaction.max_turns=3", "rollout.max_new_tokens=24", "checkpoint.every=0",
               "log.rollouts_per_step=2", *extra)  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    return [h for h in hist if "rollout/interaction/turns_mean" in h], [
        c for r in rows for c in r["completions"]
    ]


def test_wrong_answers_get_feedback_and_only_the_models_tokens_train(tiny_model_dir, tmp_path, monkeypatch):
    opens_with(monkeypatch, WRONG, MESSAGE)
    steps, done = _train(tiny_model_dir, tmp_path / "run")
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/interaction/first_correct"] == 0.0 and h["rollout/interaction/retried_frac"] == 1.0
        assert 2.0 <= h["rollout/interaction/turns_mean"] <= 3.0
        assert h["rollout/logprob_gap_max"] < 1e-4
        # a retried completion's reward is its last answer's x 0.5 per retry: never above 0.5
        assert h["reward/mean"] <= 0.5 * h["reward/accuracy"] + 1e-9
    assert done and all(c["turns"] >= 2 and c["text"].startswith(WRONG + MESSAGE) for c in done)


def test_the_rollout_worker_gives_feedback_too(tiny_model_dir, tmp_path):
    """max_staleness=1: the worker process runs the interaction (the untrained model's attempts that stop
    by themselves are all wrong, and get feedback)."""
    steps, done = _train(tiny_model_dir, tmp_path / "run", *ASYNC)
    assert len(steps) == 2 and all(h["rollout/interaction/retried_frac"] > 0 for h in steps)
    retried = [c for c in done if c.get("turns", 1) > 1]
    assert retried and all(MESSAGE in c["text"] for c in retried)
    assert all(MESSAGE not in c["text"] for c in done if c.get("turns", 1) == 1)


RANDOM = ("rollout.interaction.enabled=true", f"rollout.interaction.message={MESSAGE}", "rollout.interaction.max_turns=3",
          "rollout.max_new_tokens=24", "log.progress=false")  # fmt: skip


def test_sigkill_and_resume_end_with_the_uninterrupted_runs_metrics(tiny_model_dir, tmp_path):
    """The untrained model's attempts (a third stop by themselves, wrong, and get feedback): a run killed at a
    checkpoint and resumed gives the same interactions and ends with the uninterrupted run's metrics."""
    from test_run_dir import killed_and_resumed
    from test_train_loop import _overrides, _stable

    args = lambda run: [*_overrides(tiny_model_dir, run, 4, *RANDOM), "checkpoint.every=2"]  # noqa: E731
    full, resumed = killed_and_resumed(args, tmp_path, kill_after=2, steps=4)
    assert [r["step"] for r in resumed] == list(range(5))
    assert all(r["rollout/interaction/retried_frac"] > 0 for r in resumed[1:])
    for r in resumed:
        assert _stable(r) == full[r["step"]], r["step"]


def test_two_ranks_each_run_the_interaction_of_their_share(tiny_model_dir, tmp_path):
    from test_fsdp2_train import _launch, _metrics, _ok

    args = [f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={tmp_path / 'two'}", "train.steps=2",
            *RANDOM, "train.global_batch=16", "rollout.n=4", "train.mini_batch=16", "train.micro_batch=4",
            "data.train_size=64", "checkpoint.every=0"]  # fmt: skip
    _ok(_launch(2, args))
    rows = _metrics(tmp_path / "two")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(
        r["rollout/interaction/retried_frac"] > 0 and r["rollout/interaction/turns_mean"] > 1
        for r in rows[1:]
    )
