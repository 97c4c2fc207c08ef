"""OpenRLHF agents (`rollout.agent`): an agent file written for OpenRLHF (`AgentExecutor(MultiTurnAgentExecutor)`
of an `AgentInstance` with async reset / step, tensor rewards) runs unchanged, without OpenRLHF installed;
each episode has its own instance; the step's feedback joins the completion with no loss on it; the
episode's reward is its steps' rewards summed, taken by the runner as the `environment` verifier's result.

A scripted engine stands in for the model: a sample's k-th turn is fixed text (k = the feedback turns already
in its prompt, counted by "Wrong"), so every token of the result can be checked."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
from test_tool_rollouts import _ALPHABET, LOGP, Scripted

from reasonrl.config import AgentConfig, ConfigError, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rollout.agents import DONE, UNFINISHED, AgentRolloutEngine, agent_class, agent_metrics
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.instance_pool import LOST
from reasonrl.rollout.scored import generate_groups, score_groups
from reasonrl.types import Completion, Problem

AGENT = textwrap.dedent(
    '''
    import os, random, time
    from typing import Any, Dict

    import torch
    from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase, MultiTurnAgentExecutor


    class AgentInstance(AgentInstanceBase):
        def __init__(self, *args, **kwargs):
            self.step_idx = 0

        async def reset(self, states: dict, **kwargs):
            self.label, self.transcript = states["label"], states["observation"]
            return {"observation": states["observation"]}

        async def step(self, states: dict, **kwargs) -> Dict[str, Any]:
            action = states["action_text"]
            # the transcript as OpenRLHF keeps it: observation, then each action and its feedback
            assert states["observation_text"] == self.transcript, (states["observation_text"], self.transcript)
            assert states["sampling_params"].max_tokens > 0
            if "die" in action:
                os._exit(3)
            if "stall" in action:
                time.sleep(30)
            if "raise" in action:
                raise RuntimeError("the grader broke")
            self.step_idx += 1
            right = self.label in action
            done = right or self.step_idx >= 3
            reward = torch.tensor(1.0) if right else torch.tensor(-0.25)
            feedback = "" if done else f"\\nWrong, turn {self.step_idx}.\\n"
            self.transcript += action + feedback
            return {"rewards": reward, "scores": reward, "environment_feedback": feedback, "done": done,
                    "sampling_params": states.get("sampling_params"), "extra_logs": {"turn": self.step_idx, "right": torch.tensor(float(right)), "note": "text"}}


    class AgentExecutor(MultiTurnAgentExecutor):
        def __init__(self):
            super().__init__(AgentInstance)


    class Rewriting(AgentInstance):
        async def reset(self, states: dict, **kwargs):
            await super().reset(states)
            self.transcript = "Task: say " + states["label"] + "."
            return {"observation": self.transcript}


    class Dice(AgentInstance):
        async def reset(self, states: dict, **kwargs):
            return {"observation": str(random.random())}


    class Broken(AgentInstance):
        async def reset(self, states: dict, **kwargs):
            raise RuntimeError("no such level")


    class OldStyle(AgentInstanceBase):  # OpenRLHF's older examples: async __init__, plain float rewards
        async def __init__(self, *args, **kwargs):
            self.step_idx = 0

        async def step(self, states: dict, **kwargs):
            return {"rewards": 0.5, "environment_feedback": "", "done": True}


    class OldExecutor(AgentExecutorBase):  # the older constructor: the engine and more
        def __init__(self, max_steps, max_length, llm_engine, hf_tokenizer, result_queue):
            super().__init__(OldStyle, max_steps, max_length, llm_engine, hf_tokenizer, result_queue)

        async def execute(self, prompt, label, sampling_params):
            """Custom logic could go here."""
            return await super().execute(prompt, label, sampling_params)


    class OwnLoop(MultiTurnAgentExecutor):
        def __init__(self):
            super().__init__(AgentInstance)

        async def execute(self, prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine):
            out = await llm_engine.generate(prompt, sampling_params)
            return {"prompt": prompt, "reward": 1.0, "observation_tokens": out}


    class NotANumber(AgentInstance):
        async def step(self, states: dict, **kwargs):
            return {"rewards": "high", "environment_feedback": "", "done": True}
    '''
)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer([_ALPHABET + " Wrong, turn Task: say The answer is"], 300)


@pytest.fixture
def agent_file(tmp_path):
    path = tmp_path / "agent_func.py"
    path.write_text(AGENT)
    return str(path)


def _rows(*labels):
    return [Problem([{"role": "user", "content": f"Say {x}."}], x, "env", verifier="environment", uid=f"r{x}")
            for x in labels]  # fmt: skip


def _episodes(tok, agent_file, script, rows, n=2, max_new=300, cls="", **cfg):
    spec = f"{agent_file}:{cls}" if cls else agent_file
    cfg = {"workers": 1, **cfg}  # (one process: the episodes' instances side by side in it)
    loop = AgentRolloutEngine(Scripted(tok, script, marker="Wrong"), tok, AgentConfig(path=spec, **cfg))
    try:
        return generate_groups(loop, tok, rows, SamplingParams(n=n, max_new_tokens=max_new, seed=1)), loop
    finally:
        loop.agents.close()


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_an_openrlhf_agent_file_runs_unchanged_each_episode_its_own_instance(tok, agent_file):
    script = ["The answer is 41.", "The answer is 40.", "The answer is 42."]
    groups, loop = _episodes(tok, agent_file, script, _rows("42", "7"))
    fb1, fb2 = "\nWrong, turn 1.\n", "\nWrong, turn 2.\n"  # turn 1 in every episode: no instance is shared
    right = groups[0].completions[0]
    assert right.token_ids == _ids(tok, script[0]) + _ids(tok, fb1) + _ids(tok, script[1]) + _ids(tok, fb2) + \
        _ids(tok, script[2])  # fmt: skip
    mask = [False] * len(_ids(tok, script[0])) + [True] * len(_ids(tok, fb1)) + [False] * len(_ids(tok, script[1])) \
        + [True] * len(_ids(tok, fb2)) + [False] * len(_ids(tok, script[2]))  # fmt: skip
    assert right.tool_mask == mask  # the feedback takes no loss
    assert right.sampler_logprobs == [0.0 if m else LOGP for m in mask]
    assert (right.turns, right.model_text, right.finish_reason) == (3, script[2], "stop")
    assert (right.env_reward, right.env_reason) == (-0.25 - 0.25 + 1.0, DONE)  # the steps' rewards summed
    assert groups[0].completions[1] == right  # the group's other episode, its own instance, the same turns
    never = groups[1].completions[0]  # label 7: wrong three times, the agent ends it
    assert (never.turns, never.env_reward, never.env_reason) == (3, -0.75, DONE)
    assert groups[0].prompt_ids == _ids(tok, tok.apply_chat_template(_rows("42")[0].prompt, tokenize=False,
                                                                     add_generation_prompt=True))  # fmt: skip
    assert right.env_logs == {"turn": 3.0, "right": 1.0}  # the last step's extra_logs (numbers only)
    assert agent_metrics([c for g in groups for c in g.completions]) == {
        "rollout/agent/turns_mean": 3.0, "rollout/agent/done_frac": 1.0, "rollout/agent/error_frac": 0.0,
        "rollout/agent/log/right/count": 4.0, "rollout/agent/log/right/mean": 0.5,
        "rollout/agent/log/turn/count": 4.0, "rollout/agent/log/turn/mean": 3.0}  # fmt: skip
    assert loop.agents.lost == set() and all(not w.keys for w in loop.agents._pool or ())
    with RewardRunner(workers=1, timeout_s=30) as runner:  # the environment verifier: the agent's reward
        score_groups(groups, tok, runner, think_from_prompt=False)
    assert groups[0].rewards == [0.5, 0.5] and groups[1].rewards == [-0.75, -0.75]
    assert groups[0].results[0].info["reason"] == DONE


def test_a_reset_may_rewrite_the_prompt_but_the_rows_resets_must_agree(tok, agent_file):
    groups, _ = _episodes(tok, agent_file, ["say 42"], _rows("42"), cls="Rewriting")
    assert groups[0].prompt_ids == _ids(tok, "Task: say 42.")  # the observation's tokens are the prompt
    from reasonrl.data.prompts import prompt_text

    assert prompt_text(tok, groups[0].problem) == "Task: say 42."  # the row as the model saw it
    assert groups[0].completions[0].env_reward == 1.0
    with pytest.raises(ValueError, match=r"for row 'r42': its 2 resets returned different observations"):
        _episodes(tok, agent_file, ["x"], _rows("42"), cls="Dice")
    with pytest.raises(ValueError, match=r"for row 'r42': reset failed \(no such level\)"):
        _episodes(tok, agent_file, ["x"], _rows("42"), cls="Broken")
    from reasonrl.errors import InputError

    loop = AgentRolloutEngine(
        Scripted(tok, ["x"]), tok, AgentConfig(path=f"{agent_file}:Rewriting", workers=1)
    )
    try:
        with pytest.raises(InputError, match=r"the observation its reset returned has \d+ tokens > "
                                              r"data.max_prompt_tokens=3"):  # fmt: skip
            loop.generate_groups(_rows("42"), SamplingParams(n=1, max_new_tokens=20), max_prompt_tokens=3)
        with pytest.raises(ValueError, match="episodes start from their rows"):
            loop.generate([[1]], SamplingParams(n=1))
    finally:
        loop.agents.close()


def test_the_token_budget_ends_an_episode_after_its_last_step(tok, agent_file):
    script = ["The answer is 41.", "The answer is 42."]
    first = len(_ids(tok, script[0]))
    # room for the first turn and its feedback, not another turn: stepped, then over
    groups, _ = _episodes(
        tok, agent_file, script, _rows("42"), n=1, max_new=first + len(_ids(tok, "\nWrong, turn 1.\n"))
    )
    c = groups[0].completions[0]
    assert (c.turns, c.token_ids, c.env_reward, c.env_reason) == (1, _ids(tok, script[0]), -0.25, UNFINISHED)
    groups, _ = _episodes(tok, agent_file, script, _rows("42"), n=1, max_new=first - 2)  # the turn itself cut
    c = groups[0].completions[0]
    assert (c.finish_reason, c.env_reward, c.env_reason) == (
        "length",
        -0.25,
        UNFINISHED,
    )  # stepped all the same


def test_a_step_that_raises_hangs_or_dies_ends_its_episode_never_the_run(tok, agent_file):
    rows = _rows("42", "43", "44", "45")
    turns = {"Say 42.": "raise", "Say 43.": "stall", "Say 44.": "die", "Say 45.": "fine"}

    class PerRow(Scripted):  # each row's every turn: its own text
        def generate(self, prompts, params):
            said = [next(t for q, t in turns.items() if q in tok.decode(p)) for p in prompts]
            return [[Completion(_ids(tok, t), t, [LOGP] * len(_ids(tok, t)))] * params.n for t in said]

    loop = AgentRolloutEngine(PerRow(tok, ["x"]), tok, AgentConfig(path=agent_file, workers=4, timeout_s=2.0))
    try:  # keys 0-3, one per worker
        groups = loop.generate_groups(rows, SamplingParams(n=1, max_new_tokens=50))
        reasons = [g.completions[0].env_reason for g in groups]
        assert reasons == ["error: step: the grader broke", "error: step: timed out after 2 s",
                           "error: step: the process of rollout.agent failed", DONE]  # fmt: skip
        assert [g.completions[0].env_reward for g in groups] == [None, None, None, -0.75]  # (3 wrong turns)
        again = loop.generate_groups(rows, SamplingParams(n=1, max_new_tokens=50))  # the pool goes on
        assert again[3].completions[0].env_reason == DONE and again[0].completions[0].turns == 1
    finally:
        loop.agents.close()
    with RewardRunner(workers=1, timeout_s=30) as runner:
        health = score_groups(groups, tok, runner, think_from_prompt=False)
    assert [g.rewards[0] for g in groups] == [0.0, 0.0, 0.0, -0.75]  # an error scores 0, never a reward
    assert health["verifier/environment/error_rate"] == 0.75


def test_a_lost_episode_answers_lost(tok, agent_file):
    loop = AgentRolloutEngine(
        Scripted(tok, ["x"]), tok, AgentConfig(path=agent_file, workers=1, timeout_s=2.0)
    )
    try:
        keys = loop.agents.new_keys(2)
        loop.agents.ask([("reset", k, {"observation": "Q", "label": "1"}) for k in keys])
        assert loop.agents.ask([("step", keys[0], {"action_text": "x"})]) == [
            ("error", "KeyError: 'observation_text'")
        ]
        state = {
            "observation_text": "Q",
            "action_text": "die",
            "label": "1",
            "sampling_params": SimpleNamespace(max_tokens=5),
        }
        got = loop.agents.ask(
            [("step", k, state) for k in keys]
        )  # side by side: both in the process that died
        assert got == [("error", "the process of rollout.agent failed")] * 2
        assert loop.agents.ask([("step", k, state) for k in keys]) == [("error", LOST)] * 2
    finally:
        loop.agents.close()


def test_which_agent_a_file_names(agent_file):
    assert agent_class(agent_file).__name__ == "AgentInstance"  # its AgentExecutor's
    assert (
        agent_class(f"{agent_file}:OldExecutor").__name__ == "OldStyle"
    )  # an override that only calls the base
    with pytest.raises(ValueError, match="OwnLoop overrides execute\\(\\); reasonrl runs the turns itself"):
        agent_class(f"{agent_file}:OwnLoop")
    with pytest.raises(ValueError, match="is not a Python file"):
        agent_class("agents.AgentInstance")
    with pytest.raises(ValueError, match="no such file"):
        agent_class("missing_agent.py")


def test_async_init_and_plain_rewards_and_bad_replies(tok, agent_file):
    groups, _ = _episodes(tok, agent_file, ["x"], _rows("42"), n=1, cls="OldExecutor")
    assert (groups[0].completions[0].env_reward, groups[0].completions[0].env_reason) == (0.5, DONE)
    groups, _ = _episodes(tok, agent_file, ["x"], _rows("42"), n=1, cls="NotANumber")
    assert (
        groups[0].completions[0].env_reason
        == "error: step: step returned rewards='high', not a finite number"
    )


def _recipe(tmp_path, **over):
    import yaml

    cfg = {"rollout": {"agent": {"path": str(tmp_path / "agent_func.py")}, **over.pop("rollout", {})}, **over}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(cfg))
    return load_config(str(tmp_path / "r.yaml"))


def test_the_recipe_says_what_cannot_work_with_an_agent(tmp_path, agent_file):
    cfg = _recipe(tmp_path, reward={"verifier": "environment"})
    assert cfg.rollout.agent.path.endswith("agent_func.py")
    for over, what in (({"rollout": {"tools": {"enabled": True}}}, "rollout.tools.enabled"),
                       ({"rollout": {"interaction": {"enabled": True}}}, "rollout.interaction.enabled"),
                       ({"algo": {"adv_estimator": "remax"}}, "algo.adv_estimator=remax")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"rollout.agent with {what}"):
            _recipe(tmp_path, **over)
    (tmp_path / "bad.py").write_text("class AgentInstance:\n    pass\n")
    with pytest.raises(
        ConfigError, match="rollout.agent.path: .*no agent instance class \\(no step method\\)"
    ):
        _recipe(tmp_path, rollout={"agent": {"path": str(tmp_path / "bad.py")}})


def test_rows_whose_score_would_ignore_the_agent_are_refused(tmp_path, agent_file):
    from reasonrl.errors import InputError
    from reasonrl.rollout.agents import check_agent_rows

    math_row = Problem([{"role": "user", "content": "1+1?"}], "2", "math", uid="m")
    cfg = _recipe(tmp_path)
    with pytest.raises(
        InputError, match="rollout.agent: no row of the train data is scored by the agent's rewards"
    ):
        check_agent_rows(cfg, [math_row], "train data")
    check_agent_rows(cfg, [math_row, *_rows("1")], "train data")  # one routed to it
    check_agent_rows(_recipe(tmp_path, reward={"weights": {"correctness": 1.0, "environment": 1.0}}), [math_row],
                     "train data")  # a term of every row's reward  # fmt: skip


def test_an_openrlhf_agent_script_converts_to_a_recipe_that_runs_its_agent(tmp_path, agent_file, monkeypatch):
    import yaml

    from reasonrl.config.foreign import convert

    # the shape of OpenRLHF's agent docs: --agent_func_path beside a remote reward the agent makes unused
    script = tmp_path / "train_agent.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen3-4B --agent_func_path agent_func.py "
                      "--remote_rm_url http://rm:5000/get_reward --advantage_estimator reinforce_baseline "
                      "--n_samples_per_prompt 4 --generate_max_len 1024\n")  # fmt: skip
    out = convert("openrlhf", script)
    r, notes = out.recipe, "\n".join(out.notes)
    assert r["rollout"]["agent"] == {"path": "agent_func.py"} and r["reward"]["verifier"] == "environment"
    assert "reward.remote_url=http://rm:5000/get_reward: not used (the agent's rewards score" in notes
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(r))
    monkeypatch.chdir(tmp_path)  # (the agent file beside the script, as OpenRLHF reads its path)
    cfg = load_config(str(tmp_path / "r.yaml"))
    assert (cfg.rollout.agent.path, cfg.reward.verifier, cfg.rollout.n) == ("agent_func.py", "environment", 4)
