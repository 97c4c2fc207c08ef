"""Training with an OpenRLHF agent (`rollout.agent.path`, OpenRLHF's `--agent_func_path`): every rollout is
an episode of its own instance, the agent's feedback joins the completion between the model's turns (no
loss on it; the trainer's log-probs of the whole sequence match the sampler's), and the steps' rewards,
summed, are the `environment` reward term; in the synchronous loop and in the async rollout worker."""

from __future__ import annotations

import json

from test_tool_training import _model_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

FIRST = "Step one."
FEEDBACK = "\nWrong, again.\n"
AGENT = '''
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor


class AgentInstance(AgentInstanceBase):
    def __init__(self, *args, **kwargs):
        self.turns = 0

    async def reset(self, states, **kwargs):
        self.transcript = states["observation"]
        return {"observation": states["observation"]}

    async def step(self, states, **kwargs):
        if states["observation_text"] != self.transcript:
            raise RuntimeError("the transcript differs from the agent's own")
        self.turns += 1
        done = self.turns >= 2
        feedback = "" if done else FEEDBACK
        self.transcript += states["action_text"] + feedback
        return {"rewards": torch.tensor(1.0), "scores": torch.tensor(1.0), "environment_feedback": feedback,
                "done": done}


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self):
        super().__init__(AgentInstance)
'''.replace("FEEDBACK", repr(FEEDBACK))


def _agent(tmp_path) -> str:
    path = tmp_path / "agent_func.py"
    path.write_text(AGENT)
    return str(path)


def test_training_on_agent_episodes_trains_the_models_turns_and_sums_the_steps_rewards(tmp_path, monkeypatch):
    opens_with(monkeypatch, FIRST, "Wrong")  # the first turn fixed (scored by the model), the second sampled
    run = tmp_path / "run"
    cfg = _cfg(_model_dir(tmp_path, [FIRST + FEEDBACK]), run, 2, f"rollout.agent.path={_agent(tmp_path)}",
               "rollout.agent.workers=2", "rollout.max_new_tokens=40", "checkpoint.every=0",
               "reward.weights={correctness: 1, environment: 0.5}", "log.rollouts_per_step=2")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    steps = [h for h in hist if "rollout/agent/turns_mean" in h]
    assert len(steps) == 2
    for h in steps:
        # two turns each (the agent's done after its second step), each step rewarded 1, no step failed
        assert h["rollout/agent/turns_mean"] == 2.0 and h["rollout/agent/done_frac"] == 1.0
        assert h["rollout/agent/error_frac"] == 0.0 and h["verifier/environment/error_rate"] == 0.0
        assert h["reward/term/environment"] == 2.0 and h["verifier/environment/count"] == 16.0
        assert abs(h["reward/mean"] - (h["reward/term/correctness"] + 0.5 * 2.0)) < 1e-6
        assert h["rollout/logprob_gap_max"] < 1e-4  # trained on what was sampled, the feedback masked
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    # (this tiny tokenizer, reloaded from its directory, drops spaces and newlines)
    assert texts and all(t.startswith("Stepone.Wrong,again.") for t in texts)


def test_async_rollouts_run_the_agent_in_the_rollout_worker(tmp_path):
    """rollout.max_staleness=1: the rollout worker process runs its own agent processes."""
    cfg = _cfg(_model_dir(tmp_path, [FEEDBACK]), tmp_path / "run", 2, f"rollout.agent.path={_agent(tmp_path)}",
               "rollout.agent.workers=1", "rollout.max_new_tokens=30", "checkpoint.every=0", "rollout.max_staleness=1",
               "reward.weights={correctness: 1, environment: 0.5}", "algo.off_policy.tis_cap=2.0",
               "log.tensorboard=false")  # fmt: skip
    steps = [h for h in train(cfg, log=lambda *a: None)["history"] if "rollout/agent/turns_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["verifier/environment/count"] == 16.0 and h["verifier/environment/error_rate"] == 0.0
        assert h["reward/term/environment"] == h["rollout/agent/turns_mean"] >= 1.0  # a reward of 1 a step
