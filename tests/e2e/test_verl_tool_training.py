"""Training and evaluating with verl's tool classes (`rollout.tools.verl_config`, verl's
`multi_turn.tool_config_path`): a verl tool file and a verl reward function run as they are; each call is
made with the row's `tools_kwargs`, its step reward reaches the reward function (`extra_info["tool_rewards"]`)
and the `environment` term; only the model's own tokens train."""

from __future__ import annotations

import json

import yaml
from test_function_tool_training import add_one_caller
from test_tool_training import _model_dir, gsm8k_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

TOOL = '''
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse


class CheckAnswer(BaseTool):
    """Says whether an answer is the row's (its ground truth from tools_kwargs), rewarding a right one."""

    async def create(self, instance_id=None, **kwargs):
        self.truth = kwargs["create_kwargs"]["ground_truth"]
        return "one", ToolResponse()

    async def execute(self, instance_id, parameters, **kwargs):
        right = str(parameters["answer"]) == self.truth
        return ToolResponse(text="right" if right else "wrong"), (1.0 if right else -0.5), {}


class AddOne(BaseTool):
    async def execute(self, instance_id, parameters, **kwargs):
        return ToolResponse(text=str(int(parameters["x"]) + 1)), 0.25, {}
'''

CHECK = {"type": "function", "function": {"name": "check_answer", "description": "Check an answer.",
         "parameters": {"type": "object", "properties": {"answer": {"type": "string", "description": "it"}},
                        "required": ["answer"]}}}  # fmt: skip
ADD_ONE = {"type": "function", "function": {"name": "add_one", "description": "One more.",
           "parameters": {"type": "object", "properties": {"x": {"type": "integer", "description": "a number"}},
                          "required": ["x"]}}}  # fmt: skip
CALL = '<tool_call>{"name": "check_answer", "arguments": {"answer": "5"}}</tool_call>'
TURN = "<|im_end|><|im_start|>user<tool_response>right wrong</tool_response><|im_end|><|im_start|>assistant"


def _tool_config(tmp_path, module: str, cls: str, schema: dict) -> str:
    path = tmp_path / "tool_config.yaml"
    path.write_text(yaml.safe_dump({"tools": [{"class_name": f"{module}.{cls}", "config": {"type": "native"},
                                               "tool_schema": schema}]}))  # fmt: skip
    return str(path)


def test_training_calls_verl_tools_and_its_reward_function_reads_their_rewards(
    tmp_path, monkeypatch, user_module
):
    m = user_module(TOOL, "run_verl_tools")
    opens_with(monkeypatch, CALL, "<tool_response>")
    fn = tmp_path / "reward_fn.py"  # verl's way: the reward function reads the tools' rewards
    fn.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                  "    assert extra_info['turn_scores'] == [] and len(extra_info['tool_rewards']) == 1\n"
                  "    return extra_info['tool_rewards'][0]\n")  # fmt: skip
    rows = [{"data_source": "my_data", "prompt": [{"role": "user", "content": f"{i} + 2 ="}],
             "reward_model": {"ground_truth": str(i + 2)},
             "extra_info": {"tools_kwargs": {"check_answer": {"create_kwargs": {"ground_truth": str(i + 2)}}}}}
            for i in range(8)]  # fmt: skip
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    cfg = _cfg(_model_dir(tmp_path, [CALL + TURN]), run, 2, "rollout.tools.enabled=true", "rollout.tools.format=hermes",
               "rollout.tools.names=[]", f"rollout.tools.verl_config={_tool_config(tmp_path, m, 'CheckAnswer', CHECK)}",
               "rollout.tools.workers=2", "rollout.max_new_tokens=100", f"data.train_files=[{data}]",
               f"data.val_files=[{data}]", "reward.verifier=verl_function", f"reward.options.verl_function.path={fn}",
               "reward.weights={correctness: 1, environment: 0.5}", "checkpoint.every=0", "log.rollouts_per_step=4",
               "val.every=0")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 1.0 and h["rollout/tool_error_frac"] == 0.0
        assert h["verifier/environment/count"] == 16.0 and h["verifier/environment/error_rate"] == 0.0
        # every rollout answered 5: right on the row whose truth is 5, wrong on the others
        assert (
            h["reward/term/environment"]
            == h["reward/term/correctness"]
            == h["verifier/verl_function/mean_score"]
        )
        assert h["reward/mean"] == 1.5 * h["reward/term/correctness"]
        assert h.get("verifier/error_rate", 0.0) == 0.0  # the function's asserts held
        assert h["rollout/logprob_gap_max"] < 1e-4  # the tool's tokens take no loss
        # 4 prompts x 4 samples: the row 3 + 2 right (+1 each) when in the batch, the others wrong (-0.5 each)
        assert h["reward/term/correctness"] in (-0.5, (4 * 1.0 - 12 * 0.5) / 16)
    rollouts = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    for r in rollouts:
        right = r["prompt"].replace(" ", "").endswith("3+2=")
        for c in r["completions"]:
            assert (
                "<tool_response>right</tool_response>" if right else "<tool_response>wrong</tool_response>"
            ) in c["text"]
            assert c["reward"] == (1.5 if right else -0.75)


def test_eval_runs_verl_tools_and_keeps_their_rewards_with_each_sample(tmp_path, monkeypatch, user_module):
    """`reasonrl eval --tools hermes --tool-verl-config FILE`: an engine that calls `add_one` on each question
    "i + 1?" and answers with its output solves every problem; each sample keeps its calls' rewards."""
    from reasonrl.cli.eval_rollout import tools_arg
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks

    m = user_module(TOOL, "eval_verl_tools")
    add_one_caller(monkeypatch)
    model = _model_dir(
        tmp_path, ['<tool_call>{"name": "add_one", "arguments": {"x": 12}}</tool_call>' + TURN]
    )
    tools = tools_arg("hermes", None, verl_config=_tool_config(tmp_path, m, "AddOne", ADD_ONE))
    res = run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "out", data_dir=gsm8k_dir(tmp_path),
                         device="cpu", overrides={"n": 2, "temperature": 0.0}, workers=1, log=lambda *a: None,
                         engine="caller", tools=tools)  # fmt: skip
    assert res["benchmarks"]["gsm8k"]["mean@n"] == 1.0
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    samples = [s for s in samples if "committed" not in s]
    assert len(samples) == 8
    assert {(s["env_reward"], s["env_reason"], tuple(s["tool_rewards"])) for s in samples} == {
        (0.25, "tool_rewards", (0.25,))
    }
