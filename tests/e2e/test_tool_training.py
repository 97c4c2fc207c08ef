"""Training with `rollout.tools`: every completion opens with a call (its tokens scored by the model
itself, as if it had sampled them), the call runs in the sandbox, the HF engine samples the rest after
the output, and the trainer's log-probs of every token the model wrote equal the sampler's. A loss mask
that missed the output's tokens (sampler log-prob 0) or a continuation conditioned on the wrong prefix
would open a gap of nats."""

from __future__ import annotations

import json

import torch
from test_train_loop import _cfg

from reasonrl.trainer.loop import train

# the xml format: this tiny tokenizer, reloaded from its directory, drops newlines
CALL = "<code>print(6*7)</code>"


def _model_dir(tmp_path, extra=()):
    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import TinySpec, build_model, build_tokenizer, corpus

    spec = TinySpec(hidden_size=32, layers=2, heads=2, intermediate_size=64, vocab_size=160)
    probs = generate("arithmetic", 300, seed=0, difficulty=2, split="train")
    tok = build_tokenizer(corpus(probs) + [CALL + "<interpreter>42</interpreter>", *extra], spec.vocab_size)
    out = tmp_path / "model"
    build_model(spec, tok).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def gsm8k_dir(tmp_path, n: int = 4):
    """A data directory whose gsm8k file asks "i + 1?" for i < n (a tool, or feedback, can answer it)."""
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"question": f"{i} + 1?", "answer": f"so\n#### {i + 1}"} for i in range(n)]
    (data / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def opens_with(monkeypatch, call: str, after: str) -> None:
    """Make every completion of the HF engine open with `call`, its tokens scored by the model itself (as
    if it had sampled them), until `after` (the tool's output) is in the prompt: then the model samples."""
    from reasonrl.rollout.hf import HFRolloutEngine

    monkeypatch.setattr(HFRolloutEngine, "generate", opening(call, after))


def opening(call: str, after: str):
    """The HF engine's `generate` that `opens_with` puts in its place (a plugin of a run in a subprocess can
    put it there too)."""
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.types import Completion

    real = HFRolloutEngine.generate

    def generate(self, prompts, params):
        if after in self.tokenizer.decode(prompts[0]):
            return real(self, prompts, params)
        out = []
        for p in prompts:
            ids = self.tokenizer(call, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logits = self.model(torch.tensor([p + ids])).logits[0, len(p) - 1 : -1].float()
            logps = logits.log_softmax(-1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()
            out.append([Completion(ids, self.tokenizer.decode(ids), logps, "stop") for _ in range(params.n)])
        return out

    return generate


def test_training_on_tool_calls_trains_only_the_models_tokens(tmp_path, monkeypatch):
    opens_with(monkeypatch, CALL, "<interpreter>")
    run = tmp_path / "run"
    hist = train(_cfg(_model_dir(tmp_path), run, 2, "rollout.tools.enabled=true", "rollout.tools.format=xml", "rollout.max_new_tokens=40",
                      "checkpoint.every=0", "log.rollouts_per_step=2"), log=lambda *a: None)["history"]  # fmt: skip
    steps = [h for h in hist if "rollout/tool_calls_mean" in h]
    assert len(steps) == 2
    for h in steps:
        assert h["rollout/tool_calls_mean"] == 1.0 and h["rollout/tool_error_frac"] == 0.0
        assert 0.2 < h["rollout/tool_token_frac"] < 0.8
        assert h["rollout/logprob_gap_max"] < 1e-4
    rows = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    texts = [c["text"] for r in rows for c in r["completions"]]
    assert texts and all(t.startswith(CALL + "<interpreter>42</interpreter>") for t in texts)


def test_eval_runs_the_tools_and_scores_only_what_the_model_wrote(tmp_path, monkeypatch):
    """gsm8k problems "i + 1?": an engine whose code computes i + 1 and which then writes the output as its
    answer solves all; one whose code prints the answer line and which writes nothing after solves none.
    samples.jsonl keeps the text scored and the calls; the setup records the tools, so a resume without
    them is refused."""
    import re

    import pytest

    from reasonrl.config import ToolsConfig
    from reasonrl.errors import InputError
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import run_benchmarks
    from reasonrl.rollout.factory import ROLLOUT_ENGINES
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.types import Completion

    class ToolUser(HFRolloutEngine):
        honest = True

        def generate(self, prompts, params):
            out = []
            for p in prompts:
                text = self.tokenizer.decode(p)
                if "<interpreter>" in text:  # after the call: the answer, read off the output
                    value = re.findall(r"<interpreter>\D*(\d+)", text)[-1]
                    answer = f"#### {value}" if self.honest else "="
                else:
                    i = re.search(r"(\d+) ?\+ ?1", text).group(1)
                    answer = (
                        f"<code>print({i}+1)</code>" if self.honest else f"<code>print('####',{i}+1)</code>"
                    )
                ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
                out.append(
                    [Completion(ids, self.tokenizer.decode(ids), [0.0] * len(ids)) for _ in range(params.n)]
                )
            return out

    class Lazy(ToolUser):
        honest = False

    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))  # undone afterwards
    ROLLOUT_ENGINES.register("tool-user")(lambda model, tokenizer: ToolUser(model, tokenizer))
    ROLLOUT_ENGINES.register("lazy")(lambda model, tokenizer: Lazy(model, tokenizer))
    data = gsm8k_dir(tmp_path)
    model = _model_dir(tmp_path, extra=["#### 12 + 1? print('####',3+1)"])
    tools = ToolsConfig(enabled=True, format="xml")
    kw = dict(
        data_dir=data, device="cpu", overrides={"n": 1, "temperature": 0.0}, workers=1, log=lambda *a: None
    )
    good = run_benchmarks(
        model, [BENCHMARKS.get("gsm8k")], tmp_path / "good", engine="tool-user", tools=tools, **kw
    )
    lazy = run_benchmarks(
        model, [BENCHMARKS.get("gsm8k")], tmp_path / "lazy", engine="lazy", tools=tools, **kw
    )
    assert good["benchmarks"]["gsm8k"]["mean@n"] == 1.0 and lazy["benchmarks"]["gsm8k"]["mean@n"] == 0.0
    samples = [json.loads(x) for x in (tmp_path / "lazy" / "samples.jsonl").read_text().splitlines()]
    s = [x for x in samples if "committed" not in x][1]
    # (the tokenizer has no space in that place: the output reads "####2")
    assert s["tool_calls"] == ["success"] and "####2" in s["completion"] and "####2" not in s["answer_text"]
    assert json.loads((tmp_path / "good" / "samples.setup.json").read_text())["tools"]["format"] == "xml"
    with pytest.raises(InputError, match="tools"):
        run_benchmarks(model, [BENCHMARKS.get("gsm8k")], tmp_path / "good", engine="tool-user", **kw)


def test_the_asynchronous_worker_runs_the_tools_too(tmp_path):
    """max_staleness=1: the worker process builds its engine with rollout.tools, so its steps carry the tool
    metrics (a random model writes no call: 0 calls, every step)."""
    hist = train(_cfg(_model_dir(tmp_path), tmp_path / "run", 2, "rollout.tools.enabled=true",
                      "rollout.max_staleness=1", "algo.off_policy.tis_cap=2.0", "checkpoint.every=0"),
                 log=lambda *a: None)["history"]  # fmt: skip
    steps = [h for h in hist if "rollout/staleness" in h]
    assert len(steps) == 2 and all(h["rollout/tool_calls_mean"] == 0.0 for h in steps)
