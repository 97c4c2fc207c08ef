"""reward.confidence: each completion's reward is the policy's confidence in it (Intuitor's self-certainty,
RENT's negative entropy, EM-RL's log-probability), the mean over the completion's own tokens. The formula is
checked on logits written by hand, the per-completion means (a tool's tokens left out) and the metrics on
tensors whose answers are known, and the settings that cannot work are refused."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from reasonrl.config import ConfigError, load_config
from reasonrl.trainer.batching import build_batch
from reasonrl.trainer.confidence import check_confidence, confidence_rewards, self_certainty
from reasonrl.types import Completion, Problem, RewardResult, RolloutGroup


class _Logits(torch.nn.Module):
    """A 'model' whose next-token logits are the same given row at every position."""

    def __init__(self, row):
        super().__init__()
        self.row = torch.tensor(row, dtype=torch.float32)

    def forward(self, input_ids, **_):
        return SimpleNamespace(logits=self.row.expand(*input_ids.shape, len(self.row)).clone())


def _batch(prompt=2, completion=3):
    g = RolloutGroup(Problem([{"role": "user", "content": "q"}], "1", "math"), [5] * prompt,
                     [Completion([1] * completion, "x", [0.0] * completion)])  # fmt: skip
    return build_batch([g], pad_id=0)


def test_self_certainty_is_the_kl_of_uniform_from_the_next_token_distribution():
    (uniform,) = self_certainty(_Logits([0.7, 0.7, 0.7, 0.7]), _batch())
    assert torch.allclose(uniform, torch.zeros(1, 3), atol=1e-6)  # knowing nothing: 0
    p = [0.5, 0.25, 0.25]
    (sc,) = self_certainty(_Logits([math.log(x) for x in p]), _batch())
    want = -math.log(3) - sum(math.log(x) for x in p) / 3  # KL(U || p) by hand: 0.0566
    assert sc.shape == (1, 3) and torch.allclose(sc, torch.full((1, 3), want), atol=1e-6)
    (sharp,) = self_certainty(_Logits([10.0, 0.0, 0.0]), _batch())
    assert (sharp > sc).all()  # surer is larger
    (cooled,) = self_certainty(_Logits([math.log(x) for x in p]), _batch(), temperature=0.5)
    assert (cooled > sc).all()  # the sampling temperature's distribution: sharper at 0.5
    (chunked,) = self_certainty(_Logits([10.0, 0.0, 0.0]), _batch(completion=7), chunk=2)
    assert chunked.shape == (1, 7) and torch.allclose(chunked, sharp[:, :1].expand(1, 7))


class _Engine:
    """`outputs` as the engines give it: per-token log-probs and entropies, or a forward's own output."""

    def __init__(self, logprobs, entropy):
        self.logprobs, self.entropy, self.forwards = logprobs, entropy, []

    def outputs(self, batch, micro_batch, with_entropy=False, forward=None):
        if forward is not None:
            self.forwards.append(forward)
            return self.logprobs * 0 + 2.0  # (a constant per-token self-certainty)
        return (self.logprobs, self.entropy) if with_entropy else self.logprobs


def _groups(correct):
    out = []
    for row in correct:
        comps = [Completion([1, 1, 1], "x", [0.0] * 3) for _ in row]
        out.append(RolloutGroup(Problem([{"role": "user", "content": "q"}], "1", "math"), [5], comps,
                                [float(c) for c in row], [RewardResult(float(c)) for c in row]))  # fmt: skip
    return out


def test_each_completion_is_rewarded_with_its_mean_confidence_over_its_own_tokens():
    groups = _groups([[1, 0], [0, 0]])
    batch = build_batch(groups, pad_id=0)
    batch.mask[0, 2] = False  # a tool's output token: not the model's, not counted
    lp = torch.tensor([[-0.1, -0.3, -9.0], [-1.0, -1.0, -1.0], [-2.0, -0.5, -0.5], [-0.2, -0.2, -0.2]])
    ent = torch.tensor([[0.5, 0.1, 9.0], [1.0, 2.0, 3.0], [0.0, 0.3, 0.3], [1.0, 1.0, 1.0]])
    metrics = confidence_rewards(_Engine(lp, ent), batch, groups, "logprob", micro_batch=2)
    assert torch.allclose(batch.rewards, torch.tensor([-0.2, -1.0, -1.0, -0.2]))
    assert groups[0].rewards == pytest.approx([-0.2, -1.0])  # (rollouts.jsonl records them)
    assert (
        metrics["reward/confidence/pick_accuracy"] == 0.5
    )  # group 0 picks its right sample, group 1 has none
    assert metrics["reward/confidence/correlation"] > 0  # the right sample is the surer one here
    assert [r.score for r in groups[0].results] == [1.0, 0.0]  # the verifier's results stay as they were
    confidence_rewards(_Engine(lp, ent), batch, groups, "neg_entropy", micro_batch=2)
    assert torch.allclose(batch.rewards, -torch.tensor([0.3, 2.0, 0.2, 1.0]))
    engine = _Engine(lp, ent)
    confidence_rewards(engine, batch, groups, "self_certainty", micro_batch=2, temperature=0.7)
    assert torch.allclose(batch.rewards, torch.full((4,), 2.0))
    assert engine.forwards[0].func is self_certainty and engine.forwards[0].keywords == {"temperature": 0.7}


@pytest.mark.parametrize(("override", "match"), [
    ("reward.confidence.measure=certainty", "not one of none, self_certainty, neg_entropy, logprob"),
    ("reward.pseudo_label.enabled=true", "with reward.pseudo_label"),
    ("algo.dynamic_sampling.enabled=true", "with algo.dynamic_sampling"),
    ("algo.adv_estimator=remax", "with algo.adv_estimator=remax"),
    ("rollout.interaction.enabled=true", "with rollout.interaction"),
    ("algo.guidance.enabled=true", "with algo.guidance"),
])  # fmt: skip
def test_settings_that_cannot_work_are_refused(override, match):
    measure = "reward.confidence.measure=self_certainty"
    with pytest.raises(ConfigError, match=match):
        load_config("demo", [measure, override] if "measure" not in override else [override])
    check_confidence(load_config("demo", [measure]))


def test_a_rank_whose_correlation_is_undefined_reduces_with_the_others(monkeypatch):
    import reasonrl.distributed as dist

    lp = torch.tensor([[-0.1, -0.1, -0.1], [-1.0, -1.0, -1.0]])
    mixed, flat = _groups([[1, 0]]), _groups([[0, 0]])  # all wrong: no correlation to speak of
    a = confidence_rewards(_Engine(lp, lp), build_batch(mixed, pad_id=0), mixed, "logprob", micro_batch=2)
    b = confidence_rewards(_Engine(lp, lp), build_batch(flat, pad_id=0), flat, "logprob", micro_batch=2)
    assert "reward/confidence/correlation" in a and "reward/confidence/correlation" not in b
    monkeypatch.setattr(dist, "active", lambda: True)
    monkeypatch.setattr(dist, "all_gather_objects", lambda m: [a, b])
    out = dist.reduce_metrics(a)
    assert out["reward/confidence/correlation"] == pytest.approx(1.0)
    assert out["reward/confidence/count"] == 4.0 and out["reward/confidence/pick_accuracy"] == 0.5
