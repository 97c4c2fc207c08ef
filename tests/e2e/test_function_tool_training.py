"""Training with Python functions as tools (`rollout.tools.functions`, TRL's `tools=[...]`): every completion
opens with a Hermes call naming the function (its tokens scored by the model itself), the function runs in
the tool workers, its return value comes back in the tool turn, the HF engine samples the rest, and only the
model's own tokens train (the trainer's log-probs equal the sampler's on them)."""

from __future__ import annotations

import json

from test_tool_training import _model_dir, gsm8k_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

CALL = '<tool_call>{"name": "multiply", "arguments": {"a": 6, "b": 7}}</tool_call>'
TURN = "<|im_end|><|im_start|>user<tool_response>42</tool_response><|im_end|><|im_start|>assistant"
TOOLS = '''
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b
'''


def test_training_with_a_function_tool_runs_it_and_trains_only_the_models_tokens(
    tmp_path, monkeypatch, user_module
):
    m = user_module(TOOLS, "run_tools")
    opens_with(monkeypatch, CALL, "<tool_response>")
    run = tmp_path / "run"
    cfg = _cfg(_model_dir(tmp_path, [CALL + TURN]), run, 2, "rollout.tools.enabled=true", "rollout.tools.format=hermes",
               "rollout.tools.names=[]", f"rollout.tools.functions=[{m}.multiply]", "rollout.max_new_tokens=100",
               "checkpoint.every=0", "log.rollouts_per_step=2")  # fmt: skip
    assert [t["function"]["name"] for t in cfg.data.chat_template_kwargs["tools"]] == ["multiply"]
    hist = train(cfg, log=lambda *a: None)["history"]
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 1.0 and h["rollout/tool_error_frac"] == 0.0
        assert h["rollout/logprob_gap_max"] < 1e-4  # the output's tokens are not the model's: masked
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    # (this tiny tokenizer, reloaded from its directory, drops spaces and newlines)
    call = CALL.replace(" ", "")
    assert texts and all(t.startswith(call) and "<tool_response>42</tool_response>" in t for t in texts)


SEVEN = '''
def f(a: int) -> int:
    """Seven times a number.

    Args:
        a: the number
    """
    return 7 * a
'''


def test_a_message_with_two_calls_runs_both_and_one_turn_answers_them_in_training(
    tmp_path, monkeypatch, user_module
):
    """rollout.tools.parallel_calls=2: every completion opens with one message of two calls; both run, in one
    turn of two <tool_response>s, and still only the model's own tokens train."""
    m = user_module(SEVEN, "parallel_run_tools")
    calls = '<tool_call>{"name": "f", "arguments": {"a": 6}}</tool_call><tool_call>{"name": "f", "arguments": {"a": 3}}</tool_call>'
    turn = "<|im_end|><|im_start|>user<tool_response>42</tool_response><tool_response>21</tool_response><|im_end|>"
    opens_with(monkeypatch, calls, "<tool_response>")
    run = tmp_path / "run"
    cfg = _cfg(_model_dir(tmp_path, [calls + turn + "<|im_start|>assistant"]), run, 2, "rollout.tools.enabled=true",
               "rollout.tools.format=hermes", "rollout.tools.names=[]", f"rollout.tools.functions=[{m}.f]",
               "rollout.tools.parallel_calls=2", "rollout.max_new_tokens=112", "checkpoint.every=0",
               "log.rollouts_per_step=2")  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"]
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 2.0 and h["rollout/tool_error_frac"] == 0.0
        assert h["rollout/logprob_gap_max"] < 1e-4
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    # (this tiny tokenizer, reloaded from its directory, drops spaces and newlines; the model's context, 128
    # tokens, ends soon after the turn)
    assert texts and all(t.startswith(calls.replace(" ", "") + turn) for t in texts)


ADD_ONE = '''
def add_one(x: int) -> int:
    """One more.

    Args:
        x: a whole number
    """
    return x + 1
'''


def add_one_caller(monkeypatch, seen: list | None = None) -> None:
    """Register the engine "caller" (undone afterwards): on a question "i + 1?" it calls the tool `add_one`
    with x = i, and once the tool's output is in its prompt it answers with it (`#### i + 1`); the prompts
    it was given go to `seen`."""
    import re

    from reasonrl.rollout.factory import ROLLOUT_ENGINES
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.types import Completion

    class Caller(HFRolloutEngine):
        def generate(self, prompts, params):
            out = []
            for p in prompts:
                text = self.tokenizer.decode(p)
                if seen is not None:
                    seen.append(text)
                if "<tool_response>" in text:  # the tool's output is the answer
                    answer = "#### " + re.findall(r"<tool_response>\D*(\d+)", text)[-1]
                else:
                    i = re.search(r"(\d+) ?\+ ?1", text).group(1)
                    answer = f'<tool_call>{{"name": "add_one", "arguments": {{"x": {i}}}}}</tool_call>'
                ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
                out.append(
                    [Completion(ids, self.tokenizer.decode(ids), [0.0] * len(ids)) for _ in range(params.n)]
                )
            return out

    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))
    ROLLOUT_ENGINES.register("caller")(lambda model, tokenizer: Caller(model, tokenizer))


def test_eval_runs_a_function_tool_and_shows_its_schema_to_the_prompts(tmp_path, monkeypatch, user_module):
    """`reasonrl eval --tools hermes --tool-function M.add_one`: an engine that calls the function on each
    question "i + 1?" and answers with its output solves every problem; the function's schema is among the
    chat-template arguments every prompt was rendered with (recorded with the results)."""
    from reasonrl.cli.eval_rollout import tools_arg
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks

    m = user_module(ADD_ONE, "eval_tools")

    add_one_caller(monkeypatch)
    data = gsm8k_dir(tmp_path)
    model = _model_dir(tmp_path, ['<tool_call>{"name": "add_one", "arguments": {"x": 12}}</tool_call>' + TURN,
                                  "#### 12 + 1?"])  # fmt: skip
    tools = tools_arg("hermes", None, functions=[f"{m}.add_one"])
    assert tools.functions == [f"{m}.add_one"]
    res = run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "out", data_dir=data, device="cpu",
                         overrides={"n": 1, "temperature": 0.0}, workers=1, log=lambda *a: None,
                         engine="caller", tools=tools)  # fmt: skip
    assert res["benchmarks"]["gsm8k"]["mean@n"] == 1.0
    setup = json.loads((tmp_path / "out" / "samples.setup.json").read_text())
    assert setup["tools"]["functions"] == [f"{m}.add_one"]
    assert '"name": "add_one"' in (tmp_path / "out" / "results.md").read_text()  # the schema the prompts got
