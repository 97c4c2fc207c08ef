"""Off-policy guidance's loss (LUFFY): a demonstration's tokens are trained with -A * f(p), f the shaping
(p / (p + gamma), p, log p), with no ratio and no clip, while sampled rows keep the policy loss; the
sampler corrections (TIS, rejection) and the sampler-vs-trainer gap leave the demonstrations out. Values
and gradients checked by hand."""

from __future__ import annotations

import math

import pytest
import torch

from reasonrl.algorithms.guidance import guided_token_loss
from reasonrl.config import AlgoConfig, GuidanceConfig, OffPolicyConfig
from reasonrl.trainer.batching import build_batch
from reasonrl.trainer.guidance import guided_metrics, sampled_only
from reasonrl.trainer.step import attach_tis_weights, make_loss_fn
from reasonrl.types import Completion, Problem, RewardResult, RolloutGroup, TrainBatch


@pytest.mark.parametrize(("shaping", "value", "grad"), [
    # p = 0.25, A = 2, gamma = 0.1: f = p / (p + gamma) = 0.25 / 0.35; d f / d log p = gamma p / (p + gamma)^2
    ("regularized", -2 * 0.25 / 0.35, -2 * 0.1 * 0.25 / 0.35**2),
    ("prob", -2 * 0.25, -2 * 0.25),  # d p / d log p = p
    ("logprob", -2 * math.log(0.25), -2.0),  # the advantage-weighted NLL gradient
])  # fmt: skip
def test_each_shaping_by_hand(shaping, value, grad):
    logprobs = torch.tensor([math.log(0.25)], requires_grad=True)
    loss = guided_token_loss(logprobs, torch.tensor([2.0]), shaping, gamma=0.1)
    loss.sum().backward()
    assert loss.item() == pytest.approx(value, rel=1e-6)
    assert logprobs.grad.item() == pytest.approx(grad, rel=1e-6)


def test_regularized_shaping_weighs_up_unlikely_tokens():
    # the gradient per unit advantage: gamma p / (p + gamma)^2, largest at p = gamma; plain p's is p itself,
    # so a token at p = 0.01 gets ~8x the plain gradient and one at p = 0.9 ~9x less
    logprobs = torch.log(torch.tensor([0.01, 0.1, 0.9])).requires_grad_(True)
    guided_token_loss(logprobs, -torch.ones(3), "regularized", 0.1).sum().backward()
    shaped = logprobs.grad.clone()
    logprobs.grad = None
    guided_token_loss(logprobs, -torch.ones(3), "prob").sum().backward()
    assert (shaped / logprobs.grad).tolist() == pytest.approx(
        [0.1 / 0.11**2, 0.1 / 0.2**2, 0.1 / 1.0**2], rel=1e-5
    )
    with pytest.raises(ValueError, match="unknown guidance shaping 'p'"):
        guided_token_loss(logprobs, torch.ones(3), "p")


def _batch() -> TrainBatch:
    # row 0 sampled, row 1 the demonstration; 2 tokens each
    b = TrainBatch(input_ids=torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 3, dtype=torch.long),
                   mask=torch.ones(2, 2, dtype=torch.bool), prompt_len=1, rewards=torch.tensor([0.0, 1.0]),
                   group_ids=torch.tensor([0, 0]), guided=torch.tensor([False, True]))  # fmt: skip
    b.advantages = torch.tensor([[-1.0, -1.0], [1.0, 1.0]])
    return b


def test_the_demonstration_rows_take_the_guided_term_and_the_samples_the_policy_loss():
    b = _batch()
    p = torch.tensor([[0.5, 0.5], [0.2, 0.4]])
    logprobs = p.log().requires_grad_(True)  # no old log-probs: ratio 1 on the samples
    algo = AlgoConfig(guidance=GuidanceConfig(enabled=True))
    loss, metrics = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, logprobs, None)
    guided = [-(0.2 / 0.3), -(0.4 / 0.5)]  # -A * p / (p + 0.1), A = 1
    # token mean over the 4 tokens: the samples' -A * ratio = +1 each, then the demonstration's
    assert loss.item() == pytest.approx((1 + 1 + sum(guided)) / 4, rel=1e-6)
    assert metrics["loss/guided"].item() == pytest.approx(sum(guided) / 4, rel=1e-6)
    loss.backward()
    assert logprobs.grad[1].tolist() == pytest.approx(
        [-0.1 * 0.2 / 0.3**2 / 4, -0.1 * 0.4 / 0.5**2 / 4], rel=1e-5
    )
    assert logprobs.grad[0].tolist() == pytest.approx([0.25, 0.25], rel=1e-6)  # -A * d ratio / 4
    # unmarked, the same rows are all policy-loss rows (a demonstration trained like a sample)
    b.guided = None
    plain, _ = make_loss_fn(AlgoConfig(), b.mask.sum(), 2, 2)(b, p.log(), None)
    assert plain.item() == pytest.approx(0.0, abs=1e-7)  # (+1 + 1 - 1 - 1) / 4


def test_sampler_corrections_and_the_gap_leave_the_demonstrations_out():
    b = _batch()
    current = torch.tensor([[-1.0, -1.0], [-2.0, -2.0]])
    # the samples' sampler: w = exp(old - sampler) = 3 -> capped 2; the demonstration's "sampler" is 0 (unknown)
    b.sampler_logprobs = torch.tensor([[-1.0 - math.log(3.0)] * 2, [0.0, 0.0]])
    algo = AlgoConfig(guidance=GuidanceConfig(enabled=True), off_policy=OffPolicyConfig(tis_cap=2.0))
    loss, metrics = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, current.clone().requires_grad_(True), None)
    p = math.exp(-2.0)
    assert loss.item() == pytest.approx(
        (2 + 2 - 2 * p / (p + 0.1)) / 4, rel=1e-6
    )  # weights on the samples only
    # the demonstration's tokens are neither capped nor in the gap (|0 - (-2)| = 2 would be its max)
    assert metrics["actor/is_capped_frac"].item() == pytest.approx(1.0)  # both sampled tokens, of those alone
    assert metrics["actor/is_weight_mean"].item() == pytest.approx(2.0)
    assert metrics["rollout/logprob_gap_max"].item() == pytest.approx(math.log(3.0), rel=1e-6)
    assert metrics["rollout/logprob_gap_mean"].item() == pytest.approx(math.log(3.0), rel=1e-6)
    # precomputed weights (several updates per step): the demonstration's rows are left out (weight 0, its
    # term replaces theirs) and do not count in the metrics or the normaliser
    b.old_logprobs = current
    m = attach_tis_weights(b, OffPolicyConfig(tis_cap=2.0, tis_normalize=True))
    assert b.is_weights.flatten().tolist() == pytest.approx([1.0, 1.0, 0.0, 0.0])  # 2 / mean 2
    assert (m["actor/is_capped_frac"], m["actor/is_norm_factor"]) == pytest.approx((1.0, 2.0))  # their mean
    loss2, _ = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, current.clone().requires_grad_(True), None)
    assert loss2.item() == pytest.approx((1 + 1 - 2 * p / (p + 0.1)) / 4, rel=1e-6)


def test_the_batch_marks_the_demonstrations_and_metrics_see_the_samples_alone():
    prob = Problem([{"role": "user", "content": "q"}], "1", "reasonrl/arithmetic", uid="q")
    sampled = [Completion([5], "a", [-0.1]), Completion([6], "b", [-0.2])]
    demo = Completion([7, 8], "c", [0.0, 0.0], guided=True)
    results = [RewardResult(s, {"reason": "x"}) for s in (0.0, 0.0, 1.0)]
    g = RolloutGroup(prob, [3], [*sampled, demo], [0.0, 0.0, 1.0], results)
    batch = build_batch([g], pad_id=0)
    assert batch.guided.tolist() == [False, False, True]
    assert build_batch([RolloutGroup(prob, [3], sampled, [0.0, 0.0])], 0).guided is None
    (only,) = sampled_only([g])
    assert only.completions == sampled and only.rewards == [0.0, 0.0] and len(only.results) == 2
    assert guided_metrics([g]) == {"rollout/guided_reward": 1.0, "rollout/guided_correct": 1.0}
    assert batch.select(torch.tensor([2])).guided.tolist() == [True]


def test_dynamic_sampling_keeps_a_group_whose_only_success_is_its_demonstration():
    from reasonrl.trainer.sampling import varied_groups

    prob = Problem([{"role": "user", "content": "q"}], "1", "reasonrl/arithmetic", uid="q")
    comps = [
        Completion([5], "a", [-0.1]),
        Completion([6], "b", [-0.2]),
        Completion([7], "c", [0.0], guided=True),
    ]
    g = RolloutGroup(prob, [3], comps, [0.0, 0.0, 1.0], [RewardResult(s) for s in (0.0, 0.0, 1.0)])
    assert varied_groups([g]) == [g]  # the samples alone would all be 0: dropped without guidance
    assert varied_groups(sampled_only([g])) == []
