"""Trainer pieces that combine the algorithm library: dynamic-sampling refill, reward shaping, KL folded
into rewards, advantages per estimator, TIS-weighted loss, mini-batch early stop, critic value step.
Hand-computed values are in comments."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch

from reasonrl.config import AlgoConfig, KLConfig, OffPolicyConfig, ShapingConfig
from reasonrl.rollout.base import SamplingParams
from reasonrl.trainer.batching import build_batch
from reasonrl.trainer.critic import Critic
from reasonrl.trainer.sampling import fill_groups, round_params, varied_groups
from reasonrl.trainer.shaping import shape_batch, shape_rewards
from reasonrl.trainer.step import attach_tis_weights, compute_advantages, early_stop, make_loss_fn
from reasonrl.types import Completion, Problem, RolloutGroup, TrainBatch


def _group(uid: str, rewards: list[float], lengths: list[int] | None = None, finish=None) -> RolloutGroup:
    lengths = lengths or [2] * len(rewards)
    finish = finish or ["stop"] * len(rewards)
    comps = [Completion([5 + i % 3] * n, "x", [-0.5] * n, f) for i, (n, f) in enumerate(zip(lengths, finish))]
    prob = Problem([{"role": "user", "content": uid}], "1", "arith", uid=uid)
    return RolloutGroup(prob, [7, 8, 9], comps, list(rewards), [{} for _ in rewards])


# ---------------------------------------------------------------- dynamic sampling


@pytest.mark.parametrize(
    "rewards,kept",
    [
        ([1.0, 1.0, 1.0], False),  # all equal: zero GRPO advantage -> dropped
        ([0.0, 0.0], False),
        ([0.3], False),  # singleton group: no spread
        ([0.0, 0.5], True),
        ([1.0, 1.0, 0.999], True),  # any spread counts (eps = 0)
        ([-5.0, 5.0, 5.0], True),
    ],
)
def test_varied_groups_keeps_groups_with_reward_spread(rewards, kept):
    g = _group("a", rewards)
    assert varied_groups([g]) == ([g] if kept else [])


def _draw_from(rounds: list[list[list[float]]]):
    """A fake `draw(round)`: round r returns groups with the given rewards, named r.i."""
    calls = []

    def draw(rnd):
        calls.append(rnd)
        groups = [_group(f"{rnd}.{i}", rw) for i, rw in enumerate(rounds[rnd])]
        return groups, {"reward/mean": float(rnd)}

    return draw, calls


V, Z = [0.0, 1.0], [1.0, 1.0]  # a varied group, a zero-variance group

# (rounds' groups, need, max_rounds, expected uids, rounds used, dropped, padded, fallback)
REFILL = [
    ([[V, V]], 2, 3, ["0.0", "0.1"], 1, 0, 0, 0),  # full at once: one round
    ([[V, Z], [Z, V]], 2, 3, ["0.0", "1.1"], 2, 2, 0, 0),  # refilled from round 1
    ([[V, Z], [V, V]], 2, 3, ["0.0", "1.0"], 2, 1, 0, 0),  # extra kept group discarded
    ([[Z, Z], [Z, V], [Z, Z]], 3, 2, ["1.1", "1.1", "1.1"], 3, 5, 2, 0),  # cap: pad by repeating
    ([[V, Z], [Z, Z]], 3, 1, ["0.0", "0.0", "0.0"], 2, 3, 2, 0),
    ([[V, V], [Z, Z]], 5, 1, ["0.0", "0.1", "0.0", "0.1", "0.0"], 2, 2, 3, 0),  # repeat in order
    ([[Z, Z], [Z, Z]], 2, 1, ["1.0", "1.1"], 2, 4, 0, 1),  # nothing kept: last round as drawn
    ([[Z, V]], 2, 0, ["0.1", "0.1"], 1, 1, 1, 0),  # max_rounds 0: no refill
]


@pytest.mark.parametrize("rounds,need,max_rounds,uids,used,dropped,padded,fallback", REFILL)
def test_fill_groups_refill_and_cap(rounds, need, max_rounds, uids, used, dropped, padded, fallback):
    draw, calls = _draw_from(rounds)
    groups, round_metrics, stats = fill_groups(draw, need, max_rounds)
    assert [g.problem.uid for g in groups] == uids
    assert len(groups) == need  # the batch size never changes
    assert calls == list(range(used))
    assert [m["reward/mean"] for m in round_metrics] == [float(r) for r in range(used)]
    assert stats == {
        "rollout/ds_rounds": float(used),
        "rollout/ds_dropped_groups": float(dropped),
        "rollout/ds_padded_groups": float(padded),
        "rollout/ds_fallback": float(fallback),
    }


def test_round_params_shift_the_seed_after_round_zero():
    p = SamplingParams(n=4, seed=100)
    assert round_params(p, 0) is p
    assert [round_params(p, r).seed for r in (1, 2)] == [101, 102]
    assert round_params(p, 2).n == 4
    unseeded = SamplingParams(seed=None)
    assert round_params(unseeded, 3).seed is None


# ---------------------------------------------------------------- reward shaping


SHAPE = [
    # (reward_map, buffer, penalty, scores, lengths, expected); max_len = 10
    ([], 0, 1.0, [0.0, 1.0, 0.5], [3, 10, 12], [0.0, 1.0, 0.5]),  # off: identity
    ([-5.0, 5.0], 0, 1.0, [0.0, 1.0, 0.5], [3, 10, 12], [-5.0, 5.0, 0.0]),  # -5 + 10 s
    # expected length 10 - 4 = 6: L=6 -> 0, L=8 -> (6-8)/4 = -0.5, L=10 -> -1, L=12 -> -1 (capped)
    ([], 4, 1.0, [1.0, 1.0, 1.0, 1.0], [6, 8, 10, 12], [1.0, 0.5, 0.0, 0.0]),
    ([], 4, 2.0, [1.0, 1.0], [7, 9], [0.5, -0.5]),  # (6-7)/4*2 = -0.5, (6-9)/4*2 = -1.5
    ([-5.0, 5.0], 4, 1.0, [1.0, 0.0], [8, 8], [4.5, -5.5]),  # penalty in mapped units
]


@pytest.mark.parametrize("reward_map,buffer,penalty,scores,lengths,expected", SHAPE)
def test_shape_rewards(reward_map, buffer, penalty, scores, lengths, expected):
    algo = AlgoConfig(
        shaping=ShapingConfig(reward_map=reward_map, overlong_buffer=buffer, overlong_penalty=penalty)
    )
    out = shape_rewards(torch.tensor(scores), torch.tensor(lengths), algo, 10)
    torch.testing.assert_close(out, torch.tensor(expected), rtol=0, atol=1e-6)


def test_shape_batch_masks_truncated_rows_only_when_asked():
    groups = [_group("a", [1.0, 0.0, 1.0], lengths=[2, 4, 3], finish=["stop", "length", "stop"])]
    for on in (False, True):
        batch = build_batch(copy.deepcopy(groups), pad_id=0)
        before = batch.mask.clone()
        metrics = shape_batch(batch, AlgoConfig(shaping=ShapingConfig(mask_truncated=on)), 4)
        assert batch.mask[0].tolist() == before[0].tolist() and batch.mask[2].tolist() == before[2].tolist()
        assert batch.mask[1].any().item() is (not on)
        assert batch.rewards.tolist() == [1.0, 0.0, 1.0]  # the truncated row keeps its reward
        if on:
            assert metrics["rollout/masked_truncated_frac"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("reward_map,buffer", [([], 0), ([-1.0, 1.0], 0), ([], 1), ([-1.0, 1.0], 2)])
def test_shape_batch_reports_the_shaping_it_applied(reward_map, buffer):
    # lengths 2, 4, 3 against max_len 4: with a buffer of 1, the 4-token row is penalised (-1); of 2, the
    # 3-token row too ((2 - 3) / 2 = -0.5); the metrics appear only for the shaping that is on
    groups = [_group("a", [1.0, 0.0, 1.0], lengths=[2, 4, 3], finish=["stop", "length", "stop"])]
    batch = build_batch(groups, pad_id=0)
    algo = AlgoConfig(shaping=ShapingConfig(reward_map=reward_map, overlong_buffer=buffer))
    metrics = shape_batch(batch, algo, 4)
    mapped = [1.0, -1.0, 1.0] if reward_map else [1.0, 0.0, 1.0]
    penalty = {0: [0.0, 0.0, 0.0], 1: [0.0, -1.0, 0.0], 2: [0.0, -1.0, -0.5]}[buffer]
    assert batch.rewards.tolist() == pytest.approx([m + p for m, p in zip(mapped, penalty)])
    want = {}
    if reward_map or buffer:
        want["reward/shaped_mean"] = pytest.approx(sum(mapped + penalty) / 3)
    if buffer:
        want["reward/overlong_penalty"] = pytest.approx(sum(penalty) / 3)
        want["reward/overlong_frac"] = pytest.approx(sum(p < 0 for p in penalty) / 3)
    assert metrics == want


# ---------------------------------------------------------------- advantages


def _batch(rewards, group_ids, mask) -> TrainBatch:
    mask = torch.tensor(mask, dtype=torch.bool)
    B, T = mask.shape
    return TrainBatch(
        input_ids=torch.zeros(B, T + 1, dtype=torch.long),
        attention_mask=torch.ones(B, T + 1, dtype=torch.long),
        mask=mask,
        prompt_len=1,
        rewards=torch.tensor(rewards),
        group_ids=torch.tensor(group_ids),
    )


def test_grpo_advantages_broadcast_and_zero_off_mask():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1, 0], [1, 0, 0]])
    compute_advantages(b, AlgoConfig(adv_estimator="grpo"))
    # mean 0.5, unbiased std = sqrt(0.5) = 0.70711: A = +-0.70711 (eps 1e-6)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    torch.testing.assert_close(b.advantages, torch.tensor([[a, a, 0.0], [-a, 0.0, 0.0]]), rtol=1e-6, atol=0)


def test_kl_folded_into_sequence_rewards():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    b.old_logprobs = torch.tensor([[-1.0, -1.0], [-1.0, -9.0]])
    b.ref_logprobs = torch.tensor([[-1.5, -2.0], [-0.5, 0.0]])
    algo = AlgoConfig(adv_estimator="grpo", adv_kwargs={"scale_by_std": False},
                      kl=KLConfig(coef=0.1, estimator="k1", in_reward=True))  # fmt: skip
    m = compute_advantages(b, algo)
    # k1 = old - ref: row 0: 0.5 + 1.0 = 1.5 -> r' = 1 - 0.15 = 0.85; row 1: -0.5 (pad ignored) -> r' = 0.05
    # mean 0.45 -> A = [0.40, -0.40]
    torch.testing.assert_close(b.advantages, torch.tensor([[0.4, 0.4], [-0.4, 0.0]]), rtol=1e-5, atol=1e-7)
    assert m["reward/kl_penalty"] == pytest.approx((0.15 - 0.05) / 2)
    # kl_coef alone (not in reward) leaves the rewards alone: A = [0.5, -0.5]
    b2 = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    compute_advantages(
        b2, AlgoConfig(adv_estimator="grpo", adv_kwargs={"scale_by_std": False}, kl=KLConfig(coef=0.1))
    )
    assert b2.advantages[:, 0].tolist() == [0.5, -0.5]


def test_gae_uses_critic_values_and_kl_token_rewards():
    b = _batch([1.0], [0], [[1, 1]])
    b.values = torch.tensor([[0.5, 0.5]])
    algo = AlgoConfig(adv_estimator="gae", adv_kwargs={"gamma": 1.0, "lam": 1.0, "whiten": False})
    compute_advantages(b, algo)
    # delta_1 = 1 + 0 - 0.5 = 0.5 = A_1; delta_0 = 0 + 0.5 - 0.5 = 0, A_0 = 0 + A_1 = 0.5; R = A + V = 1
    torch.testing.assert_close(b.advantages, torch.tensor([[0.5, 0.5]]))
    torch.testing.assert_close(b.returns, torch.tensor([[1.0, 1.0]]))
    b.old_logprobs = torch.tensor([[-1.0, -1.0]])
    b.ref_logprobs = torch.tensor([[-2.0, -1.0]])  # k1 = [1, 0]
    compute_advantages(b, dataclasses.replace(algo, kl=KLConfig(coef=0.5, estimator="k1", in_reward=True)))
    # token rewards [-0.5, 1]: delta_1 = 0.5 = A_1; delta_0 = -0.5 + 0.5 - 0.5 = -0.5, A_0 = 0; R = [0.5, 1]
    torch.testing.assert_close(b.advantages, torch.tensor([[0.0, 0.5]]))
    torch.testing.assert_close(b.returns, torch.tensor([[0.5, 1.0]]))


def test_remax_subtracts_the_greedy_baseline():
    b = _batch([1.0, 0.0, 1.0], [0, 0, 1], [[1], [1], [1]])
    m = compute_advantages(
        b, AlgoConfig(adv_estimator="remax"), baseline_rewards=torch.tensor([1.0, 1.0, 0.0])
    )
    assert b.advantages[:, 0].tolist() == [0.0, -1.0, 1.0]
    assert m["reward/baseline_mean"] == pytest.approx(2 / 3)
    assert "reward/baseline_mean" not in compute_advantages(b, AlgoConfig(adv_estimator="grpo"))
    with pytest.raises(ValueError, match="baseline_rewards"):
        compute_advantages(b, AlgoConfig(adv_estimator="remax"))


# ---------------------------------------------------------------- loss: TIS and KL placement


def test_tis_weights_scale_the_policy_loss_and_kl_in_reward_drops_the_kl_term():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    b.advantages = torch.tensor([[1.0, 1.0], [-1.0, 0.0]])
    b.old_logprobs = torch.tensor([[-1.0, -1.0], [-1.0, -1.0]])
    # w = exp(old - sampler): [3 -> capped 2, 1], [0.5, pad]
    b.sampler_logprobs = b.old_logprobs - torch.log(torch.tensor([[3.0, 1.0], [0.5, 1.0]]))
    b.ref_logprobs = b.old_logprobs.clone()
    m = attach_tis_weights(b, OffPolicyConfig(tis_cap=2.0))
    assert m["actor/is_capped_frac"] == pytest.approx(1 / 3)
    logprobs = b.old_logprobs.clone().requires_grad_(True)  # ratio 1: per-token loss = -A
    algo = AlgoConfig(off_policy=OffPolicyConfig(tis_cap=2.0), kl=KLConfig(coef=0.1, in_reward=True))
    loss, metrics = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, logprobs, None)
    # token_mean of -A * w over 3 tokens: (-1*2 - 1*1 + 1*0.5) / 3 = -2.5 / 3
    assert loss.item() == pytest.approx(-2.5 / 3, rel=1e-6)
    assert "loss/kl" not in metrics
    _, with_kl = make_loss_fn(AlgoConfig(kl=KLConfig(coef=0.1)), b.mask.sum(), 2, 2)(b, logprobs, None)
    assert with_kl["loss/kl"].item() == 0.0  # logprobs == ref: k3 = 0
    k1 = AlgoConfig(kl=KLConfig(coef=0.1, estimator="k1"))
    b.ref_logprobs = b.old_logprobs - 0.5  # k1 = logprobs - ref = 0.5 on every token
    kl_loss, kl_metrics = make_loss_fn(k1, b.mask.sum(), 2, 2)(b, logprobs, None)
    assert kl_metrics["loss/kl"].item() == pytest.approx(0.5)
    assert kl_loss.item() == pytest.approx(-1.0 / 3 + 0.1 * 0.5, rel=1e-6)  # policy loss + coef x KL
    plain, _ = make_loss_fn(AlgoConfig(), b.mask.sum(), 2, 2)(b, logprobs, None)
    assert plain.item() == pytest.approx(-1.0 / 3, rel=1e-6)  # (-1 - 1 + 1) / 3 without weights


def test_tis_without_old_logprobs_takes_weights_from_the_pre_update_forward():
    # one update per step: no separate old log-probs; the loss's own (detached) log-probs are the old
    # ones, so the weights and the loss equal the precomputed path's, and a gap metric is logged
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    b.advantages = torch.tensor([[1.0, 1.0], [-1.0, 0.0]])
    current = torch.tensor([[-1.0, -1.0], [-1.0, -1.0]])
    b.sampler_logprobs = current - torch.log(torch.tensor([[3.0, 1.0], [0.5, 1.0]]))
    algo = AlgoConfig(off_policy=OffPolicyConfig(tis_cap=2.0))
    loss, metrics = make_loss_fn(algo, b.mask.sum(), 2, 2)(b, current.clone().requires_grad_(True), None)
    assert loss.item() == pytest.approx(-2.5 / 3, rel=1e-6)  # as with attach_tis_weights above
    assert metrics["actor/is_capped_frac"].item() == pytest.approx(1 / 3)
    # |sampler - old| = [log 3, 0, log 0.5]: mean (log 3 + log 2) / 3, max log 3
    assert metrics["rollout/logprob_gap_mean"].item() == pytest.approx(math.log(6) / 3, rel=1e-6)
    assert metrics["rollout/logprob_gap_max"].item() == pytest.approx(math.log(3), rel=1e-6)


def test_the_entropy_bonus_lowers_the_loss_by_its_coefficient_and_entropy_is_always_logged():
    b = _batch([1.0, 0.0], [0, 0], [[1, 1], [1, 0]])
    b.advantages = torch.tensor([[1.0, 1.0], [-1.0, 0.0]])
    b.sampler_logprobs = torch.full((2, 2), -1.0)
    logprobs = torch.full((2, 2), -1.0, requires_grad=True)  # ratio 1: per-token loss = -A
    entropy = torch.tensor([[0.3, 0.6], [0.9, 50.0]])  # the pad's entropy never counts
    plain, m0 = make_loss_fn(AlgoConfig(), b.mask.sum(), 2, 2)(b, logprobs, entropy)
    assert plain.item() == pytest.approx(-1.0 / 3, rel=1e-6)  # coef 0: no bonus
    assert m0["actor/entropy"].item() == pytest.approx(0.6, rel=1e-6)  # (0.3 + 0.6 + 0.9) / 3
    bonus, m1 = make_loss_fn(AlgoConfig(entropy_coef=0.5), b.mask.sum(), 2, 2)(b, logprobs, entropy)
    assert bonus.item() == pytest.approx(-1.0 / 3 - 0.5 * 0.6, rel=1e-6)
    assert m1["loss/total"].item() == pytest.approx(bonus.item()) and m1[
        "loss/policy"
    ].item() == pytest.approx(-1 / 3)
    _, m2 = make_loss_fn(AlgoConfig(entropy_coef=0.5), b.mask.sum(), 2, 2)(b, logprobs, None)
    assert "actor/entropy" not in m2  # not computed (no entropy from the forward): nothing to log


def test_the_logprob_gap_of_no_trained_tokens_or_no_sampler_is_not_logged():
    from reasonrl.trainer.step import logprob_gap

    old = torch.zeros(2, 2)
    assert logprob_gap(None, old, torch.ones(2, 2, dtype=torch.bool)) == {}
    assert logprob_gap(torch.ones(2, 2), old, torch.zeros(2, 2, dtype=torch.bool)) == {}
    gap = logprob_gap(
        torch.tensor([[0.5, -2.0], [9.0, 0.0]]), old, torch.tensor([[1, 1], [0, 1]], dtype=torch.bool)
    )
    assert gap["rollout/logprob_gap_mean"].item() == pytest.approx(
        2.5 / 3
    )  # |0.5| + |-2| + |0|, the pad 9 out
    assert gap["rollout/logprob_gap_max"].item() == 2.0


def test_each_estimator_declares_what_the_loop_must_supply():
    from reasonrl.trainer.step import estimator_needs

    assert "values" in estimator_needs(AlgoConfig(adv_estimator="gae"))
    assert "baseline_rewards" in estimator_needs(AlgoConfig(adv_estimator="remax"))
    assert not {"values", "baseline_rewards"} & estimator_needs(AlgoConfig(adv_estimator="grpo"))


# ---------------------------------------------------------------- early stop


class _FakeEngine:
    def __init__(self, current):
        self.current, self.calls = current, 0

    def logprobs(self, batch, micro_batch):
        self.calls += 1
        return self.current


EARLY = [
    # (log ratio per token, max_ratio, max_kl, stop)
    (0.0, 5.0, None, False),
    (math.log(2.0), 1.5, None, True),  # ratio 2 > 1.5
    (math.log(2.0), 2.5, None, False),
    (math.log(2.0), None, 0.5, False),  # k3 = 2 - 1 - ln 2 = 0.307 < 0.5
    (math.log(2.0), None, 0.3, True),
    (-math.log(2.0), 0.9, None, False),  # ratio 0.5 is below, not above
]


@pytest.mark.parametrize("log_ratio,max_ratio,max_kl,stop", EARLY)
def test_early_stop_thresholds(log_ratio, max_ratio, max_kl, stop):
    b = _batch([1.0], [0], [[1, 1, 0]])
    b.old_logprobs = torch.tensor([[-1.0, -2.0, 0.0]])
    current = b.old_logprobs + torch.tensor([[log_ratio, log_ratio, 50.0]])  # pad never counts
    engine = _FakeEngine(current)
    algo = AlgoConfig(off_policy=OffPolicyConfig(early_stop_ratio=max_ratio, early_stop_kl=max_kl))
    assert early_stop(engine, b, algo, 4) is stop


def test_early_stop_off_costs_no_forward():
    b = _batch([1.0], [0], [[1]])
    b.old_logprobs = torch.zeros(1, 1)
    engine = _FakeEngine(torch.full((1, 1), 10.0))
    assert early_stop(engine, b, AlgoConfig(), 4) is False
    b.old_logprobs = None
    assert early_stop(engine, b, AlgoConfig(off_policy=OffPolicyConfig(early_stop_ratio=1e-9)), 4) is False
    assert engine.calls == 0


# ---------------------------------------------------------------- critic


@pytest.fixture
def critic_and_batch(tiny_model_and_tokenizer):
    from transformers import AutoModelForTokenClassification

    model, _ = tiny_model_and_tokenizer
    config = copy.deepcopy(model.config)
    config.num_labels, config.classifier_dropout = 1, 0.0
    torch.manual_seed(0)
    head = AutoModelForTokenClassification.from_config(config)
    head.model.load_state_dict(model.model.state_dict())
    critic = Critic(head, lr=1.0, grad_clip=1e9)
    critic.engine.optimizer = torch.optim.SGD(head.parameters(), lr=1.0)  # params move by exactly -grad
    groups = [_group("a", [1.0, 0.0], lengths=[3, 1]), _group("b", [0.0, 1.0], lengths=[2, 3])]
    batch = build_batch(groups, pad_id=0)
    batch.returns = torch.where(batch.mask, torch.tensor([[1.0], [0.0], [0.0], [1.0]]), 0.0)
    return critic, batch


def test_critic_values_align_with_logprob_positions(critic_and_batch):
    critic, batch = critic_and_batch
    values = critic.values(batch, micro_batch=3)
    assert values.shape == batch.mask.shape
    pos = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        out = critic.model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=pos
        ).logits
    P = batch.prompt_len
    torch.testing.assert_close(values[:, 0], out[:, P - 1, 0])  # V(s_0): the last prompt position
    torch.testing.assert_close(values[:, 1], out[:, P, 0])


def _step(critic, batch, micro, clip):
    batch.values = critic.values(batch, micro)
    before = {k: v.clone() for k, v in critic.model.named_parameters()}
    metrics = critic.train_step(batch, micro, clip)
    return metrics, {k: before[k] - v.detach() for k, v in critic.model.named_parameters()}


def test_critic_step_is_micro_batch_invariant_and_lowers_the_value_loss(critic_and_batch):
    critic, batch = critic_and_batch
    state = copy.deepcopy(critic.model.state_dict())
    m_whole, g_whole = _step(critic, batch, 4, None)
    critic.model.load_state_dict(state)
    m_split, g_split = _step(critic, batch, 3, None)  # uneven micro-batches: 3 + 1 rows
    assert m_split["loss/value"].item() == pytest.approx(m_whole["loss/value"].item(), rel=1e-5)
    for k in g_whole:
        torch.testing.assert_close(g_split[k], g_whole[k], rtol=1e-5, atol=1e-7)
    assert g_whole["score.weight"].abs().sum() > 0  # the value head learns
    critic.engine.optimizer = torch.optim.SGD(critic.model.parameters(), lr=0.05)
    losses = [_step(critic, batch, 4, None)[0]["loss/value"].item() for _ in range(5)]
    assert losses[-1] < losses[0]


def test_critic_value_clip_freezes_values_outside_the_clip_range(critic_and_batch):
    critic, batch = critic_and_batch
    batch.values = critic.values(batch, 4)
    # pretend the rollout-time values were far away: every clipped term V_old + clip(V - V_old) - R
    # is larger and constant in V, so the loss has no gradient
    real = batch.values
    batch.values = real + 10.0
    before = {k: v.clone() for k, v in critic.model.named_parameters()}
    metrics = critic.train_step(batch, 4, 0.2)
    assert metrics["critic/vf_clipfrac"].item() == pytest.approx(1.0)
    assert all(torch.equal(before[k], v) for k, v in critic.model.named_parameters())


# ---------------------------------------------------------------- config of the new algo fields

BAD_ALGO = [
    (["algo.kl.in_reward=true"], "algo.kl.coef > 0"),
    (
        ["algo.policy_loss=vespo", "algo.off_policy.tis_cap=2", "algo.off_policy.tis_mode=sequence_truncate"],
        "vespo folds the sampler's token weights",
    ),
    (["algo.shaping.reward_map=[5,-5]"], "algo.shaping.reward_map"),
    (["algo.shaping.reward_map=[1,2,3]"], "algo.shaping.reward_map"),
    (["algo.shaping.overlong_buffer=100", "rollout.max_new_tokens=64"], "algo.shaping.overlong_buffer=100"),
    (["algo.shaping.overlong_buffer=-1"], "algo.shaping.overlong_buffer"),
    (["algo.dynamic_sampling.max_rounds=-1"], "algo.dynamic_sampling.max_rounds"),
    (["algo.off_policy.early_stop_ratio=0"], "algo.off_policy.early_stop_ratio"),
    (["algo.off_policy.early_stop_kl=-1"], "algo.off_policy.early_stop_kl"),
    (["algo.off_policy.tis_cap=-2"], "algo.off_policy.tis_cap"),
    (["algo.critic.value_clip=0"], "algo.critic.value_clip"),
    (["algo.critic.model=x"], "algo.critic.model"),
    (["algo.adv_estimator=gae", "algo.adv_kwargs.values=1"], "algo.adv_kwargs.values"),
    (["algo.adv_estimator=remax", "algo.adv_kwargs.baseline_rewards=1"], "algo.adv_kwargs.baseline_rewards"),
]


@pytest.mark.parametrize("overrides,needle", BAD_ALGO, ids=[" ".join(o) for o, _ in BAD_ALGO])
def test_bad_algo_fields_name_the_key(overrides, needle):
    from reasonrl.config import ConfigError, load_config

    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert needle in str(e.value)


def test_new_algo_fields_default_off():
    from reasonrl.config import load_config

    a = load_config(None, ["algo.off_policy.early_stop_ratio=5", "algo.critic.value_clip=null"]).algo
    assert (
        a.kl.in_reward,
        a.shaping.reward_map,
        a.shaping.overlong_buffer,
        a.shaping.mask_truncated,
        a.dynamic_sampling.enabled,
    ) == (
        False,
        [],
        0,
        False,
        False,
    )
    assert (
        a.off_policy.early_stop_ratio,
        a.off_policy.early_stop_kl,
        a.off_policy.tis_cap,
        a.critic.value_clip,
    ) == (5.0, None, 0.0, None)
