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
