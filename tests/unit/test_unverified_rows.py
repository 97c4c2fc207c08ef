"""Rows with no checkable answer (verifier "none": chat turns, code traces without tests): the `sft`
converter writes them with `answer=none`; only a caller that trains on responses alone (SFT) lets them
through the load-time routing check; everywhere else they are refused naming the row, and scoring one
anyway never rewards anything (an empty ground truth must not let every answer score)."""

from __future__ import annotations

import pytest
from _prepare import convert_or_error

from reasonrl.errors import InputError
from reasonrl.rewards import VERIFIERS, check_routable, score
from reasonrl.rewards.health import failed_share
from reasonrl.rewards.routing import with_verifier
from reasonrl.types import Problem

CHAT = {"messages": [{"role": "user", "content": "Write a haiku about rain."},
                     {"role": "assistant", "content": "Soft rain on the roof"}]}  # fmt: skip


def _checked(ground_truth="7", verifier=None):
    return Problem([{"role": "user", "content": "3+4?"}], ground_truth, "reasonrl/arithmetic", "math",
                   {}, uid="c", verifier=verifier)  # fmt: skip


def test_the_converter_writes_rows_with_no_checkable_answer_when_asked(tmp_path):
    (p,) = convert_or_error(tmp_path, "sft", [CHAT], {"answer": "none"})
    assert (p.verifier, p.ground_truth, p.extra_info["response"]) == ("none", "", "Soft rain on the roof")
    out = convert_or_error(tmp_path, "sft", [CHAT])  # without the option: the missing answer is named
    assert "field 'answer': missing" in out and "--option answer=none" in out


def test_routing_refuses_them_unless_the_caller_trains_on_responses_alone(tmp_path):
    (p,) = convert_or_error(tmp_path, "sft", [CHAT], {"answer": "none"})
    with pytest.raises(
        InputError, match=r"^eval data row 1: the row has no checkable answer \(verifier 'none'\)"
    ):
        check_routable([_checked(), p], "eval data")
    check_routable([_checked(), p], "train data", unverified=True)  # SFT: passes
    # the rows it lets through are those routed to "none", not any row that fails its checks
    bad = _checked(ground_truth="not a number")
    with pytest.raises(InputError, match="train data row 1"):
        check_routable([p, bad], "train data", unverified=True)
    # reward.verifier=none routes a whole recipe's rows there (a row naming its own verifier keeps it)
    routed = with_verifier([_checked(), _checked(verifier="math")], "none")
    assert [r.verifier for r in routed] == ["none", "math"]
    with pytest.raises(InputError, match="row 0: the row has no checkable answer"):
        check_routable(routed, "train data")


@pytest.mark.parametrize("response", ["", "Soft rain on the roof", "\\boxed{}", "<answer></answer>", "7"])
def test_scoring_one_anyway_is_a_verifier_error_never_a_reward(tmp_path, response):
    (p,) = convert_or_error(tmp_path, "sft", [CHAT], {"answer": "none"})
    r = score(response, p)  # even its own reference response, or an empty answer against the empty truth
    assert r.score == 0.0 and r.info["reason"].startswith("error: the row has no checkable answer")
    assert failed_share([r.info["reason"]]) == 1.0  # counted as a verifier failure, not a wrong answer
    assert VERIFIERS.get("none") is not None
