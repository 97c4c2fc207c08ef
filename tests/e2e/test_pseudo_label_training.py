"""Training with `reward.pseudo_label` (TTRL): the samples of each prompt vote, and the majority answer is
the label they are scored against. In process, the HF engine's samples are scripted (each prompt's
eight voters answer 7, 8, 7, 8, 7 and three nothing: 7 wins with 3 of 8, and the first four train), on a
data file whose rows have no labels; the worker process and a SIGKILL + resume run the real model."""

from __future__ import annotations

import json

import pytest
import torch
from test_async_rollouts import ASYNC
from test_train_loop import _cfg

from reasonrl.data.files import write_rows
from reasonrl.data.tasks.arithmetic import DATA_SOURCE
from reasonrl.trainer.loop import train
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(300)
VOTES = ["<answer>7</answer>", "<answer>8</answer>", "<answer>7</answer>", "<answer>8</answer>",
         "<answer>7</answer>", "8", "", "+"]  # fmt: skip


def _scripted(monkeypatch):
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.types import Completion

    def generate(self, prompts, params):
        out = []
        for p in prompts:
            group = []
            for i in range(params.n):
                ids = self.tokenizer(VOTES[i % len(VOTES)] or "=", add_special_tokens=False)["input_ids"]
                with torch.no_grad():
                    logits = self.model(torch.tensor([p + ids])).logits[0, len(p) - 1 : -1].float()
                logps = logits.log_softmax(-1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()
                group.append(Completion(ids, self.tokenizer.decode(ids), logps, "stop"))
            out.append(group)
        return out

    monkeypatch.setattr(HFRolloutEngine, "generate", generate)


def test_unlabelled_rows_train_on_the_votes_of_more_samples_than_train(tiny_model_dir, tmp_path, monkeypatch):
    _scripted(monkeypatch)
    rows = [Problem([{"role": "user", "content": f"{a}+{a}="}], "", DATA_SOURCE, uid=f"u{a}").to_row()
            for a in range(1, 9)]  # fmt: skip
    write_rows(tmp_path / "unlabelled.parquet", rows)
    run = tmp_path / "run"
    cfg = _cfg(tiny_model_dir, run, 2, "reward.pseudo_label.enabled=true", "reward.pseudo_label.votes=8",
               f"data.train_files=[{tmp_path / 'unlabelled.parquet'}]", "data.task=addsub", "train.global_batch=16",
               "checkpoint.every=0", "log.rollouts_per_step=4")  # fmt: skip
    hist = [h for h in train(cfg, log=lambda *a: None)["history"] if h["step"] > 0]
    assert len(hist) == 2
    for h in hist:
        assert h["reward/pseudo/vote/majority_ratio"] == pytest.approx(3 / 8)
        assert h["reward/pseudo/vote/distinct_labels"] == pytest.approx(1 / 4)  # 4 prompts, one label: 7
        assert h["reward/mean"] == 0.5  # the first four: 7, 8, 7, 8
        assert h["rollout/batch_size"] == 16.0  # four prompts x rollout.n, not x votes
        assert "reward/pseudo/check/label_accuracy" not in h  # no row has a label to check the votes against
    groups = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(groups) == 8
    for g in groups:
        assert g["pseudo_label"] == "7" and g["ground_truth"] == ""
        assert [c["reward"] for c in g["completions"]] == [1.0, 0.0, 1.0, 0.0]


def test_the_rollout_worker_votes_too(tiny_model_dir, tmp_path):
    """max_staleness=1: the worker process relabels (the generated task's rows keep their labels, so the
    votes are checked against them)."""
    cfg = _cfg(tiny_model_dir, tmp_path / "run", 2, "reward.pseudo_label.enabled=true", *ASYNC,
               "checkpoint.every=0")  # fmt: skip
    hist = [h for h in train(cfg, log=lambda *a: None)["history"] if h["step"] > 0]
    assert len(hist) == 2
    for h in hist:
        assert h["reward/pseudo/vote/labelled_frac"] == 1.0
        assert (
            0.0 <= h["reward/pseudo/check/label_accuracy"] <= 1.0 and "reward/pseudo/vote/majority_ratio" in h
        )


def test_sigkill_and_resume_end_with_the_uninterrupted_runs_metrics(tiny_model_dir, tmp_path):
    from test_run_dir import killed_and_resumed
    from test_train_loop import _overrides, _stable

    args = lambda run: [*_overrides(tiny_model_dir, run, 4, "reward.pseudo_label.enabled=true",  # noqa: E731
                                    "reward.pseudo_label.votes=6"), "checkpoint.every=2"]  # fmt: skip
    full, resumed = killed_and_resumed(args, tmp_path, kill_after=2, steps=4)
    assert [r["step"] for r in resumed] == list(range(5))
    assert all("reward/pseudo/vote/majority_ratio" in r for r in resumed[1:])
    for r in resumed:
        assert _stable(r) == full[r["step"]], r["step"]


def test_two_ranks_each_vote_on_their_share(tiny_model_dir, tmp_path):
    from test_fsdp2_train import _launch, _metrics, _ok

    args = [f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={tmp_path / 'two'}", "train.steps=2",
            "reward.pseudo_label.enabled=true", "reward.pseudo_label.votes=6", "train.global_batch=16", "rollout.n=4",
            "train.mini_batch=16", "train.micro_batch=4", "data.train_size=64", "checkpoint.every=0",
            "rollout.max_new_tokens=12", "log.progress=false"]  # fmt: skip
    _ok(_launch(2, args))
    rows = _metrics(tmp_path / "two")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(
        r["reward/pseudo/vote/labelled_frac"] == 1.0 and "reward/pseudo/vote/majority_ratio" in r
        for r in rows[1:]
    )
    # this rank's two prompts x rollout.n, not x votes
    assert all(r["rollout/batch_size"] == 8.0 for r in rows[1:])
