"""verl's tool classes (`rollout.tools.verl_config`, verl's `multi_turn.tool_config_path`): a tool file written
against `verl.tools.base_tool.BaseTool` runs unchanged without verl; each call is verl's create / execute /
release with the row's `tools_kwargs`, its text the tool turn, its step reward collected (summed: the
`environment` term; listed: `extra_info["tool_rewards"]` of a verl reward function); what cannot work is named
when the recipe loads."""

from __future__ import annotations

import sys
import textwrap
from types import SimpleNamespace

import pytest
from test_environments import _tokenizer
from test_tool_rollouts import Scripted

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.environments import LOST, given_results, scored_problem
from reasonrl.rollout.scored import score_groups
from reasonrl.rollout.tools import ToolRolloutEngine
from reasonrl.rollout.verl_tools import VerlTools, describe
from reasonrl.types import Completion, Problem

TOOLS = textwrap.dedent(
    '''
    import os, time
    from typing import Any, Optional
    from uuid import uuid4

    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
    from verl.utils.rollout_trace import rollout_trace_op

    LOG = []  # (method, instance_id, ...) of every call, in this process

    class AnswerTool(BaseTool):
        """verl's Gsm8kTool, with the row's answer compared exactly."""

        def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema):
            super().__init__(config, tool_schema)
            self._instance_dict = {}

        async def create(self, instance_id: Optional[str] = None, ground_truth: Optional[str] = None, **kwargs):
            instance_id = instance_id or str(uuid4())
            ground_truth = ground_truth or kwargs.get("create_kwargs", {}).get("ground_truth")
            self._instance_dict[instance_id] = {"ground_truth": ground_truth}
            LOG.append(("create", instance_id, ground_truth))
            return instance_id, ToolResponse()

        @rollout_trace_op
        async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs):
            data = kwargs["agent_data"]
            data.extra_fields["calls"] = data.extra_fields.get("calls", 0) + 1
            right = str(parameters.get("answer")) == self._instance_dict[instance_id]["ground_truth"]
            reward = self.config.get("bonus", 1.0) if right else -0.25
            return ToolResponse(text=f"call {data.extra_fields['calls']}: {'right' if right else 'wrong'}"), reward, {}

        async def release(self, instance_id: str, **kwargs) -> None:
            LOG.append(("release", instance_id))
            del self._instance_dict[instance_id]

    class OwnSchema(BaseTool):
        """An older tool: its schema is its own, execute is plain, create returns the id alone and execute
        the text alone."""

        def get_openai_tool_schema(self):
            return OpenAIFunctionToolSchema.model_validate({"type": "function", "function": {
                "name": "where", "description": "Which process this is.",
                "parameters": {"type": "object", "properties": {}, "required": []}}})

        def create(self, instance_id=None, **kwargs):
            return "only"

        def execute(self, instance_id, parameters, **kwargs):
            if parameters.get("hang"):
                time.sleep(30)
            if parameters.get("die"):
                os._exit(3)
            if parameters.get("raise"):
                raise RuntimeError("no such place")
            return str(os.getpid()), None, {}

    class Reveal(AnswerTool):
        async def execute(self, instance_id, parameters, **kwargs):
            return ToolResponse(text="it is " + chr(92) + "boxed{" + self._instance_dict[instance_id]["ground_truth"] + "}"), 1.0, {}

    class Meet(BaseTool):
        """Answers once `parameters["n"]` calls wait together (or `wait` s pass): a batch's calls run side
        by side."""

        waiting = 0

        async def execute(self, instance_id, parameters, **kwargs):
            import asyncio

            Meet.waiting += 1
            for _ in range(int(parameters.get("wait", 0)) * 100 or 10**6):
                if Meet.waiting >= parameters.get("n", 10**9):
                    return ToolResponse(text=f"met {Meet.waiting}"), None, {}
                await asyncio.sleep(0.01)
            Meet.waiting -= 1
            return ToolResponse(text="waited"), None, {}

    class NaNReward(OwnSchema):
        def execute(self, instance_id, parameters, **kwargs):
            return ToolResponse(text="x"), float("nan"), {}
    '''
)

SCHEMA = {"type": "function", "function": {"name": "check_answer", "description": "Check an answer.",
          "parameters": {"type": "object", "properties": {"answer": {"type": "string", "description": "it"}},
                         "required": ["answer"]}}}  # fmt: skip


def _config(tmp_path, *tools) -> str:
    import yaml

    path = tmp_path / "tool_config.yaml"
    path.write_text(yaml.safe_dump({"tools": list(tools)}))
    return str(path)


@pytest.fixture
def verl_file(tmp_path, user_module):
    m = user_module(TOOLS, "my_verl_tools")
    answer = {
        "class_name": f"{m}.AnswerTool",
        "config": {"type": "native", "bonus": 2.0},
        "tool_schema": SCHEMA,
    }
    own = {"class_name": f"{m}.OwnSchema", "config": {"type": "native"}}
    return _config(tmp_path, answer, own), m


def test_the_file_loads_without_verl_beside_verls_interaction_stand_in(verl_file):
    from reasonrl.rollout.verl_interactions import BaseInteraction
    from reasonrl.user_code import stand_in

    path, _ = verl_file
    d = describe(path)[""]
    stand_in("verl.interactions.base", [BaseInteraction])  # (after the tools' stand-ins: both in one verl)
    import verl
    from verl.interactions.base import BaseInteraction as Registered
    from verl.tools.base_tool import BaseTool

    assert Registered is BaseInteraction and BaseTool.__module__ == "reasonrl.rollout.verl_tools"
    assert verl.interactions.base.BaseInteraction is Registered and verl.tools.base_tool.BaseTool is BaseTool

    assert "verl.tools.base_tool" in sys.modules and d["tools"] == ["check_answer", "where"] and d["reward"]
    # the file's schema as given (pydantic's exclude_unset: no strict added); the class's own, as it made it
    assert d["schemas"] == [SCHEMA, {"type": "function", "function": {
        "name": "where", "description": "Which process this is.",
        "parameters": {"type": "object", "properties": {}, "required": []}}}]  # fmt: skip


def test_each_call_is_created_executed_and_released_with_the_rows_create_kwargs(verl_file):
    path, m = verl_file
    t = VerlTools(path, 2, 5.0)
    kwargs = {"check_answer": {"create_kwargs": {"ground_truth": "7"}}}
    try:
        keys, resets = t.begin([("", {"tools_kwargs": kwargs}), ("", {"tools_kwargs": kwargs}), ("", {})])
        assert resets == [("ok", None)] * 3  # verl's tools add nothing to the prompt
        got = t.ask([("call", keys[0], "check_answer", {"answer": "6"}), ("call", keys[0], "check_answer", {"answer": 7}),
                     ("call", keys[1], "check_answer", {"answer": "7"}), ("call", keys[2], "check_answer", {"answer": "7"}),
                     ("call", keys[1], "nothing", {}), ("call", keys[1], "where", {"raise": True})])  # fmt: skip
        # agent_data.extra_fields lasts a rollout's calls; row 2 has no tools_kwargs: no ground truth
        assert got == [("ok", "call 1: wrong"), ("ok", "call 2: right"), ("ok", "call 1: right"),
                       ("ok", "call 1: wrong"), ("error", "there is no tool named 'nothing'"),
                       ("error", "no such place")]  # fmt: skip
        assert t.ask([("reward", k) for k in keys]) == [("ok", [-0.25, 2.0]), ("ok", [2.0]), ("ok", [-0.25])]
        log = t.ask([("call", keys[0], "where", {})])[0][1]
        assert log.isdigit()  # (OwnSchema: an older tool's plain text, and no reward: None is not collected)
        assert t.ask([("reward", keys[0])]) == [("ok", [-0.25, 2.0])]
    finally:
        t.end(keys)
        t.close()


def test_instances_are_released_even_when_execute_raises(verl_file, tmp_path):
    path, m = verl_file
    from reasonrl.rollout.verl_tools import _handle, load_tools

    state: dict = {}
    _handle("start", -1, [], {"": path}, state)
    _handle(
        "reset",
        0,
        ["", {"tools_kwargs": {"check_answer": {"create_kwargs": {"ground_truth": "1"}}}}],
        {},
        state,
    )
    assert _handle("call", 0, ["check_answer", {"answer": "1"}], {}, state) == "call 1: right"
    tool = state["tools"]["check_answer"]
    log = sys.modules[m].LOG
    assert (
        [e[0] for e in log[-2:]] == ["create", "release"] and log[-2][2] == "1" and log[-2][1] == log[-1][1]
    )
    assert tool._instance_dict == {}  # released
    lacking = SimpleNamespace(tools_kwargs={}, tool_rewards=[])  # no extra_fields: execute raises
    with pytest.raises(AttributeError):  # after create: the instance released all the same
        _handle("call", 0, ["check_answer", {"answer": "1"}], {}, {**state, "live": {0: lacking}})
    assert log[-1][0] == "release" and tool._instance_dict == {}
    bad = _config(tmp_path, {"class_name": f"{m}.NaNReward", "config": {"type": "native"}})
    s2: dict = {"tools": load_tools(bad)}
    _handle("reset", 0, ["", {}], {}, s2)
    with pytest.raises(ValueError, match="execute returned the tool reward=nan, not a finite number"):
        _handle("call", 0, ["where", {}], {}, s2)
    with pytest.raises(ValueError, match="its tools_kwargs is"):
        _handle("reset", 1, ["", {"tools_kwargs": {"where": 3}}], {}, s2)


def test_a_hang_or_a_crash_costs_the_rollouts_of_that_process(verl_file):
    path, _ = verl_file
    t = VerlTools(path, 2, 1.0)
    try:
        keys, _ = t.begin([("", {})] * 4)
        got = t.ask([("call", keys[0], "where", {"hang": True}), ("call", keys[1], "where", {"die": True}),
                     ("call", keys[2], "where", {})])  # fmt: skip
        # key 2's call, in key 0's process, waited on the call blocking its event loop: it timed out too
        assert got == [("timeout", "timed out after 1 s"), ("error", "the process of rollout.tools.verl_config failed"),
                       ("timeout", "timed out after 1 s")]  # fmt: skip
        assert t.ask([("reward", k) for k in keys]) == [("error", LOST)] * 4
    finally:
        t.end(keys)
        t.close()


def test_the_calls_of_a_batch_run_side_by_side_and_an_awaited_hang_costs_only_its_call(verl_file, tmp_path):
    """One process, four rollouts: their calls wait for each other (each returns once all four are in) and
    all return; an async call that outlives the limit is cancelled, its process and state go on."""
    _, m = verl_file
    meet = {"class_name": f"{m}.Meet", "tool_schema": {"type": "function", "function": {"name": "meet",
            "description": "Meet."}}}  # fmt: skip
    t = VerlTools(_config(tmp_path, meet), 1, 2.0)
    try:
        keys, _ = t.begin([("", {})] * 4)
        got = t.ask([("call", k, "meet", {"n": 4}) for k in keys])
        assert (
            got == [("ok", "met 4")] * 4
        )  # (one after another, the first would wait for the others forever)
        late = t.ask([("call", keys[0], "meet", {"n": 99}), ("call", keys[1], "meet", {"wait": 1}),
                      ("call", keys[0], "meet", {"wait": 1})])  # fmt: skip
        assert late == [("timeout", "timed out after 2 s"), ("ok", "waited"), ("ok", "waited")]
        assert t.ask([("reward", k) for k in keys]) == [("ok", [])] * 4  # nothing lost
    finally:
        t.end(keys)
        t.close()


def _call(answer) -> str:
    return f'<tool_call>{{"name": "check_answer", "arguments": {{"answer": "{answer}"}}}}</tool_call>'


def test_rollouts_call_the_tools_and_carry_their_step_rewards_to_the_verifiers(verl_file, tmp_path):
    """Through the tool loop: the tools' schemas in the prompt, verl's text in the tool turn (an error in
    verl's words), the step rewards summed into the `environment` term and listed in the row's extra_info of
    a verl reward function; the tool's output, which names the answer, is no answer of the model's."""
    path, _ = verl_file
    tok = _tokenizer()
    script = [
        _call(6),
        _call(7),
        '<tool_call>{"name": "where", "arguments": {"raise": 1}}</tool_call>',
        "The end.",
    ]
    tools = ToolsConfig(enabled=True, format="hermes", names=[], verl_config=path, timeout_s=5.0)
    loop = ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok, tools)
    rows = [Problem([{"role": "user", "content": "Q"}], "7", "math", uid="r0",
                    extra_info={"tools_kwargs": {"check_answer": {"create_kwargs": {"ground_truth": "7"}}}})]  # fmt: skip
    try:
        (g,) = loop.generate_groups(rows, SamplingParams(n=2, max_new_tokens=400))
    finally:
        loop.environments.close()
    assert [t["function"]["name"] for t in g.problem.chat_template_kwargs["tools"]] == [
        "check_answer",
        "where",
    ]
    for c in g.completions:
        assert c.tool_calls == ("success", "success", "error")
        outputs = [t.split("\n</tool_response>")[0] for t in c.text.split("<tool_response>\n")[1:]]
        assert outputs == ["call 1: wrong", "call 2: right", "Error when executing tool: no such place"]
        assert (c.env_reward, c.env_reason, c.tool_rewards) == (1.75, "tool_rewards", (-0.25, 2.0))
    fn = tmp_path / "verl_reward.py"
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info):\n"
                  "    return {'score': sum(extra_info['tool_rewards']) + len(extra_info['turn_scores']), 'acc': False}\n")  # fmt: skip
    options = {"verl_function": {"path": str(fn)}}
    with RewardRunner(workers=1, weights={"verl_function": 1.0, "environment": 0.5}, options=options) as r:
        score_groups([g], tok, r)
    assert g.rewards == [1.75 + 0.5 * 1.75] * 2  # the function read them, and the term is their sum
    assert g.problem.extra_info.keys() == {"tools_kwargs"}  # the row itself is left as it was
    plain = Completion([], "", [], env_reward=1.0, env_reason="environment_reward")
    assert scored_problem(g.problem, plain) is g.problem  # a TRL environment's rows: as they are
    assert given_results([g.completions[0]])[0]["environment"].score == 1.75


def test_a_tool_that_says_the_answer_answers_nothing_for_the_model(verl_file, tmp_path):
    """The adversary: a completion that has the tool write the answer (\\boxed{7} in its output) and writes none
    itself gets the tool's step reward in the environment term, never the correctness of the answer."""
    _, m = verl_file
    path = _config(tmp_path, {"class_name": f"{m}.Reveal", "tool_schema": SCHEMA})
    tok = _tokenizer()
    tools = ToolsConfig(enabled=True, format="hermes", names=[], verl_config=path)
    loop = ToolRolloutEngine(Scripted(tok, [_call("x"), "So that."], marker="<tool_response>"), tok, tools)
    row = Problem([{"role": "user", "content": "Q"}], "7", "math",
                  extra_info={"tools_kwargs": {"check_answer": {"create_kwargs": {"ground_truth": "7"}}}})  # fmt: skip
    try:
        (g,) = loop.generate_groups([row], SamplingParams(n=1, max_new_tokens=400))
    finally:
        loop.environments.close()
    c = g.completions[0]
    assert "it is \\boxed{7}" in c.text and "boxed" not in c.answer_text and c.env_reward == 1.0
    with RewardRunner(workers=1, weights={"correctness": 1.0, "environment": 0.5}) as r:
        score_groups([g], tok, r)
    assert g.results[0].correctness == 0.0 and g.rewards == [0.5]


def test_an_episode_with_no_call_has_reward_zero_and_an_empty_list(verl_file):
    path, _ = verl_file
    tok = _tokenizer()
    tools = ToolsConfig(enabled=True, format="hermes", names=[], verl_config=path)
    loop = ToolRolloutEngine(Scripted(tok, ["The end."], marker="<tool_response>"), tok, tools)
    try:
        (g,) = loop.generate_groups(
            [Problem([{"role": "user", "content": "Q"}], "7", "math")], SamplingParams()
        )
    finally:
        loop.environments.close()
    c = g.completions[0]
    assert (c.env_reward, c.env_reason, c.tool_rewards) == (0, "tool_rewards", ())
    assert scored_problem(g.problem, c).extra_info == {"tool_rewards": [], "turn_scores": []}


@pytest.mark.parametrize(
    "tools, extra, message",
    [
        (
            None,
            ["rollout.tools.format=markdown"],
            "verl_config needs calls that name their tool: format deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, mistral, mistral_v7, muse_glimmer, qwen3_coder, not markdown",
        ),
        (
            None,
            ["rollout.tools.environment=x.Y"],
            "set environment (TRL's) or verl_config (verl's tools), not both",
        ),
        (
            None,
            ["rollout.interaction.enabled=true"],
            "rollout.tools.verl_config with rollout.interaction.enabled",
        ),
        (
            [{"class_name": "{m}.AnswerTool", "config": {"type": "mcp"}}],
            [],
            "is of type mcp; only native tools run from a verl tool config (MCP servers' tools: rollout.tools.mcp_servers=its",
        ),
        ([{"config": {"type": "native"}}], [], "tool 0 has no class_name (module.Class)"),
        (
            [{"class_name": "{m}.BaseTool", "config": {}}],
            [],
            "BaseTool): Tool schema is not set! (the file gives no tool_schema",
        ),
        (
            [{"class_name": "{m}.OwnSchema"}, {"class_name": "{m}.OwnSchema"}],
            [],
            "the tool name 'where' twice",
        ),
        (
            [
                {
                    "class_name": "{m}.AnswerTool",
                    "tool_schema": {**SCHEMA, "function": {**SCHEMA["function"], "name": "python"}},
                }
            ],
            [],
            "tool 'python' has the name of another tool",
        ),  # fmt: skip
        ("missing.yaml", [], "missing.yaml: no such file"),
    ],
)
def test_what_cannot_work_is_named_when_the_recipe_loads(verl_file, tmp_path, tools, extra, message):
    path, m = verl_file
    if isinstance(tools, list):
        import json

        tools = _config(tmp_path, *json.loads(json.dumps(tools).replace("{m}", m)))
    elif tools is not None:
        tools = str(tmp_path / tools)
    args = ["rollout.tools.enabled=true", "rollout.tools.format=hermes", "rollout.tools.names=[]",
            f"rollout.tools.verl_config={tools or path}", *extra]  # fmt: skip
    with pytest.raises(ConfigError, match="rollout.tools") as e:
        load_config("demo", args)
    assert message in str(e.value)
