"""Training with Python functions as tools (`rollout.tools.functions`, TRL's `tools=[...]`): every completion
opens with a Hermes call naming the function (its tokens scored by the model itself), the function runs in
the tool workers, its return value comes back in the tool turn, the HF engine samples the rest, and only the
model's own tokens train (the trainer's log-probs equal the sampler's on them)."""

from __future__ import annotations

import json

from test_tool_training import _model_dir, opens_with
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
