"""TRL environments (`rollout.tools.environment`, TRL's `environment_factory`): an instance per rollout, reset
with the row (what it returns joins the last user message), its public methods called by name from Hermes
calls with state kept across one rollout's calls (and never shared between rollouts), its `get_reward` the
`environment` reward term; a call that hangs or kills its process costs that rollout, never the run; what
cannot work is named when the recipe loads."""

from __future__ import annotations

import textwrap

import pytest
from test_tool_rollouts import _ALPHABET, Scripted

from reasonrl.config import AgentConfig, ConfigError, RolloutConfig, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.environments import LOST, Environments, describe, given_results
from reasonrl.rollout.tools import ToolRolloutEngine
from reasonrl.types import Completion, Problem

ENVS = textwrap.dedent(
    '''
    import os, random, time

    class Counter:
        """A count the model raises; rewarded when it reaches the row's target."""

        def __init__(self):
            self.count, self.target = 0, None

        def reset(self, target=3, **kwargs):
            self.count, self.target = 0, int(target)
            return f" Reach {self.target}."

        def increment(self, by: int) -> int:
            """Add to the count.

            Args:
                by: how much to add
            """
            self.count += by
            return self.count

        def where(self) -> str:
            """Which instance this is (its process and object)."""
            return f"{os.getpid()}:{id(self)}"

        def stall(self, s: int) -> int:
            """Sleep.

            Args:
                s: seconds
            """
            time.sleep(s)
            return s

        def die(self) -> int:
            """Kill the process."""
            os._exit(3)

        def get_reward(self) -> float:
            return 1.0 if self.count == self.target else 0.0

    class Echo:
        def reset(self, **kwargs):
            return None

        def echo(self, text: str) -> str:
            """Say it back.

            Args:
                text: what to say
            """
            return text

    class Dice(Echo):
        def reset(self, **kwargs):
            return str(random.random())

    class OnOneLoop(Echo):
        """Async, holding what it opened on the loop (an aiohttp session's way) across its calls."""

        async def reset(self, **kwargs):
            import asyncio

            self.loop = asyncio.get_running_loop()
            return None

        async def same(self) -> str:
            """Whether this call runs on the loop reset ran on."""
            import asyncio

            return str(asyncio.get_running_loop() is self.loop)

    class Broken(Echo):
        def reset(self, **kwargs):
            raise RuntimeError("no such level")

    class BadReward(Counter):
        def get_reward(self):
            return "high"

    class NoReset:
        def echo(self, text: str) -> str:
            """Say it back.

            Args:
                text: what to say
            """
            return text

    class Undocumented(Echo):
        def shout(self, text):
            return text.upper()

    class Shadow(Echo):
        def python(self, code: str) -> str:
            """Shadows the built-in tool.

            Args:
                code: code
            """
            return code
    '''
)


@pytest.fixture
def envs(user_module):
    return user_module(ENVS, "my_envs")


def test_each_rollout_has_its_own_instance_whose_state_lasts_its_calls(envs):
    e = Environments(f"{envs}.Counter", 2, 2.0)
    try:
        keys, resets = e.begin([("", {"target": 3}), ("", {"target": 5}), ("", {"target": 2})])
        assert resets == [("ok", " Reach 3."), ("ok", " Reach 5."), ("ok", " Reach 2.")]
        got = e.ask([("call", keys[0], "increment", {"by": 2}), ("call", keys[1], "increment", {"by": 5}),
                     ("call", keys[0], "increment", {"by": 1}), ("call", keys[2], "increment", {"b": 1}),
                     ("call", keys[2], "reset", {}), ("call", keys[2], "get_reward", {})])  # fmt: skip
        assert got == [("ok", "2"), ("ok", "5"), ("ok", "3"),  # rollout 0's count goes on from its last call
                       ("error", "TypeError: missing a required argument: 'by'"),  # the model's mistake, named
                       ("error", "there is no tool named 'reset'"), ("error", "there is no tool named 'get_reward'")]  # fmt: skip
        assert e.ask([("reward", k) for k in keys]) == [("ok", 1.0), ("ok", 1.0), ("ok", 0.0)]
        where = e.ask([("call", k, "where", {}) for k in keys])
        assert len(set(where)) == 3  # three instances
        e.end(keys)
        again, _ = e.begin([("", {"target": 1})] * 3)
        # keys 3 and 5 go to the process that held rollout 1's instance (reset again, and one made), 4 to the
        # process that held 0's and 2's (one reset again): construct once, reset often
        assert len(set(e.ask([("call", k, "where", {}) for k in again])) & set(where)) == 2
        assert e.ask([("call", again[0], "increment", {"by": 1}), ("reward", again[0])]) == [
            ("ok", "1"),
            ("ok", 1.0),
        ]
    finally:
        e.close()


def test_a_hang_or_a_crash_costs_the_rollouts_of_that_process_and_the_pool_goes_on(envs):
    e = Environments(f"{envs}.Counter", 2, 1.0)
    try:
        keys, _ = e.begin([("", {})] * 4)  # keys 0, 2 in one process; 1, 3 in the other
        got = e.ask([("call", keys[0], "stall", {"s": 30}), ("call", keys[1], "die", {}),
                     ("call", keys[2], "increment", {"by": 1}), ("call", keys[3], "increment", {"by": 1})])  # fmt: skip
        # each process's calls run side by side: 2's waited on 0's, which blocked its process; 3's died with 1's
        assert got == [("timeout", "timed out after 1 s"), ("error", "the process of rollout.tools.environment failed"),
                       ("timeout", "timed out after 1 s"), ("error", "the process of rollout.tools.environment failed")]  # fmt: skip
        assert e.ask([("reward", k) for k in keys]) == [("error", LOST)] * 4
        e.end(keys)
        fresh, resets = e.begin([("", {"target": 1})] * 2)  # new processes, new instances
        assert resets == [("ok", " Reach 1.")] * 2
        assert e.ask([("call", k, "increment", {"by": 1}) for k in fresh]) == [("ok", "1")] * 2
    finally:
        e.close()


def test_an_async_environment_keeps_one_event_loop_across_its_calls(envs):
    e = Environments(f"{envs}.OnOneLoop", 1, 2.0)
    try:
        keys, _ = e.begin([("", {})] * 2)
        assert e.ask([("call", k, "same", {}) for k in keys] * 2) == [("ok", "True")] * 4
    finally:
        e.close()


def test_a_reward_that_is_not_a_number_is_an_error(envs):
    e = Environments(f"{envs}.BadReward", 1, 2.0)
    try:
        keys, _ = e.begin([("", {})])
        assert e.ask([("reward", keys[0])]) == [("error", "get_reward returned 'high', not a finite number")]
    finally:
        e.close()


def _tokenizer():
    tok = build_tokenizer([_ALPHABET + ' <tool_call> </tool_call> <tool_response> </tool_response> "name": '
                           '"increment", "arguments": "by": Reach no tool named tools: where stall die echo '
                           "im_start im_end user assistant"], 400)  # fmt: skip
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    return tok


def _call(by: int) -> str:
    return f'<tool_call>{{"name": "increment", "arguments": {{"by": {by}}}}}</tool_call>'


def _loop(tok, script, environment, **cfg):
    tools = ToolsConfig(enabled=True, format="hermes", names=[], environment=environment, **cfg)
    return ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok, tools)


def test_rollouts_are_episodes_reset_from_their_rows_and_rewarded_by_their_instance(envs):
    tok = _tokenizer()
    script = [_call(2), _call(1), "Done."]
    loop = _loop(tok, script, f"{envs}.Counter", timeout_s=5.0)
    rows = [
        Problem([{"role": "user", "content": "Count up."}], "", "env", extra_info={"target": t})
        for t in (3, 4)
    ]
    try:
        groups = loop.generate_groups(rows, SamplingParams(n=2, max_new_tokens=400))
    finally:
        loop.environments.close()  # (the scripted engine has nothing to close)
    assert [g.problem.prompt[-1]["content"] for g in groups] == ["Count up. Reach 3.", "Count up. Reach 4."]
    assert rows[0].prompt[-1]["content"] == "Count up."  # the row itself is left as it was
    names = [t["function"]["name"] for t in groups[0].problem.chat_template_kwargs["tools"]]
    assert names == ["die", "increment", "stall", "where"]  # the methods' schemas, for the prompt's tool list
    assert "Count up. Reach 3.<|assistant|>" in tok.decode(groups[0].prompt_ids)  # what the engine was given
    for g, reward in zip(groups, (1.0, 0.0)):  # 2 + 1 = 3 reaches row 0's target, not row 1's
        for c in g.completions:  # each of the two rollouts counted from 0: an instance each
            assert c.tool_calls == ("success", "success")
            outputs = [t.split("\n</tool_response>")[0] for t in c.text.split("<tool_response>\n")[1:]]
            assert outputs[:2] == ["2", "3"]
            assert (c.env_reward, c.env_reason) == (reward, "environment_reward")
    with pytest.raises(ValueError, match="rollouts start from their rows"):
        loop.generate([groups[0].prompt_ids], SamplingParams(max_new_tokens=10))


@pytest.mark.parametrize(
    "env, message",
    [
        ("Dice", "its 2 resets returned different texts; the rollouts of a row share one prompt"),
        ("Broken", "for row 'r0': reset failed (no such level)"),
    ],
)
def test_a_row_whose_resets_fail_or_differ_is_named(envs, env, message):
    tok = _tokenizer()
    loop = _loop(tok, ["Done."], f"{envs}.{env}")
    try:
        with pytest.raises(ValueError, match="rollout.tools.environment") as e:
            loop.generate_groups([Problem([{"role": "user", "content": "Q"}], "", "env", uid="r0")],
                                 SamplingParams(n=2, max_new_tokens=40))  # fmt: skip
    finally:
        loop.environments.close()  # (the scripted engine has nothing to close)
    assert message in str(e.value)


def test_rows_pick_their_environment_by_their_column_and_see_only_its_tools(envs):
    tok = _tokenizer()
    script = ['<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>', "Done."]
    loop = _loop(tok, script, {"count": f"{envs}.Counter", "echo": f"{envs}.Echo"})
    rows = [Problem([{"role": "user", "content": "Q"}], "", "env", extra_info={"environment": name}, uid=name)
            for name in ("echo", "count")]  # fmt: skip
    try:
        groups = loop.generate_groups(rows, SamplingParams(n=1, max_new_tokens=400))
        with pytest.raises(ValueError, match="row 'x': its environment column is 'chess', not one of"):
            loop.generate_groups([Problem([{"role": "user", "content": "Q"}], "", "env",
                                          extra_info={"environment": "chess"}, uid="x")], SamplingParams())  # fmt: skip
    finally:
        loop.environments.close()  # (the scripted engine has nothing to close)
    echo, count = (g.completions[0] for g in groups)
    assert [t["function"]["name"] for t in groups[0].problem.chat_template_kwargs["tools"]] == ["echo"]
    assert echo.tool_calls == ("success",) and "<tool_response>\nhi\n</tool_response>" in echo.text
    assert count.tool_calls == ("invalid",) and "no tool named 'echo'" in count.text  # not that row's tool
    assert (echo.env_reward, echo.env_reason) == (None, "no_environment_reward")  # Echo has no get_reward
    assert (count.env_reward, count.env_reason) == (0.0, "environment_reward")


def test_the_environment_reward_is_a_term_the_runner_takes_as_given(envs):
    p = Problem([{"role": "user", "content": "Q"}], "", "env", verifier="environment")
    done = [Completion([], "", [], env_reward=0.75, env_reason="environment_reward"),
            Completion([], "", [], env_reason="error: get_reward: ValueError: x"), Completion([], "", [])]  # fmt: skip
    given = given_results(done)
    assert given[2] is None and given[0]["environment"].score == 0.75
    with RewardRunner(workers=1, weights={"correctness": 1.0, "environment": 0.5}) as r:
        routed, health = r.score(["", "", ""], [p] * 3, given=given)
        p_math = Problem([{"role": "user", "content": "Q"}], "4", "math")
        beside, _ = r.score(["\\boxed{4}"], [p_math], given=[{"environment": given[0]["environment"]}])
    assert [x.score for x in routed] == [0.75 * 1.5, 0.0, 0.0]  # routed to it, and a term beside itself
    assert [x.correctness for x in routed] == [0.75, 0.0, 0.0]
    assert routed[1].reason == "error: get_reward: ValueError: x"
    assert routed[2].reason.startswith("error: the completion was no environment's rollout")  # never a reward
    assert health["verifier/environment/error_rate"] == pytest.approx(2 / 3)
    assert beside[0].score == 1.0 + 0.5 * 0.75 and beside[0].info["terms"] == {
        "correctness": 1.0,
        "environment": 0.75,
    }


def test_describe_probes_one_instance_of_each(envs):
    (d,) = describe(f"{envs}.Counter").values()
    assert d["tools"] == ["die", "increment", "stall", "where"] and d["reward"] is True
    assert d["schemas"][1]["function"]["parameters"]["properties"] == {
        "by": {"type": "integer", "description": "how much to add"}
    }


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["rollout.tools.format=markdown"],
            "needs calls that name their tool: format deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, mistral, mistral_v7, muse_glimmer, qwen3_coder, not markdown",
        ),
        (["rollout.tools.environment={m}.NoReset"], "has no reset method"),
        (["rollout.tools.environment={m}.Undocumented"], "method 'shout' has no schema"),
        (["rollout.tools.environment={m}.Shadow"], "tool 'python' has the name of another tool"),
        (["rollout.tools.environment={m}.Nothing"], "defines no function 'Nothing'"),
        (
            ["rollout.tools.environment={m}.Echo", "reward.weights={{correctness: 1, environment: 1}}"],
            "no environment of rollout.tools.environment defines get_reward",
        ),
        (["rollout.interaction.enabled=true"], "with rollout.interaction.enabled"),
        (["algo.adv_estimator=remax"], "a greedy baseline rollout"),
    ],
)
def test_what_cannot_work_is_named_when_the_recipe_loads(envs, extra, message):
    base = ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
            "rollout.tools.environment={m}.Counter"]  # fmt: skip
    overrides = {x.split("=")[0]: x for x in base + extra}  # (a later setting of a key wins)
    with pytest.raises(ConfigError) as e:
        load_config(None, [x.format(m=envs) for x in overrides.values()])
    assert message in str(e.value)


def test_a_recipe_with_an_environment_loads(envs):
    cfg = load_config(None, ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
                             f"rollout.tools.environment={{a: {envs}.Counter, b: {envs}.Echo}}",
                             "reward.weights={correctness: 1, environment: 1}"])  # fmt: skip
    assert dict(cfg.rollout.tools.environment) == {"a": f"{envs}.Counter", "b": f"{envs}.Echo"}


def test_trl_rows_an_environment_scores_route_to_it_with_their_columns(tmp_path):
    """`reasonrl data prepare trl --option answer=environment`: rows without an answer, routed to the
    `environment` verifier, their columns (the one picking the environment too) kept for `reset`."""
    import json

    from reasonrl.data.prepare import convert_files
    from reasonrl.rewards import check_routable
    from reasonrl.rewards.verifiers.trl_function import columns

    src = tmp_path / "envs.jsonl"
    src.write_text(json.dumps({"prompt": "Play.", "environment": "wordle", "secret": "crane"}) + "\n")
    (p,) = convert_files("trl", [str(src)], {"answer": "environment"})[0]
    assert (p.ground_truth, p.verifier, p.extra_info["environment"]) == ("", "environment", "wordle")
    assert columns(p)["secret"] == "crane"  # what reset(**row) gets
    check_routable([p], "train data")  # routable: its scores come from the rollouts


def test_a_prompt_over_the_budget_with_the_environments_text_is_named(envs):
    from reasonrl.errors import InputError

    tok = _tokenizer()
    loop = _loop(tok, ["Done."], f"{envs}.Counter")
    row = Problem([{"role": "user", "content": "Q"}], "", "env", uid="r0")
    try:
        with pytest.raises(
            InputError, match=r"uid 'r0'.*> data.max_prompt_tokens=3 \(with rollout.tools.environment"
        ):
            loop.generate_groups([row], SamplingParams(max_new_tokens=10), max_prompt_tokens=3)
        assert loop.environments.lost == set() and all(not w.keys for w in loop.environments._pool)  # ended
    finally:
        loop.environments.close()


def test_eval_tool_environment_needs_tools_and_names_a_class_that_cannot_work(envs):
    from reasonrl.cli.eval_rollout import tools_arg

    with pytest.raises(ConfigError, match="--tool-environment: no tools to add it to"):
        tools_arg(None, None, environments=[f"{envs}.Counter"])
    with pytest.raises(ConfigError, match="rollout.tools.environment: .*has no reset method"):
        tools_arg("hermes", None, environments=[f"{envs}.NoReset"])
    named = tools_arg("hermes", None, environments=[f"a={envs}.Counter", f"b={envs}.Echo"])
    assert named.environment == {"a": f"{envs}.Counter", "b": f"{envs}.Echo"}


def test_rows_that_cannot_be_episodes_are_named_when_the_data_loads(envs):
    from reasonrl.errors import InputError
    from reasonrl.rollout.environments import check_rows

    scored = Problem([{"role": "user", "content": "Q"}], "", "env", verifier="environment", uid="e0")
    plain = Problem([{"role": "user", "content": "Q"}], "4", "math", uid="m0")
    with pytest.raises(
        InputError, match=r"train data row 1 \(uid 'e0'\): routed to the environment verifier"
    ):
        check_rows([plain, scored], "train data", RolloutConfig())
    check_rows([plain, scored], "train data",
               RolloutConfig(tools=ToolsConfig(enabled=True, environment=f"{envs}.Counter")))  # fmt: skip
    check_rows(
        [plain, scored], "train data", RolloutConfig(agent=AgentConfig(path="agent_func.py"))
    )  # (an agent's)
    two = ToolsConfig(enabled=True, environment={"count": f"{envs}.Counter", "echo": f"{envs}.Echo"})
    with pytest.raises(
        InputError, match=r"row 0 \(uid 'm0'\): its environment column is None, not one of .*count, echo"
    ):
        check_rows([plain], "validation data", RolloutConfig(tools=two))
