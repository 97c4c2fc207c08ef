"""Tool-integrated rollouts (`rollout.tools`): the code a completion writes runs in the sandbox, its output
joins the completion as tokens the loss never sees, and the verifiers read only what the model wrote.

A scripted engine stands in for the model: each sample's n-th segment is fixed text, so every token of
the result can be checked."""

from __future__ import annotations

import string

import pytest
import torch

from reasonrl.config import ConfigError, ToolsConfig, load_config
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout.base import SamplingParams
from reasonrl.rollout.tools import ToolRolloutEngine, cell_program
from reasonrl.trainer.batching import build_batch
from reasonrl.types import Completion, Problem, RolloutGroup

# every printable ASCII character in the alphabet: the BPE drops a character it has never seen, so a text
# that differs only in such characters would decode the same
_ALPHABET = string.printable + ("Let me compute.\n```python\nprint(6*7)\n```\n```output\n42\n```\nSo the answer is \\boxed{42}. "
             "x = 6 ZeroDivisionError: division by zero timed out [truncated] <code> </code> <interpreter> "
             "import socket open while True: pass hello done [output limit]_'\"{}#! NameError defined")  # fmt: skip
LOGP = -0.5  # the scripted engine's log-prob of every token it writes


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer([_ALPHABET], 300)


class Scripted:
    """Segment k of a sample is `script[k]` (k = the tool outputs already in its prompt), tokenised;
    every call is recorded as (number of prompts, params)."""

    def __init__(self, tok, script: list[str], marker: str = "```output"):
        self.tok, self.script, self.marker, self.calls = tok, script, marker, []

    def generate(self, prompts, params):
        self.calls.append((len(prompts), params))
        out = []
        for p in prompts:
            k = self.tok.decode(p).count(self.marker)
            ids = self.tok(self.script[k], add_special_tokens=False)["input_ids"]
            ids, reason = (
                ids[: params.max_new_tokens],
                "stop" if len(ids) <= params.max_new_tokens else "length",
            )
            out.append(
                [Completion(ids, self.tok.decode(ids), [LOGP] * len(ids), reason) for _ in range(params.n)]
            )
        return out

    def sync_weights(self, model, version=None):
        self.synced = (model, version)


def _run(tok, script, n=1, max_new=400, prompts=("Q",), **tools):
    engine = ToolRolloutEngine(Scripted(tok, script), tok, ToolsConfig(enabled=True, **tools))
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return engine.generate(ids, SamplingParams(n=n, max_new_tokens=max_new, seed=1)), engine


def test_a_call_runs_and_its_output_joins_the_completion_without_loss(tok):
    script = ["Let me compute.\n```python\nprint(6*7)\n```\nhello hello", "So the answer is \\boxed{42}."]
    (groups, engine) = _run(tok, script, n=2, prompts=("Q", "x"))
    assert len(groups) == 2 and all(len(g) == 2 for g in groups)
    c = groups[0][0]
    assert c.tool_calls == ("success",) and c.finish_reason == "stop"
    assert (
        c.text
        == "Let me compute.\n```python\nprint(6*7)\n```\n```output\n42\n```\nSo the answer is \\boxed{42}."
    )
    # the segment was cut right after the call: the text the model wrote after it ("hello hello") is gone
    assert c.model_text == "Let me compute.\n```python\nprint(6*7)\n```\nSo the answer is \\boxed{42}."
    out = tok("\n```output\n42\n```\n", add_special_tokens=False, split_special_tokens=True)["input_ids"]
    first = len(tok("Let me compute.\n```python\nprint(6*7)\n```", add_special_tokens=False)["input_ids"])
    assert c.tool_mask == [False] * first + [True] * len(out) + [False] * (
        len(c.token_ids) - first - len(out)
    )
    assert c.token_ids[first : first + len(out)] == out
    assert c.sampler_logprobs == [0.0 if m else LOGP for m in c.tool_mask]
    # the batch: the loss mask is off exactly on the output's tokens, the attention on every token
    batch = build_batch(
        [RolloutGroup(Problem([{"role": "user", "content": "Q"}], "42", "math"), [1], [c])], 0
    )
    assert batch.mask[0].tolist() == [not m for m in c.tool_mask]
    assert int(batch.attention_mask[0, 1:].sum()) == len(c.token_ids) and int(batch.lengths[0]) == len(
        c.token_ids
    )
    # one first call for all prompts x n, then one call for the four samples that resumed, n=1 each
    (n0, p0), (n1, p1) = engine.engine.calls
    assert (n0, p0.n, n1, p1.n, p1.max_new_tokens) == (
        2,
        2,
        4,
        1,
        400
        - len(c.token_ids)
        + len(tok("So the answer is \\boxed{42}.", add_special_tokens=False)["input_ids"]),
    )
    assert p1.seed != p0.seed


def test_the_wrapper_passes_weight_syncs_and_the_engines_lifecycle_through(tok):
    inner = Scripted(tok, ["done"])
    inner.close = lambda: setattr(inner, "closed", True)
    engine = ToolRolloutEngine(inner, tok, ToolsConfig(enabled=True))
    engine.sync_weights("model")
    assert inner.synced == ("model", None)
    engine.sync_weights("model", 3)
    assert inner.synced == ("model", 3)
    engine.close()
    assert inner.closed and engine.runs_tools


def test_unseeded_sampling_stays_unseeded_and_a_sample_without_calls_keeps_its_finish(tok):
    engine = ToolRolloutEngine(Scripted(tok, ["```python\nprint(1)\n```", "so so so so so so so so"]), tok,
                               ToolsConfig(enabled=True))  # fmt: skip
    ((c,),) = engine.generate([[5]], SamplingParams(max_new_tokens=30, seed=None))
    assert [p.seed for _, p in engine.engine.calls] == [None, None] and c.finish_reason == "length"
    engine = ToolRolloutEngine(Scripted(tok, ["so so so so so so so so"]), tok, ToolsConfig(enabled=True))
    ((c,),) = engine.generate([[5]], SamplingParams(max_new_tokens=4))
    assert (c.finish_reason, c.tool_calls, c.tool_mask, c.model_text) == ("length", (), None, c.text)


def test_cells_share_state_and_only_the_last_cells_output_shows(tok):
    script = ["```python\nx = 6\nprint('hello')\n```", "```python\nprint(x*7)\n```", "done"]
    (groups, _) = _run(tok, script)
    c = groups[0][0]
    assert c.tool_calls == ("success", "success")
    assert "```output\nhello\n```" in c.text and "```output\n42\n```" in c.text
    assert c.text.count("```output\nhello") == 1 and c.text.endswith("done")


def test_errors_and_timeouts_come_back_as_output_and_failed_cells_are_not_replayed(tok):
    script = [
        "```python\nx = 1/0\n```",
        "```python\nwhile True: pass\n```",
        "```python\nprint(x)\n```",
        "done",
    ]
    (groups, _) = _run(tok, script, timeout_s=1.0)
    c = groups[0][0]
    assert c.tool_calls == ("error", "timeout", "error")
    assert "```output\nZeroDivisionError: division by zero\n```" in c.text
    assert "```output\ntimed out\n```" in c.text
    assert "NameError: name 'x' is not defined" in c.text  # the failed cell did not define x


def test_max_calls_leaves_later_calls_as_text(tok):
    script = ["```python\nprint(6*7)\n```", "```python\nprint(1/0)\n``` done", "never"]
    (groups, _) = _run(tok, script, max_calls=1)
    c = groups[0][0]
    assert c.tool_calls == ("success",) and "division" not in c.text and c.text.endswith("``` done")
    assert "never" not in c.text


def test_the_budget_counts_the_outputs_and_ends_inside_one(tok):
    call = "```python\nprint(6*7)\n```"
    n_call = len(tok(call, add_special_tokens=False)["input_ids"])
    (groups, engine) = _run(tok, [call, "So"], max_new=n_call + 3)
    c = groups[0][0]
    assert len(c.token_ids) == n_call + 3 and c.finish_reason == "length" and c.tool_mask[-3:] == [True] * 3
    assert len(engine.engine.calls) == 1  # no generation asked for with nothing left of the budget
    # a call that fills the budget exactly: nothing runs (no room for its output)
    (groups, _) = _run(tok, [call, "So"], max_new=n_call)
    assert groups[0][0].tool_calls == () and groups[0][0].tool_mask is None


def test_in_one_round_a_call_naming_no_code_does_not_take_another_samples_output(tok):
    """Two samples call in the same round, the first with a Hermes call that has no code: it gets its
    error, the second its own program's output."""
    bad, good = (
        '<tool_call>{"name": "python"}</tool_call>',
        '<tool_call>{"arguments": {"code": "print(7)"}}</tool_call>',
    )

    class TwoScripts(Scripted):
        def generate(self, prompts, params):
            self.calls.append((len(prompts), params))
            texts = [
                ("done" if "<tool_response>" in self.tok.decode(p) else bad if p == [5] else good)
                for p in prompts
            ]
            ids = [self.tok(t, add_special_tokens=False)["input_ids"] for t in texts]
            return [[Completion(i, self.tok.decode(i), [LOGP] * len(i))] for i in ids]

    engine = ToolRolloutEngine(TwoScripts(tok, []), tok, ToolsConfig(enabled=True, format="hermes"))
    (a,), (b,) = engine.generate([[5], [6]], SamplingParams(max_new_tokens=300))
    assert a.tool_calls == ("invalid",) and 'no "code" argument' in a.text
    assert b.tool_calls == ("success",) and "<tool_response>\n7\n</tool_response>" in b.text


def test_a_printed_answer_does_not_answer_for_the_model(tok):
    """Reward hacking: the program prints the boxed answer; the model never states one. The verifier
    reads the model's text only, so it scores 0 (it would score 1 on the full transcript)."""
    from reasonrl.rewards.runner import RewardRunner
    from reasonrl.rollout.scored import score_groups

    script = ["```python\nprint('\\\\bo' + 'xed{' + str(6*7) + '}')\n```", "done"]
    (groups, _) = _run(tok, script)
    c = groups[0][0]
    assert "\\boxed{42}" in c.text and "\\boxed" not in c.answer_text
    problem = Problem([{"role": "user", "content": "6*7?"}], "42", "math")
    rg = RolloutGroup(problem, [1], [c])
    with RewardRunner(workers=1, timeout_s=30) as runner:
        score_groups([rg], tok, runner, think_from_prompt=False)
        assert rg.rewards == [0.0]
        honest = Completion(c.token_ids, c.text, c.sampler_logprobs, model_text=c.model_text + " \\boxed{42}")
        rg2 = RolloutGroup(problem, [1], [honest])
        score_groups([rg2], tok, runner, think_from_prompt=False)
        assert rg2.rewards == [1.0]


def test_an_output_cannot_forge_special_tokens_or_flood_the_completion(tok):
    """A program printing the end-of-text token gets its characters, never the token; a program printing
    10 MB is cut to max_output_chars."""
    script = [
        "```python\nprint('<' + '|endoftext|' + '>')\n```",
        "```python\nprint('x' * 10**7)\n```",
        "done",
    ]
    (groups, _) = _run(tok, script, max_output_chars=20)
    c = groups[0][0]
    tool_ids = [t for t, m in zip(c.token_ids, c.tool_mask) if m]
    assert tok.eos_token_id not in tool_ids and c.text.endswith("done")
    assert c.tool_calls == ("success", "output_limit")
    assert "```output\n" + "x" * 20 + "...[truncated]\n```" in c.text


def test_a_program_cannot_reach_the_network_or_the_host_files(tok):
    script = ["```python\nimport socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n```",
              "```python\nprint(open('/etc/passwd').read())\n```", "done"]  # fmt: skip
    (groups, _) = _run(tok, script)
    c = groups[0][0]
    assert c.tool_calls == ("error", "error") and "root:" not in c.text
    assert "OSError: [Errno 101] Network is unreachable" in c.text
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/etc/passwd'" in c.text


def test_cell_program_replays_in_one_namespace():
    from reasonrl.rewards.sandbox import run_python

    res = run_python(
        cell_program(["def f(a):\n    return a + 1\nprint('hidden')", "print(f(41))"]), timeout_s=10
    )
    assert res.ok and res.stdout == "42\n"


def test_the_recipe_keys_are_checked_when_it_loads(tmp_path):
    cfg = load_config(None, ["rollout.tools.enabled=true", "rollout.tools.max_calls=2"])
    assert cfg.rollout.tools.enabled and cfg.rollout.tools.max_calls == 2
    for bad, msg in (("rollout.tools.format=json", "rollout.tools.format='json' is not one of deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, markdown, mistral, mistral_v7, muse_glimmer, python_tag, qwen3_coder, search_r1, xml or auto"),
                     ("rollout.tools.max_calls=0", "rollout.tools.max_calls must be >= 1"),
                     ("rollout.tools.timeout_s=0", "rollout.tools.timeout_s must be > 0")):  # fmt: skip
        with pytest.raises(ConfigError, match=msg.replace("[", r"\[")):
            load_config(None, ["rollout.tools.enabled=true", bad])
    load_config(None, ["rollout.tools.format=json"])  # off: not checked
    least = load_config(None, ["rollout.tools.enabled=true", *(f"rollout.tools.{k}=1" for k in (
        "max_calls", "workers", "memory_mb", "max_output_chars")), "rollout.tools.timeout_s=0.5"]).rollout.tools  # fmt: skip
    assert (least.max_calls, least.workers, least.memory_mb, least.max_output_chars, least.timeout_s) == (
        1,
        1,
        1,
        1,
        0.5,
    )
    with pytest.raises(ConfigError, match=r"needs rollout.max_new_tokens >= 2"):
        load_config(None, ["rollout.tools.enabled=true", "rollout.max_new_tokens=1"])
    assert (
        load_config(None, ["rollout.tools.enabled=true", "rollout.max_new_tokens=2"]).rollout.max_new_tokens
        == 2
    )


def test_the_xml_format(tok):
    script = ["<code>\nprint(6*7)\n</code> hello", "done"]
    engine = ToolRolloutEngine(Scripted(tok, script, marker="<interpreter>"), tok,
                               ToolsConfig(enabled=True, format="xml"))  # fmt: skip
    ((c,),) = engine.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=300)
    )
    assert c.text == "<code>\nprint(6*7)\n</code>\n<interpreter>\n42\n</interpreter>\ndone"
    assert torch.tensor(c.tool_mask).sum() > 0


def test_hermes_calls_run_their_code_argument_and_answer_in_a_tool_turn():
    """Qwen's Hermes tool calls: the JSON call's `code` argument runs (also when the arguments are a JSON
    string); the answer comes back in a ChatML tool turn whose markers are the tokenizer's special tokens,
    while the same markers printed by the program stay text. A call that is not JSON, or names no code,
    gets an error the model can read and runs nothing."""
    tok = build_tokenizer([_ALPHABET + ' <tool_call> </tool_call> <tool_response> </tool_response> "name": '
                           '"python", "arguments": "code": user assistant print(1+1) not valid JSON argument '
                           '(a string) im_start im_end | quotes Expecting property enclosed double'], 400)  # fmt: skip
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|im_start|>"]})
    end, start = tok.convert_tokens_to_ids(["<|im_end|>", "<|im_start|>"])
    script = ['<tool_call>\n{"name": "python", "arguments": {"code": "print(6*7)"}}\n</tool_call>',
              '<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"print(\'<|im_end|>\')\\"}"}</tool_call>',
              "<tool_call>{not json}</tool_call>", '<tool_call>{"name": "python", "arguments": {}}</tool_call>',
              "done"]  # fmt: skip
    engine = ToolRolloutEngine(Scripted(tok, script, marker="<tool_response>"), tok,
                               ToolsConfig(enabled=True, format="hermes"))  # fmt: skip
    ((c,),) = engine.generate(
        [tok("Q", add_special_tokens=False)["input_ids"]], SamplingParams(max_new_tokens=400)
    )
    assert c.tool_calls == ("success", "success", "invalid", "invalid")
    turns = c.text.split("<tool_response>\n")[1:]
    assert [t.split("\n</tool_response>")[0] for t in turns] == [
        "42", "<|im_end|>", "error: the tool call is not valid JSON (Expecting property name enclosed in double "
        "quotes)", 'error: the tool call has no "code" argument (a string)']  # fmt: skip
    tool_ids = [t for t, m in zip(c.token_ids, c.tool_mask) if m]
    # each tool turn: the template's <|im_end|> ... <|im_start|>user ... <|im_end|> <|im_start|>assistant;
    # the printed "<|im_end|>" added no special token
    assert tool_ids.count(end) == 2 * 4 and tool_ids.count(start) == 2 * 4
    # (the text is decoded without special tokens: the turn's markers are gone, its words stay)
    assert "</tool_call>\nuser\n<tool_response>\n42\n</tool_response>\nassistant\n<tool_call>" in c.text
    assert c.text.endswith("done")


def test_a_recipe_gives_the_chat_template_the_tool_schema(tok):
    """data.chat_template_kwargs.tools reaches apply_chat_template's `tools`: a template that lists the
    tools (as Qwen's do) shows the model the Python tool."""
    import copy

    from reasonrl.data.prompts import encode_prompt, with_template_kwargs
    from reasonrl.types import template_kwargs

    schema = [{"type": "function", "function": {"name": "python", "description": "run code",
                                                 "parameters": {"type": "object"}}}]  # fmt: skip
    kwargs = template_kwargs({"tools": schema}, "recipe", label="data.chat_template_kwargs")
    t = copy.deepcopy(tok)
    t.chat_template = (
        "{% if tools %}<code>{{ tools[0].function.name }}</code>{% endif %}{{ messages[0].content }}"
    )
    (p,) = with_template_kwargs([Problem([{"role": "user", "content": "x = 6"}], "1", "math")], kwargs)
    assert t.decode(encode_prompt(t, p)) == "<code>python</code>x = 6"
    (bare,) = with_template_kwargs([Problem([{"role": "user", "content": "x = 6"}], "1", "math")], {})
    assert t.decode(encode_prompt(t, bare)) == "x = 6"


def test_a_sandbox_that_cannot_run_the_tools_stops_the_run_before_it_starts(monkeypatch):
    from reasonrl.rewards.sandbox import SandboxUnavailable, server
    from reasonrl.rollout.tool_checks import probe_tools

    cfg = ToolsConfig(enabled=True)
    assert probe_tools(cfg) == "rollout.tools: the bwrap sandbox runs the programs completions write"

    def unavailable(*a, **k):
        raise SandboxUnavailable("bubblewrap sandbox unavailable: the `bwrap` executable is not on PATH")

    monkeypatch.setattr(server, "run_job", unavailable)
    with pytest.raises(ConfigError, match="rollout.tools: bubblewrap sandbox unavailable: the `bwrap` exec"):
        probe_tools(cfg)
    monkeypatch.setattr(
        server, "run_job", lambda *a, **k: {"status": "failed", "stdout": "", "stderr": "boom"}
    )
    with pytest.raises(ConfigError, match=r"did not run a test program \(error: 'boom'\)"):
        probe_tools(cfg)


def test_eval_tools_flag_names_the_formats_before_anything_loads(tmp_path, capsys):
    from reasonrl.cli.main import main

    rc = main(["eval", str(tmp_path / "no-model"), "--benchmarks", "gsm8k", "--tools", "json"])
    assert rc == 2
    assert (
        "--tools 'json' is not a tool format; known: off, auto, deepseek_v3, gemma4, glm4_moe, harmony, hermes, lfm2, llama3_json, markdown, mistral, mistral_v7, muse_glimmer, python_tag, qwen3_coder, search_r1, xml"
        in capsys.readouterr().err
    )


def test_an_eval_of_a_run_uses_its_own_tools_unless_told_otherwise():
    from reasonrl.cli.eval_rollout import tools_arg

    run = load_config(
        None, ["rollout.tools.enabled=true", "rollout.tools.max_calls=2", "rollout.tools.format=xml"]
    )
    assert tools_arg(None, run) == run.rollout.tools and tools_arg("off", run) is None
    assert tools_arg("hermes", run) == ToolsConfig(enabled=True, format="hermes", max_calls=2)
    assert tools_arg(None, load_config(None, [])) is None and tools_arg(None) is None
    assert tools_arg("markdown") == ToolsConfig(enabled=True, format="markdown")


def test_tool_metrics_by_hand():
    from reasonrl.trainer.rollouts import tool_metrics

    def comp(n, tool_tokens, calls):
        return Completion([1] * n, "", [0.0] * n, tool_mask=[True] * tool_tokens + [False] * (n - tool_tokens)
                          if calls else None, tool_calls=calls)  # fmt: skip

    cs = [comp(10, 4, ("success", "timeout")), comp(6, 0, ()), comp(4, 2, ("error",)), comp(4, 0, ())]
    assert tool_metrics(cs, True) == {
        "rollout/tool_calls_mean": 3 / 4, "rollout/tool_used_frac": 2 / 4, "rollout/tool_error_frac": 2 / 3,
        "rollout/tool_timeout_frac": 1 / 3, "rollout/tool_token_frac": 6 / 24}  # fmt: skip
    assert tool_metrics(cs, False) == {}
    one = tool_metrics([comp(5, 5, ("timeout",))], True)
    assert one == {"rollout/tool_calls_mean": 1.0, "rollout/tool_used_frac": 1.0, "rollout/tool_error_frac": 1.0,
                   "rollout/tool_timeout_frac": 1.0, "rollout/tool_token_frac": 1.0}  # fmt: skip
    assert (
        tool_metrics([comp(3, 0, ())], True)["rollout/tool_error_frac"] == 0.0
    )  # no calls: no division by 0
