"""`reasonrl eval --interaction TURNS`: a wrong first answer gets the feedback and another attempt, and the
last attempt is scored. An engine that answers 0 first and the right number after feedback solves every
problem in two attempts and none in one; the table says how many attempts it took and how many were
right at the first; the setup records the interaction, so a resume without it is refused."""

from __future__ import annotations

import json
import re

import pytest
from test_tool_training import _model_dir, gsm8k_dir

from reasonrl.config import InteractionConfig
from reasonrl.errors import InputError
from reasonrl.eval.benchmarks import BENCHMARKS
from reasonrl.eval.runner import run_benchmarks
from reasonrl.rollout.factory import ROLLOUT_ENGINES
from reasonrl.rollout.hf import HFRolloutEngine
from reasonrl.types import Completion

pytestmark = pytest.mark.timeout(300)


class SecondTime(HFRolloutEngine):
    """`#### 0` at first; after feedback (a second user turn in the prompt), the right `#### i+1`."""

    def generate(self, prompts, params):
        out = []
        for p in prompts:
            text = self.tokenizer.decode(p)
            i = int(re.search(r"(\d+) ?\+ ?1", text).group(1))
            answer = f"#### {i + 1}" if text.count("<|user|>") > 1 else "#### 0"
            ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
            out.append(
                [Completion(ids, self.tokenizer.decode(ids), [0.0] * len(ids)) for _ in range(params.n)]
            )
        return out


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))  # undone afterwards
    ROLLOUT_ENGINES.register("second-time")(lambda model, tokenizer: SecondTime(model, tokenizer))
    data = gsm8k_dir(tmp_path)
    return _model_dir(tmp_path, extra=["#### 12 + 1?"]), data


def test_the_last_attempt_is_scored_and_the_table_says_how_many_it_took(tmp_path, setup):
    model, data = setup
    kw = dict(data_dir=data, device="cpu", overrides={"n": 2, "temperature": 0.0}, workers=1, log=lambda *a: None,
              engine="second-time")  # fmt: skip
    bench = [BENCHMARKS.get("gsm8k")]
    once = run_benchmarks(model, bench, tmp_path / "once", **kw)["benchmarks"]["gsm8k"]
    twice = run_benchmarks(model, bench, tmp_path / "twice", interaction=InteractionConfig(enabled=True, max_turns=2),
                           **kw)["benchmarks"]["gsm8k"]  # fmt: skip
    assert once["mean@n"] == 0.0 and "turns_mean" not in once
    assert twice["mean@n"] == twice["pass@1"] == 1.0
    assert twice["turns_mean"] == 2.0 and twice["first_attempt"] == 0.0
    samples = [json.loads(x) for x in (tmp_path / "twice" / "samples.jsonl").read_text().splitlines()]
    s = [x for x in samples if "committed" not in x][1]
    assert s["turns"] == 2 and s["answer_text"] == "####1" and s["completion"].startswith("####0")
    setup_file = json.loads((tmp_path / "twice" / "samples.setup.json").read_text())
    assert setup_file["interaction"]["max_turns"] == 2
    with pytest.raises(InputError, match="interaction"):
        run_benchmarks(model, bench, tmp_path / "twice", **kw)


def test_the_command_line_gives_attempts_to_a_data_file(tmp_path, setup, capsys):
    from reasonrl.cli.main import main

    model, data = setup
    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"{i} + 1?"}],
             "reward_model": {"ground_truth": str(i + 1)}} for i in range(3)]  # fmt: skip
    (data / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["eval", model, "--data", str(data / "rows.jsonl"), "--engine", "second-time", "--device", "cpu"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["mean_score"] == 0.0
    assert main([*args, "--interaction", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["mean_score"] == 1.0 and out["attempts"] == 2
    assert main([*args, "--interaction", "1"]) == 2
    assert "--interaction 1: the attempts an answer may take, >= 2" in capsys.readouterr().err
