"""TRL reward functions taking `environments=` (TRL's `reward_func(environments, **kwargs)` beside
`environment_factory`): each is called where the rollout's own instance lives, after the rollout's calls and
before the instance is reset for another rollout, with the same arguments as the other TRL functions; what it
gives is the trl_function verifier's value for that function. A function that raises or hangs is that
sample's verifier error; one with no environment to read is named when the recipe loads."""

from __future__ import annotations

import textwrap

import pytest
from test_environments import ENVS, _call, _loop, _tokenizer

from reasonrl.config import ConfigError, load_config
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rewards.verifiers.trl_function import ENVIRONMENT_VALUES, columns, environment_functions
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.environments import check_environment_functions, scored_problem
from reasonrl.rollout.scored import score_groups
from reasonrl.types import Completion, Problem

REWARDS = textwrap.dedent(
    """
    import asyncio, os

    def reached(environments, completions, **kwargs):
        return [1.0 if e.count == e.target else 0.0 for e in environments]

    def counted(environments, log_metric, target, solution, **kwargs):
        log_metric("count", environments[0].count)
        assert target == [environments[0].target] and solution == ["7"]  # the row's columns, TRL's way
        return [float(environments[0].count)]

    async def checked(environments, prompts, completions, **kwargs):
        await asyncio.sleep(0)
        said = completions[0][0]["content"]
        return [1.0 if said.endswith("Done.") and prompts[0][-1]["content"].endswith("Reach 3.") else 0.0]

    def said_done(completions, **kwargs):  # no environments: run by the verifier workers as always
        return [1.0 if completions[0][0]["content"].endswith("Done.") else 0.0]

    def where(environments, **kwargs):
        return [float(os.getpid())]

    def broken(environments, **kwargs):
        raise RuntimeError("no score in " + type(environments[0]).__name__)

    async def stuck(environments, **kwargs):
        await asyncio.sleep(60)
    """
)


@pytest.fixture
def modules(user_module):
    return user_module(ENVS, "fn_envs"), user_module(REWARDS, "fn_rewards")


def _rows(targets=(3, 4)):
    return [Problem([{"role": "user", "content": "Count up."}], "7", "env", extra_info={"target": t},
                    verifier="trl_function", uid=f"t{t}") for t in targets]  # fmt: skip


def _episodes(modules, functions, targets=(3, 4), **cfg):
    """Two rollouts per row that each count 2 + 1 in their own Counter, scored by `functions`."""
    envs, rewards = modules
    tok = _tokenizer()
    loop = _loop(tok, [_call(2), _call(1), "Done."], f"{envs}.Counter", **{"timeout_s": 5.0, **cfg})
    options = {"trl_function": {"functions": [f"{rewards}.{f}" for f in functions]}}
    try:
        with RewardRunner(workers=1, options=options) as scorer:
            groups = loop.generate_groups(_rows(targets), SamplingParams(n=2, max_new_tokens=400), None,
                                          (scorer, True))  # fmt: skip
            pids = {w.proc.pid for w in loop.environments._pool}
            score_groups(groups, tok, scorer)
    finally:
        loop.environments.close()  # (the scripted engine has nothing to close)
    return groups, pids


def test_a_function_reads_each_rollouts_own_instance_after_its_calls(modules):
    groups, _ = _episodes(modules, ["reached", "counted", "checked", "said_done"])
    for g, reached in zip(groups, (1.0, 0.0)):  # 2 + 1 = 3 reaches row t3's target, not row t4's
        for c, res in zip(g.completions, g.results):
            assert c.tool_calls == ("success", "success")
            assert res.info["functions"] == {
                "reached": reached,
                "counted": 3.0,
                "checked": reached,  # (its prompt, with the reset's text, says "Reach 3." on row t3 only)
                "said_done": 1.0,
            }
            assert res.score == reached + 3.0 + reached + 1.0
            assert res.info["function_log"] == {"count": 3.0}  # log_metric, from the worker process
            assert set(c.env_functions) == {"reached", "counted", "checked"}  # said_done ran as usual


def test_the_functions_run_in_the_environments_processes(modules):
    groups, pids = _episodes(modules, ["where"])
    ran = {int(res.info["functions"]["where"]) for g in groups for res in g.results}
    assert ran and ran <= pids  # where the instances live, not in the verifier workers


@pytest.mark.parametrize(
    "function, reason",
    [("broken", "RuntimeError: no score in Counter"), ("stuck", "timeout beside the environment")],
)
def test_a_function_that_raises_or_hangs_is_that_samples_verifier_error(modules, function, reason):
    groups, _ = _episodes(modules, ["reached", function], timeout_s=1.0)
    for g in groups:
        for res in g.results:
            assert res.score == 0.0 and res.reason.startswith("error:") and reason in res.reason


def test_without_an_episode_the_function_has_nothing_to_read(modules):
    _, rewards = modules
    with RewardRunner(workers=1, options={"trl_function": {"functions": [f"{rewards}.reached"]}}) as r:
        (res,), health = r.score(["Done."], _rows((3,)))
    assert (
        res.score == 0.0
        and "takes environments=, which only a rollout of rollout.tools.environment has" in (res.reason)
    )
    assert health["verifier/trl_function/error_rate"] == 1.0


def test_the_values_reach_the_verifier_with_the_row_but_not_as_a_column(modules):
    _, rewards = modules
    given = {"reached": {"value": 0.5, "metrics": {}, "extra": {}}}
    row = scored_problem(_rows((3,))[0], Completion([], "", [], env_functions=given))
    assert row.extra_info[ENVIRONMENT_VALUES] == given and ENVIRONMENT_VALUES not in columns(row)
    assert scored_problem(_rows((3,))[0], Completion([], "", [])) == _rows((3,))[0]  # (no episode: as it was)
    assert environment_functions({"functions": [f"{rewards}.reached", f"{rewards}.said_done"]}) == [
        f"{rewards}.reached"
    ]


def test_a_function_taking_environments_without_any_is_named_when_the_recipe_loads(modules):
    envs, rewards = modules
    fn = [
        f"reward.options.trl_function.functions=[{rewards}.reached]",
        "reward.weights={correctness: 1, trl_function: 1}",
    ]
    with pytest.raises(
        ConfigError, match=rf"trl_function: {rewards}.reached takes environments=.*set rollout.tools"
    ):
        load_config(None, fn)
    cfg = load_config(None, [*fn, "rollout.tools.enabled=true", "rollout.tools.format=hermes",
                             "rollout.tools.names=[]", f"rollout.tools.environment={envs}.Counter"])  # fmt: skip
    assert list(cfg.reward.options["trl_function"]["functions"]) == [f"{rewards}.reached"]
    with pytest.raises(ValueError, match="trl_function: .*--tool-environment in an eval"):
        check_environment_functions({"trl_function": {"functions": [f"{rewards}.reached"]}}, None)
    check_environment_functions({"trl_function": {"functions": [f"{rewards}.said_done"]}}, None)


def test_eval_with_such_a_function_but_no_environment_is_one_line(
    modules, tmp_path, capsys, tiny_model_and_tokenizer
):
    import json

    from reasonrl.cli import main as cli

    _, rewards = modules
    model, tok = tiny_model_and_tokenizer
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": [{"role": "user", "content": "Q"}], "data_source": "env",
                                "reward_model": {"ground_truth": "1"}, "verifier": "trl_function"}) + "\n")  # fmt: skip
    argv = ["eval", str(tmp_path / "m"), "--data", str(rows), "--verifier", "trl_function",
            "--verifier-option", "trl_function.functions=" + json.dumps([f"{rewards}.reached"])]  # fmt: skip
    capsys.readouterr()  # (what saving the model wrote)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("reasonrl: error: trl_function: ")
        and "takes environments=" in err
        and err.count("\n") == 1
    )
