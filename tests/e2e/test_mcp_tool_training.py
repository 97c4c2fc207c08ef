"""Training and evaluating with an MCP server's tools (`rollout.tools.mcp_servers`): every rollout's call
reaches the server through its worker process's session, the output comes back in the tool turn (no loss on
it), and `reasonrl eval --tool-mcp-servers` solves problems with a model that calls the server's tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_function_tool_training import add_one_caller
from test_tool_training import _model_dir, gsm8k_dir, opens_with
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

pytest.importorskip("mcp")

CALL = '<tool_call>{"name": "add", "arguments": {"a": 40, "b": 2}}</tool_call>'
TURN = "<|im_end|><|im_start|>user<tool_response>42</tool_response><|im_end|><|im_start|>assistant"


def _servers(tmp_path, add_name: str = "add") -> str:
    path = tmp_path / "servers.json"
    server = {"command": sys.executable, "args": [str(Path(__file__).parents[1] / "mcp_server.py"), add_name]}
    path.write_text(json.dumps({"mcpServers": {"calc": server}}))
    return str(path)


def test_training_calls_an_mcp_servers_tool(tmp_path, monkeypatch):
    opens_with(monkeypatch, CALL, "<tool_response>")
    run = tmp_path / "run"
    cfg = _cfg(_model_dir(tmp_path, [CALL + TURN]), run, 2, "rollout.tools.enabled=true", "rollout.tools.format=hermes",
               "rollout.tools.names=[]", f"rollout.tools.mcp_servers={_servers(tmp_path)}", "rollout.tools.mcp_tools=[add]",
               "rollout.tools.workers=2", "rollout.max_new_tokens=100", "checkpoint.every=0", "log.rollouts_per_step=2")  # fmt: skip
    assert [t["function"]["name"] for t in cfg.data.chat_template_kwargs["tools"]] == ["add"]
    hist = train(cfg, log=lambda *a: None)["history"]
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 1.0 and h["rollout/tool_error_frac"] == 0.0
        assert h["rollout/logprob_gap_max"] < 1e-4  # the server's tokens take no loss
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    assert texts and all(
        "<tool_response>42</tool_response>" in t for t in texts
    )  # (the tokenizer drops spaces)


def test_eval_calls_an_mcp_servers_tool(tmp_path, monkeypatch):
    """`reasonrl eval --tools hermes --tool-mcp-servers FILE`: an engine that calls `add_one` on each question
    "i + 1?" and answers with the server's output solves every problem."""
    from reasonrl.cli.eval_rollout import tools_arg
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks

    seen: list = []
    add_one_caller(monkeypatch, seen)
    model = _model_dir(
        tmp_path, ['<tool_call>{"name": "add_one", "arguments": {"x": 12}}</tool_call>' + TURN]
    )
    tools = tools_arg("hermes", None, mcp_servers=_servers(tmp_path, "add_one"))
    res = run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "out", data_dir=gsm8k_dir(tmp_path),
                         device="cpu", overrides={"n": 2, "temperature": 0.0}, workers=1, log=lambda *a: None,
                         engine="caller", tools=tools)  # fmt: skip
    assert res["benchmarks"]["gsm8k"]["mean@n"] == 1.0
    samples = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    samples = [s for s in samples if "committed" not in s]
    assert len(samples) == 8 and all(s["tool_calls"] == ["success"] for s in samples)
    assert seen  # (the engine was asked)
    setup = json.loads((tmp_path / "out" / "samples.setup.json").read_text())
    assert (
        setup["tools"]["mcp_servers"] == tools.mcp_servers
    )  # recorded: a resume with other tools is refused
    assert '"name": "add_one"' in (tmp_path / "out" / "results.md").read_text()  # the schema the prompts got


PLUGIN = """
import sys

sys.path.insert(0, {e2e!r})
from test_tool_training import opening

from reasonrl.rollout.hf import HFRolloutEngine

HFRolloutEngine.generate = opening({call!r}, "<tool_response>")
"""


def test_a_run_with_mcp_tools_killed_with_sigkill_leaves_no_server_and_resumes(tmp_path, user_module):
    """SIGKILL once checkpoint 2 is complete: the worker processes and the stdio servers they started end
    with the trainer; --resume starts them again, and steps 3 and 4 log what the uninterrupted run logged
    (the sessions hold nothing to restore). Every completion calls the server (a plugin opens them with the
    call, in the run's subprocess)."""
    from test_run_dir import killed_and_resumed
    from test_train_loop import _overrides, _stable

    plugin = user_module(PLUGIN.format(e2e=str(Path(__file__).parent), call=CALL), "mcp_caller")
    model, servers = _model_dir(tmp_path, [CALL + TURN]), _servers(tmp_path)

    def args(run):
        return [*_overrides(model, run, 4), "rollout.tools.enabled=true", "rollout.tools.format=hermes",
                "rollout.tools.names=[]", f"rollout.tools.mcp_servers={servers}", "rollout.tools.workers=2",
                "rollout.max_new_tokens=100", f"plugins=[{plugin}]", "checkpoint.every=2"]  # fmt: skip

    spawned: dict = {}
    full, resumed = killed_and_resumed(args, tmp_path, kill_after=2, steps=4, spawned=spawned)
    # one stdio server per worker process was running at the kill; it and every other process is gone
    assert sum("mcp_server.py" in cmd for cmd in spawned.values()) == 2
    assert [r["step"] for r in resumed] == list(range(5))
    assert all(
        r["rollout/tool_calls_mean"] == 1.0 and r["rollout/tool_error_frac"] == 0.0 for r in resumed[1:]
    )
    for r in resumed:
        assert _stable(r) == full[r["step"]], r["step"]
