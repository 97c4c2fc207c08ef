"""A scalar reward model as a term of the training reward (reward.weights: {correctness, reward_model}):
each completion's reward is its correctness plus the weighted score the reward model gives it (checked
against the model read directly), the per-term metrics are the means of what was scored, and the policy
trains on it."""

from __future__ import annotations

import json

import pytest
import torch
from test_train_loop import _cfg

from reasonrl.rewards.verifiers import reward_model as rm
from reasonrl.trainer.loop import train
from reasonrl.types import Problem

QUIET = lambda *a: None  # noqa: E731


@pytest.fixture(scope="module")
def rm_dir(tiny_model_dir, tmp_path_factory):
    """A reward model over the policy's own tokenizer: the tiny Qwen2 backbone with a one-label score head."""
    from transformers import AutoConfig, AutoTokenizer, Qwen2ForSequenceClassification

    config = AutoConfig.from_pretrained(tiny_model_dir)
    config.num_labels = 1
    torch.manual_seed(3)
    out = tmp_path_factory.mktemp("rm")
    Qwen2ForSequenceClassification(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return str(out)


def test_the_reward_is_correctness_plus_the_weighted_reward_model_score(tiny_model_dir, rm_dir, tmp_path,
                                                                       monkeypatch):  # fmt: skip
    rows_scored = []
    real = rm.score_batch
    monkeypatch.setattr(rm.reward_model, "score_batch",
                        lambda rs, ps, **kw: rows_scored.append(len(rs)) or real(rs, ps, **kw))  # fmt: skip
    run = tmp_path / "run"
    hist = train(_cfg(tiny_model_dir, run, 2, "reward.weights={correctness: 1.0, reward_model: 0.5}",
                      f"reward.options={{reward_model: {{path: '{rm_dir}', device: cpu, batch_size: 5}}}}",
                      "log.rollouts_per_step=4", "algo.entropy_coef=0.01"), log=QUIET)["history"]  # fmt: skip
    # the model scored the two steps' 16 rows each, and none of validation's (which reports correctness)
    assert sum(rows_scored) == 32 and "eval/accuracy" in hist[0] and "eval/accuracy" in hist[2]
    rows = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    by_step = {}
    for row in rows:
        by_step.setdefault(row["step"], []).append(row)
    assert sorted(by_step) == [1, 2] and all(len(v) == 4 for v in by_step.values())  # every group of 16 rows
    for step, groups in by_step.items():
        texts = [c["text"] for g in groups for c in g["completions"]]
        problems = [Problem(prompt=[{"role": "user", "content": g["prompt"]}], ground_truth=g["ground_truth"],
                            data_source=g["data_source"]) for g in groups for _ in g["completions"]]  # fmt: skip
        want = [r.score for r in rm.score_batch(texts, problems, path=rm_dir, device="cpu")]
        got = [c for g in groups for c in g["completions"]]
        assert [c["terms"]["reward_model"] for c in got] == pytest.approx(want, abs=1e-5)
        for c in got:
            assert c["reward"] == pytest.approx(
                c["terms"]["correctness"] + 0.5 * c["terms"]["reward_model"], abs=1e-6
            )
        assert len({round(w, 4) for w in want}) > 1  # the model tells completions apart
        row = hist[step]
        assert row["reward/term/reward_model"] == pytest.approx(sum(want) / len(want), abs=1e-5)
        assert row["reward/mean"] == pytest.approx(sum(c["reward"] for c in got) / len(got), abs=1e-5)
        assert row["verifier/reward_model/error_rate"] == 0.0
        assert row["loss/policy"] != 0.0  # advantages came from the model's scores (correctness alone: all 0)


def test_an_openrlhf_reward_func_file_scores_training_as_it_is(tiny_model_dir, tmp_path):
    """OpenRLHF's `--remote_rm_url reward_func.py` in a run: called with the prompt as the policy saw it
    (the chat template's rendering) and the query that prompt plus the completion; its rewards are the
    reward, its scores the accuracy."""
    seen = tmp_path / "seen.jsonl"
    func = tmp_path / "reward_func.py"
    func.write_text(f"""import json, torch
def reward_func(queries, prompts, labels, **kwargs):
    with open({str(seen)!r}, "a") as f:
        f.write(json.dumps([queries[0], prompts[0], labels[0]]) + "\\n")
    response = queries[0][len(prompts[0]):]
    return {{"rewards": torch.tensor([len(response) / 100]), "scores": torch.tensor([float(response.startswith("1"))])}}
""")
    from reasonrl.data.schema import write_problems
    from reasonrl.data.tasks import generate

    write_problems(tmp_path / "train.jsonl", generate("arithmetic", 64, seed=0, difficulty=2, split="train"))
    run = tmp_path / "run"
    hist = train(_cfg(tiny_model_dir, run, 1, "reward.verifier=openrlhf_function",
                      f"data.train_files=[{tmp_path / 'train.jsonl'}]",
                      f"reward.options={{openrlhf_function: {{path: '{func}', tokenizer: '{tiny_model_dir}'}}}}",
                      "val.every=0"), log=QUIET)["history"]  # fmt: skip
    calls = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(calls) == 16  # one call per row, as OpenRLHF calls a reward_func
    for query, prompt, label in calls:
        assert prompt.startswith("<|user|>") and prompt.endswith("<|assistant|>") and query.startswith(prompt)
        assert isinstance(label, str) and label.lstrip("-").isdigit()  # the row's ground truth
    rows = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    completions = [c for g in rows for c in g["completions"]]
    assert completions and all(c["reward"] == pytest.approx(len(c["text"]) / 100) for c in completions)
    by_query = {q[len(p) :] for q, p, _ in calls}
    assert {c["text"] for c in completions} <= by_query
    assert hist[1]["reward/accuracy"] == pytest.approx(
        sum(q[len(p):].startswith("1") for q, p, _ in calls) / 16)  # fmt: skip


def test_with_asynchronous_rollouts_the_worker_scores_and_the_trainer_lets_its_copy_go(tiny_model_dir, rm_dir,
                                                                                       tmp_path):  # fmt: skip
    """The rollout worker process scores the training steps with its own copy: the trainer loads the reward
    model to check it, then lets it go (one copy in memory, as `reasonrl plan` counts)."""
    lines: list[str] = []
    rm._release()
    run = tmp_path / "run"
    hist = train(_cfg(tiny_model_dir, run, 2, "reward.weights={correctness: 1.0, reward_model: 0.5}",
                      f"reward.options={{reward_model: {{path: '{rm_dir}', device: cpu}}}}", "rollout.max_staleness=1",
                      "algo.off_policy.tis_cap=2.0", "log.rollouts_per_step=4"), log=lambda *a: lines.append(" ".join(map(str, a))))["history"]  # fmt: skip
    assert any(
        "checked here and let go: the rollout worker scores with its own copy" in line for line in lines
    )
    assert not rm._models  # nothing held in the trainer's process
    rows = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    completions = [c for row in rows for c in row["completions"]]
    texts = [c["text"] for c in completions]
    problems = [Problem(prompt=[{"role": "user", "content": r["prompt"]}], ground_truth=r["ground_truth"],
                        data_source=r["data_source"]) for r in rows for _ in r["completions"]]  # fmt: skip
    want = [r.score for r in rm.score_batch(texts, problems, path=rm_dir, device="cpu")]
    assert [c["terms"]["reward_model"] for c in completions] == pytest.approx(want, abs=1e-5)  # the worker's
    assert all("reward/term/reward_model" in hist[s] for s in (1, 2))
