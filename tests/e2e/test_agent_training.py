"""Training with an OpenRLHF agent (`rollout.agent.path`, OpenRLHF's `--agent_func_path`): every rollout is
an episode of its own instance, the agent's feedback joins the completion between the model's turns (no
loss on it; the trainer's log-probs of the whole sequence match the sampler's), and the steps' rewards,
summed, are the `environment` reward term; in the synchronous loop and in the async rollout worker."""

from __future__ import annotations

import json

import pytest
from test_tool_training import _model_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

FIRST = "Step one."
FEEDBACK = "\nWrong, again.\n"
AGENT = """
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
""".replace("FEEDBACK", repr(FEEDBACK))


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


HINTING = """
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor


class AgentInstance(AgentInstanceBase):
    def __init__(self, *args, **kwargs):
        self.turns = 0

    async def step(self, states, **kwargs):
        self.turns += 1
        right = states["action_text"].replace(" ", "").endswith("####" + states["label"])  # (spaces: see above)
        done = right or self.turns >= 2
        return {"rewards": float(right), "environment_feedback": "" if done else " Hint: add one.", "done": done}


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self):
        super().__init__(AgentInstance)
"""


def test_eval_runs_the_agent_and_scores_the_last_turn(tmp_path, monkeypatch):
    """`reasonrl eval --agent agent_func.py`: an engine that answers "i + 1?" with i, and with i + 1 once the
    agent's hint is in its prompt, solves every problem at its second turn; the benchmark's verifier scores
    the last turn, and each sample keeps the agent's reward (0 for the first turn, 1 for the second)."""
    import re

    from test_tool_training import gsm8k_dir

    from reasonrl.cli.eval_rollout import agent_arg
    from reasonrl.config import ConfigError, ToolsConfig
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks
    from reasonrl.rollout.factory import ROLLOUT_ENGINES
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.types import Completion

    class Guesser(HFRolloutEngine):
        def generate(self, prompts, params):
            out = []
            for p in prompts:
                text = self.tokenizer.decode(p)
                i = int(re.search(r"(\d+) ?\+ ?1", text).group(1))
                ids = self.tokenizer(f"#### {i + 1 if 'Hint' in text else i}", add_special_tokens=False)[
                    "input_ids"
                ]
                out.append(
                    [Completion(ids, self.tokenizer.decode(ids), [0.0] * len(ids)) for _ in range(params.n)]
                )
            return out

    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))
    ROLLOUT_ENGINES.register("guesser")(lambda model, tokenizer: Guesser(model, tokenizer))
    path = tmp_path / "agent_func.py"
    path.write_text(HINTING)
    agent = agent_arg(str(path))
    assert agent.path == str(path)
    with pytest.raises(ConfigError, match="--agent with tools"):
        agent_arg(str(path), tools=ToolsConfig(enabled=True))
    with pytest.raises(ConfigError, match="--agent: .*no such file"):
        agent_arg(str(tmp_path / "missing.py"))
    model = _model_dir(tmp_path, ["#### Hint: add one."])
    res = run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "out", data_dir=gsm8k_dir(tmp_path),
                         device="cpu", overrides={"n": 2, "temperature": 0.0}, workers=1, log=lambda *a: None,
                         engine="guesser", agent=agent)  # fmt: skip
    assert res["benchmarks"]["gsm8k"]["mean@n"] == 1.0
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    samples = [s for s in samples if "committed" not in s]
    assert len(samples) == 8 and {(s["env_reward"], s["env_reason"]) for s in samples} == {
        (1.0, "agent_done")
    }
    setup = json.loads((tmp_path / "out" / "samples.setup.json").read_text())
    assert setup["agent"]["path"] == str(path)


def test_a_run_with_an_agent_killed_with_sigkill_resumes_to_the_same_metrics(tiny_model_dir, tmp_path):
    """SIGKILL once checkpoint 2 is complete, then --resume: steps 3 and 4 run the agent's episodes again and
    log what the uninterrupted run logged (a fresh instance per episode: nothing of the agent to restore)."""
    from test_run_dir import killed_and_resumed
    from test_train_loop import _overrides, _stable

    agent = _agent(tmp_path)

    def args(run):
        return [*_overrides(tiny_model_dir, run, 4), f"rollout.agent.path={agent}", "rollout.agent.workers=1",
                "rollout.max_new_tokens=24", "reward.weights={correctness: 1, environment: 0.5}",
                "checkpoint.every=2", "log.progress=false"]  # fmt: skip

    full, resumed = killed_and_resumed(args, tmp_path, kill_after=2, steps=4)
    assert [r["step"] for r in resumed] == list(range(5))
    assert all(r["rollout/agent/turns_mean"] > 1 and r["rollout/agent/error_frac"] == 0 for r in resumed[1:])
    for r in resumed:
        assert _stable(r) == full[r["step"]], r["step"]
