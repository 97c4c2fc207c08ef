"""gdpo in the trainer: each reward term's raw score per row (from the runner's info["terms"], or the one
correctness term as reward / weight), the overlong penalty as a term of its own, and compute_advantages
handing both to the estimator."""

from __future__ import annotations

import pytest
import torch
from test_trainer_step import _batch, _group

from reasonrl.algorithms import ADVANTAGES
from reasonrl.config import AlgoConfig, ShapingConfig
from reasonrl.trainer.batching import build_batch, term_scores
from reasonrl.trainer.shaping import shape_batch
from reasonrl.trainer.step import compute_advantages
from reasonrl.types import RewardResult


def test_term_scores_read_each_term_in_the_weights_order():
    g = _group("a", [1.2, 0.2])
    g.results = [RewardResult(1.2, {"terms": {"correctness": 1.0, "format_think_answer": 1.0}}),
                 RewardResult(0.2, {"terms": {"correctness": 0.0, "format_think_answer": 1.0}})]  # fmt: skip
    terms, weights = term_scores([g], {"format_think_answer": 0.2, "correctness": 1.0})
    assert terms.tolist() == [[1.0, 1.0], [1.0, 0.0]] and weights == (0.2, 1.0)
    one = _group("b", [2.0, 0.0])  # correctness alone, weight 2: the runner records no terms
    one.results = [
        RewardResult(2.0, {"verifier": "arithmetic"}),
        RewardResult(0.0, {"verifier": "arithmetic"}),
    ]
    terms, weights = term_scores([one], {"correctness": 2.0})
    assert terms.tolist() == [[1.0], [0.0]] and weights == (2.0,)


def test_the_overlong_penalty_becomes_a_term_of_its_own():
    g = _group("a", [1.0, 0.0], lengths=[4, 10])
    batch = build_batch([g], pad_id=0)
    batch.term_rewards, batch.term_weights = torch.tensor([[1.0], [0.0]]), (1.0,)
    algo = AlgoConfig(adv_estimator="gdpo", shaping=ShapingConfig(overlong_buffer=4, overlong_penalty=1.0))
    shape_batch(batch, algo, max_len=10)
    # length 10 of 10 with a buffer of 4: the full penalty -1; length 4: none
    assert batch.term_rewards.tolist() == [[1.0, 0.0], [0.0, -1.0]] and batch.term_weights == (1.0, 1.0)
    plain = build_batch([g], pad_id=0)  # without per-term rewards nothing is appended
    shape_batch(plain, algo, max_len=10)
    assert plain.term_rewards is None


def test_compute_advantages_hands_the_terms_to_gdpo():
    b = _batch([1.0, 0.5, 0.5, 1.5], [0, 0, 1, 1], [[1, 1], [1, 0], [1, 1], [1, 1]])
    b.term_rewards, b.term_weights = (
        torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0]]),
        (1.0, 0.5),
    )
    compute_advantages(b, AlgoConfig(adv_estimator="gdpo"))
    want = ADVANTAGES.get("gdpo")(
        b.rewards, b.group_ids, term_rewards=b.term_rewards, term_weights=(1.0, 0.5)
    )
    assert torch.allclose(b.advantages[:, 0], want) and b.advantages[1, 1] == 0.0  # off-mask stays 0
    b.term_rewards = None
    with pytest.raises(ValueError, match="gdpo needs term_rewards"):
        compute_advantages(b, AlgoConfig(adv_estimator="gdpo"))


def test_trl_functions_are_terms_of_their_own_and_one_that_gives_none_is_left_out():
    """TRL's normalize_then_sum normalises each reward function on its own: the `trl_function` term becomes a
    column per function (its weight x the function's), NaN where the function gave None; gdpo leaves such rows
    out of that function's group mean and std and gives them 0 there, as TRL's nanmean / nanstd do."""
    from reasonrl.rewards.verifiers.trl_function import TERM, function_weights

    options = {"functions": ["my_rewards.accuracy", "rewards/len.py:brevity", "think_format_reward"],
               "weights": [1.0, 100.0, 0.5]}  # fmt: skip
    parts = {TERM: function_weights(options)}
    assert parts[TERM] == {"accuracy": 1.0, "brevity": 100.0, "think_format_reward": 0.5}
    assert function_weights({"functions": ["a.one"]}) == {}  # one function: the term is it
    g = _group("a", [0.0, 0.0, 0.0])
    scores = [(1.0, 0.1, 1.0), (0.0, 0.2, None), (1.0, 0.3, 0.0)]
    g.results = [RewardResult(0.0, {"terms": {"correctness": c, TERM: 0.0},
                                    "functions": {"accuracy": a, "brevity": b, "think_format_reward": t}})
                 for c, (a, b, t) in zip((1.0, 0.0, 1.0), scores)]  # fmt: skip
    terms, weights = term_scores([g], {"correctness": 0.0, TERM: 2.0}, parts)
    assert weights == (0.0, 2.0, 200.0, 1.0)
    want = [[1.0, 1.0, 0.1, 1.0], [0.0, 0.0, 0.2, float("nan")], [1.0, 1.0, 0.3, 0.0]]
    assert torch.allclose(terms, torch.tensor(want), equal_nan=True)
    # by hand: accuracy [1, 0, 1] -> z = [1/sqrt(3), -2/sqrt(3), 1/sqrt(3)] (unbiased std 0.577); brevity
    # [.1, .2, .3] -> [-1, 0, 1] (std 0.1); think [1, -, 0] over its two rows -> [0.7071, 0, -0.7071]
    gdpo = ADVANTAGES.get("gdpo")
    ids = torch.zeros(3, dtype=torch.long)
    a = gdpo(torch.zeros(3), ids, term_rewards=terms, term_weights=weights, eps=0.0)
    r3 = 3**0.5
    summed = torch.tensor([2 / r3 - 200 + 0.7071068, -4 / r3, 2 / r3 + 200 - 0.7071068])
    assert torch.allclose(a, (summed - summed.mean()) / summed.std(), atol=1e-5)
    # brevity's weight 100 does not swamp accuracy in its own column: accuracy alone orders rows 0 / 2 above 1
    only = gdpo(torch.zeros(3), ids, term_rewards=terms[:, 1:2], term_weights=(1.0,))
    assert only[0] == only[2] > 0 > only[1]
    none = gdpo(torch.zeros(3), ids, term_rewards=torch.tensor([[float("nan")], [1.0], [float("nan")]]),
                term_weights=(1.0,))  # fmt: skip
    assert none.tolist() == [0.0, 0.0, 0.0]  # one value in the group: nothing to compare it with


def test_gdpo_with_functions_that_give_none_is_trls_normalize_then_sum():
    """TRL's own statistics (`trl.trainer.utils.nanstd`, torch.nanmean) over the same rewards per function,
    aggregated as its GRPOTrainer's normalize_then_sum does (its eps 1e-4), equal gdpo's advantages; rows every
    function left unscored get 0 in both."""
    nanstd = pytest.importorskip("trl.trainer.utils").nanstd
    gen = torch.Generator().manual_seed(0)
    r = torch.rand(8, 3, generator=gen)
    r[torch.rand(8, 3, generator=gen) < 0.3] = float("nan")
    r[5] = float("nan")  # unscorable
    weights = (1.0, 0.5, 2.0)
    grouped = r.view(2, 4, 3)
    per = (grouped - torch.nanmean(grouped, dim=1, keepdim=True)) / (
        nanstd(grouped, dim=1, keepdim=True) + 1e-4
    )
    summed = (per.view(8, 3) * torch.tensor(weights)).nansum(dim=1)
    summed[torch.isnan(r).all(dim=1)] = float("nan")  # (TRL's unscorable rows: rows 3 and 5 here)
    theirs = torch.nan_to_num((summed - torch.nanmean(summed)) / (nanstd(summed) + 1e-4), nan=0.0)
    ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    ours = ADVANTAGES.get("gdpo")(torch.zeros(8), ids, term_rewards=r, term_weights=weights, eps=1e-4)
    assert torch.allclose(ours, theirs, atol=1e-5) and ours[3] == ours[5] == 0.0 and ours[0] != 0.0
