"""Evaluation counts correctness, not the training reward: with `reward.weights` adding shaping terms
(here a format bonus and an overlong term), held-out accuracy (`eval.accuracy.evaluate`) and in-training
benchmark validation (`eval.runner.benchmark_metrics`) report the share solved. Before, both averaged
the weighted reward: an "accuracy" of 1.25 for 2 of 4 solved, and pass@k / maj@n on shaped scores."""

from __future__ import annotations

import pytest

from reasonrl.eval.accuracy import evaluate
from reasonrl.rewards.runner import RewardRunner
from reasonrl.types import Completion, Problem

# answers to "12": right and well formed, right without think tags, wrong but well formed, wrong
TEXTS = ["<think>7+5</think><answer>12</answer>", "<answer>12</answer>",
         "<think>7+4</think><answer>11</answer>", "<answer>13</answer>"]  # fmt: skip


class _Engine:
    """Every prompt gets the same four completions (n = 4)."""

    def generate(self, prompt_ids, params):
        return [[Completion([1, 2], t, [0.0, 0.0]) for t in TEXTS] for _ in prompt_ids]


def _problems(k: int) -> list[Problem]:
    return [Problem(prompt=[{"role": "user", "content": f"7 + 5? ({i})"}], ground_truth="12",
                    data_source="reasonrl/arithmetic", uid=f"p{i}") for i in range(k)]  # fmt: skip


@pytest.fixture
def weighted():
    with RewardRunner(workers=1, timeout_s=10, weights={"correctness": 1.0, "format_think_answer": 0.5}) as r:
        yield r


def test_held_out_accuracy_is_the_share_solved(tiny_model_and_tokenizer, weighted):
    from reasonrl.rollout.base import SamplingParams

    tok = tiny_model_and_tokenizer[1]
    acc, per_problem, _ = evaluate(_Engine(), tok, _problems(3), SamplingParams(n=4), scorer=weighted)
    assert acc == 0.5  # the weighted reward's mean is (1.5 + 1 + 0.5 + 0) / 4 = 0.75
    assert per_problem[0] == (TEXTS, [1.0, 1.0, 0.0, 0.0])


def test_in_training_benchmark_validation_reports_correctness(tiny_model_and_tokenizer, weighted):
    from reasonrl.eval.benchmarks import BENCHMARKS
    from reasonrl.eval.runner import benchmark_metrics

    bench = BENCHMARKS.get("gsm8k")
    m = benchmark_metrics(_Engine(), tiny_model_and_tokenizer[1], weighted, [(bench, _problems(2))], 8, 0)
    n = next(k.split("@")[1] for k in m if k.startswith("eval/gsm8k/maj@"))
    assert (
        m["eval/gsm8k/mean@n"] == 0.5
        and m[f"eval/gsm8k/best@{n}"] == 1.0
        and m[f"eval/gsm8k/worst@{n}"] == 0.0
    )
    assert m["eval/gsm8k/pass@1"] == 0.5


@pytest.fixture
def fails_on_p1(monkeypatch):
    """The arithmetic verifier raises on problem p1 (its service refuses), scores the others."""
    from reasonrl.rewards.base import VERIFIERS

    real = VERIFIERS.get("arithmetic")

    def flaky(response, problem):
        if problem.uid == "p1":
            raise ConnectionError("judge refused")
        return real(response, problem)

    monkeypatch.setattr(VERIFIERS, "_entries", {**VERIFIERS._entries, "arithmetic": flaky})


def test_validation_says_which_samples_the_verifier_never_measured(
    tiny_model_and_tokenizer, weighted, fails_on_p1
):
    """Samples whose verifier call failed count as wrong (the accuracy is a lower bound); the reasons come
    back, their share is `eval/verifier_errors`, and the warning names how many and the error."""
    from reasonrl.eval.runner import benchmark_metrics
    from reasonrl.rewards.health import failed_share, failure_warning
    from reasonrl.rollout.base import SamplingParams

    tok = tiny_model_and_tokenizer[1]
    ev = evaluate(_Engine(), tok, _problems(3), SamplingParams(n=4), scorer=weighted)
    assert ev.accuracy == 1 / 3  # p0 and p2 solve 2 of 4; p1's 4 count as wrong
    assert ev.reasons[4:8] == ["error: ConnectionError: judge refused"] * 4
    assert ev.reasons[:4] == ["correct", "correct", "wrong", "wrong"] == ev.reasons[8:]
    assert failed_share(ev.reasons) == 1 / 3 and failed_share(ev.reasons[:4] + ["timeout"]) == 0.2
    assert failed_share([]) == 0.0 and failed_share([None, "error: x"]) == 0.5
    assert failure_warning("step 4: validation", ev.reasons) == (
        "warning: step 4: validation: the verifier failed on 4 of 12 samples (e.g. 'error: ConnectionError: "
        "judge refused'); they count as wrong"
    )
    assert failure_warning("x", ev.reasons[:4]) is None

    from reasonrl.eval.benchmarks import BENCHMARKS

    logs = []
    m = benchmark_metrics(_Engine(), tok, weighted, [(BENCHMARKS.get("gsm8k"), _problems(2))], 8, 0, log=logs.append,
                          what="step 2: validation")  # fmt: skip
    assert m["eval/gsm8k/verifier_errors"] == 0.5 and m["eval/gsm8k/mean@n"] == 0.25
    n = int(next(k.split("@")[1] for k in m if k.startswith("eval/gsm8k/maj@")))  # the benchmark's own n
    assert logs == [f"warning: step 2: validation (gsm8k): the verifier failed on {n} of {2 * n} samples "
                    "(e.g. 'error: ConnectionError: judge refused'); they count as wrong"]  # fmt: skip
