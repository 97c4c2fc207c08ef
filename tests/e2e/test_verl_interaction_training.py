"""Training with verl's interaction classes (`rollout.interaction.verl_config`): a class written against
verl's `BaseInteraction` answers each attempt in its own process; its text joins the completion as a user
turn that takes no loss, and its turn scores, summed, are the `environment` reward term; in the synchronous
loop and in the async rollout worker."""

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
CLASS = """
from verl.interactions.base import BaseInteraction


class AgainInteraction(BaseInteraction):
    def __init__(self, config):
        super().__init__(config)
        self.turns = {}

    async def start_interaction(self, instance_id=None, ground_truth=None, **kwargs):
        self.turns[instance_id] = 0
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        self.turns[instance_id] += 1
        return False, self.config["message"], -0.25, {}

    async def finalize_interaction(self, instance_id, **kwargs):
        del self.turns[instance_id]
"""


def _train(model_dir, tmp_path, user_module, *extra):
    m = user_module(CLASS, "again_interaction")
    path = tmp_path / "interaction_config.yaml"
    path.write_text(
        f"interaction:\n  - class_name: {m}.AgainInteraction\n    config: {{message: '{MESSAGE}'}}\n"
    )
    run = tmp_path / "run"
    cfg = _cfg(model_dir, run, 2, "rollout.interaction.enabled=true", f"rollout.interaction.verl_config={path}",
               "rollout.interaction.max_turns=3", "rollout.interaction.workers=1", "rollout.max_new_tokens=24",
               "reward.weights={correctness: 1, environment: 1}", "checkpoint.every=0", "log.rollouts_per_step=2",
               *extra)  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    return [h for h in hist if "rollout/interaction/turns_mean" in h], [
        c for r in rows for c in r["completions"]
    ]


def test_the_class_answers_every_attempt_and_only_the_models_tokens_train(
    tiny_model_dir, tmp_path, monkeypatch, user_module
):
    opens_with(monkeypatch, WRONG, MESSAGE)  # the first attempt fixed, then the model samples
    steps, done = _train(tiny_model_dir, tmp_path, user_module)
    assert len(steps) == 2
    for h in steps:
        assert (
            h["rollout/interaction/retried_frac"] == 1.0 and 2.0 <= h["rollout/interaction/turns_mean"] <= 3.0
        )
        assert h["rollout/logprob_gap_max"] < 1e-4  # the class's turns masked, the rest as sampled
        # -0.25 for each answered attempt: every first one, and the second where it stopped by itself with room
        assert -0.5 <= h["reward/term/environment"] <= -0.25 and h["verifier/environment/error_rate"] == 0.0
        assert h["verifier/environment/count"] == 16.0
    assert done and all(c["turns"] >= 2 and c["text"].startswith(WRONG + MESSAGE) for c in done)


def test_the_rollout_worker_runs_the_classes_too(tiny_model_dir, tmp_path, user_module):
    steps, done = _train(tiny_model_dir, tmp_path, user_module, *ASYNC)
    assert len(steps) == 2 and all(h["verifier/environment/error_rate"] == 0.0 for h in steps)
    retried = [c for c in done if c.get("turns", 1) > 1]
    assert all(MESSAGE in c["text"] for c in retried)
    assert all(-0.5 <= h["reward/term/environment"] <= 0.0 for h in steps)
