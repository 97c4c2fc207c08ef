"""verl's interaction classes (`rollout.interaction.verl_config`, verl's `interaction_config_path`): a class
written against `verl.interactions.base.BaseInteraction` runs unchanged, without verl installed; it answers
each attempt (its text a user turn with no loss, its verdict ending the conversation); the routed verifier
scores the last attempt and the turn scores, summed, travel as the `environment` term.

A scripted engine stands in for the model: a sample's k-th attempt is fixed text (k = the feedback turns
already in its prompt, counted by "Wrong")."""

from __future__ import annotations

import textwrap

import pytest
from test_tool_rollouts import _ALPHABET, LOGP, Scripted

from reasonrl.config import ConfigError, InteractionConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.interaction import Interaction, interaction_metrics
from reasonrl.rollout.scored import score_groups
from reasonrl.rollout.verl_interactions import DONE, UNFINISHED, interaction_specs
from reasonrl.types import Problem, RolloutGroup

HINTS = textwrap.dedent(
    """
    from verl.interactions.base import BaseInteraction


    class HintInteraction(BaseInteraction):
        def __init__(self, config):
            super().__init__(config)
            self._instance_dict = {}

        async def start_interaction(self, instance_id=None, ground_truth=None, **kwargs):
            self._instance_dict[instance_id] = {"ground_truth": ground_truth, "turns": 0}
            return instance_id

        async def generate_response(self, instance_id, messages, **kwargs):
            state = self._instance_dict[instance_id]
            state["turns"] += 1
            last = next(m["content"] for m in reversed(messages) if m["role"] == "assistant")
            if state["turns"] > 1:  # the conversation so far, as verl's messages
                assert messages[-2] == {"role": "user", "content": f"Wrong, {self.config['hint']} {state['turns'] - 1}"}
            right = state["ground_truth"] in last
            text = "Right." if right else f"Wrong, {self.config['hint']} {state['turns']}"
            return right, text, 1.0 if right else -0.5, {}

        async def finalize_interaction(self, instance_id, **kwargs):
            del self._instance_dict[instance_id]


    class Broken(HintInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            raise RuntimeError("the judge is down")


    class Odd(HintInteraction):
        async def generate_response(self, instance_id, messages, **kwargs):
            return False, "Wrong", float("nan"), {}


    class Mute(BaseInteraction):
        generate_response = None
    """
)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer([_ALPHABET + " Wrong, think again Right. The answer is"], 300)


@pytest.fixture
def config(user_module, tmp_path):
    m = user_module(HINTS, "my_interactions")
    path = tmp_path / "interaction_config.yaml"
    path.write_text(f"interaction:\n  - name: hints\n    class_name: {m}.HintInteraction\n    config:\n"
                    f"      hint: think again\n  - class_name: {m}.BrokenInteraction\n"  # (named "broken")
                    f"  - name: mute\n    class_name: {m}.Mute\n")  # fmt: skip
    (tmp_path / "mod.txt").write_text(m)
    return path


def _yaml(config, only: str) -> str:
    """A config file holding only the interaction `only` of `config`'s module."""
    m = (config.parent / "mod.txt").read_text()
    path = config.parent / f"{only}.yaml"
    cls = {"hints": "HintInteraction", "broken": "Broken", "mute": "Mute", "odd": "Odd"}[only]
    path.write_text(
        f"interaction:\n  - name: {only}\n    class_name: {m}.{cls}\n    config: {{hint: think again}}\n"
    )
    return str(path)


def _run(tok, path, script, truth="42", n=2, max_turns=3, max_new=300, rows=1):
    inter = Interaction(InteractionConfig(enabled=True, turn="\n{message}\n", max_turns=max_turns, verl_config=path,
                                          workers=1, timeout_s=5.0), tok)  # fmt: skip
    engine = Scripted(tok, script, marker="Wrong")
    problems = [
        Problem([{"role": "user", "content": "6*7?"}], truth, "math", uid=f"q{i}") for i in range(rows)
    ]
    prompt = tok("Q", add_special_tokens=False)["input_ids"]
    params = SamplingParams(n=n, max_new_tokens=max_new, seed=1)
    groups = [
        RolloutGroup(p, prompt, cs) for p, cs in zip(problems, engine.generate([prompt] * rows, params))
    ]
    try:
        inter.run(engine, None, groups, params, think_from_prompt=False)
    finally:
        inter.close()
    return groups


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_a_verl_interaction_class_answers_each_attempt_and_its_turn_scores_are_summed(tok, config):
    script = ["The answer is 41.", "The answer is 42."]
    (g,) = _run(tok, _yaml(config, "hints"), script)
    c = g.completions[0]
    feedback = _ids(tok, "\nWrong, think again 1\n")  # turn 1 in each rollout: its own state by instance_id
    assert c.token_ids == _ids(tok, script[0]) + feedback + _ids(tok, script[1])
    assert c.tool_mask == [False] * len(_ids(tok, script[0])) + [True] * len(feedback) + [False] * len(
        _ids(tok, script[1])
    )
    assert c.sampler_logprobs == [0.0 if m else LOGP for m in c.tool_mask]
    assert (c.turns, c.model_text, c.env_reward, c.env_reason) == (2, script[1], -0.5 + 1.0, DONE)
    assert g.completions[1] == c
    with RewardRunner(workers=1, timeout_s=30) as runner:  # the routed verifier scores the last attempt
        score_groups([g], tok, runner, think_from_prompt=False)
    assert g.rewards == [1.0, 1.0]
    assert interaction_metrics([g])["rollout/interaction/recovered_frac"] == 1.0


def test_a_directory_named_verl_in_the_working_directory_is_not_verl(tok, config):
    """(A run directory called verl beside the config: a namespace package to the worker's imports.)"""
    (config.parent / "verl").mkdir()
    (config.parent / "openrlhf").mkdir()
    (g,) = _run(tok, _yaml(config, "hints"), ["The answer is 42."], n=1)
    assert g.completions[0].env_reason == DONE  # (the worker took the stand-in base, not the directory)


def test_attempts_end_at_max_turns_as_verls_loop_ends_them(tok, config):
    (g,) = _run(tok, _yaml(config, "hints"), ["The answer is 1."] * 4, truth="7", n=1, max_turns=3)
    c = g.completions[0]
    # three attempts, answered after the first two only (verl asks no interaction after the last turn)
    assert (c.turns, c.env_reward, c.env_reason) == (3, -1.0, UNFINISHED)
    (g,) = _run(tok, _yaml(config, "hints"), ["The answer is 1."] * 4, truth="7", n=1, max_new=12)
    assert g.completions[0].turns == 1 and g.completions[0].env_reason == UNFINISHED  # no room for feedback


def test_a_class_that_raises_ends_its_rollouts_with_an_error(tok, config):
    (g,) = _run(tok, _yaml(config, "broken"), ["The answer is 1."], n=2)
    assert {(c.env_reward, c.env_reason) for c in g.completions} == {
        (None, "error: generate_response: the judge is down")}  # fmt: skip
    assert all(c.turns == 1 for c in g.completions)
    (g,) = _run(tok, _yaml(config, "odd"), ["The answer is 1."], n=1)  # a score that is no number
    assert g.completions[0].env_reason == ("error: generate_response: generate_response returned the turn "
                                           "score=nan, not a finite number")  # fmt: skip


def test_the_config_file_is_read_as_verl_reads_it(tmp_path, config):
    specs = interaction_specs(str(config))
    assert list(specs) == ["hints", "broken", "mute"]  # a class without a name: its name less "Interaction"
    assert specs["hints"][1] == {"hint": "think again"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "interaction:\n  - name: a\n    class_name: x.AInteraction\n  - name: a\n    class_name: x.B\n"
    )
    with pytest.raises(ValueError, match="interaction name 'a' twice"):
        interaction_specs(str(bad))
    with pytest.raises(ValueError, match="no such file"):
        interaction_specs(str(tmp_path / "none.yaml"))


def _recipe(tmp_path, path):
    import yaml

    (tmp_path / "r.yaml").write_text(
        yaml.safe_dump({"rollout": {"interaction": {"enabled": True, "verl_config": path}}})
    )
    return load_config(str(tmp_path / "r.yaml"))


def test_the_recipe_loads_the_classes_or_says_why_not(tmp_path, config):
    assert _recipe(tmp_path, _yaml(config, "hints")).rollout.interaction.verl_config.endswith("hints.yaml")
    with pytest.raises(ConfigError, match="verl_config: .*interaction 'mute' .*has no generate_response"):
        _recipe(tmp_path, _yaml(config, "mute"))
    with pytest.raises(ConfigError, match="verl_config: .*no such file"):
        _recipe(tmp_path, str(tmp_path / "none.yaml"))


def test_a_row_picks_its_interaction_by_its_interaction_kwargs(config):
    from reasonrl.rollout.verl_interactions import interaction_kwargs

    row = Problem([{"role": "user", "content": "Q"}], "4", "math", uid="r",
                  extra_info={"interaction_kwargs": {"name": "hints", "query": "Q", "ground_truth": "4"}})  # fmt: skip
    assert interaction_kwargs(row, ["hints", "broken"]) == (
        "hints",
        {"name": "hints", "query": "Q", "ground_truth": "4"},
    )
    plain = Problem([{"role": "user", "content": "Q"}], "4", "math", uid="p")
    assert interaction_kwargs(plain, ["hints"]) == ("hints", {"name": "hints", "ground_truth": "4"})
    with pytest.raises(ValueError, match=r"row 'p': its interaction_kwargs name None is not one of"):
        interaction_kwargs(plain, ["hints", "broken"])
