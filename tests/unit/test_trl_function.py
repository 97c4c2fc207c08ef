"""TRL reward functions used as they are (`rewards.verifiers.trl_function`): called TRL's way (keywords,
lists, the row's columns) in the verifier workers, summed with their weights as TRL sums them (None: does
not apply), TRL's own functions giving here what they give in TRL, each function's scores and logged values
in the metrics, and every mistake named before any work or counted as a verifier error."""

from __future__ import annotations

import json
import textwrap

import pytest

from reasonrl.errors import InputError
from reasonrl.rewards.routing import check_routable, with_verifier
from reasonrl.rewards.runner import RewardRunner
from reasonrl.trainer.rollouts import function_metrics
from reasonrl.types import Problem, RewardResult

# the shapes of TRL's documentation and open-r1's rewards: conversational completions, a dataset column
# (`solution`), None for rows a function does not apply to, log_metric, an async function, token ids
REWARDS = textwrap.dedent(
    """
    import asyncio, re

    def format_reward(completions, **kwargs):
        pattern = r"^<think>.*?</think>\\s*<answer>.*?</answer>$"
        return [1.0 if re.match(pattern, c[0]["content"], re.DOTALL) else 0.0 for c in completions]

    def exact(prompts, completions, solution, log_metric=None, **kwargs):
        assert prompts[0][-1]["role"] == "user" and completions[0][0]["role"] == "assistant"
        out = []
        for c, s, kind in zip(completions, solution, kwargs["kind"]):
            m = re.search(r"<answer>(.*?)</answer>", c[0]["content"])
            out.append(None if kind != "math" else float(bool(m) and m.group(1).strip() == s))
            log_metric("answered", float(bool(m)))
        return out

    async def short(completions, completion_ids, **kwargs):
        await asyncio.sleep(0)
        return [1.0 if len(ids) <= 4 else 0.0 for ids in completion_ids]

    def plain(prompts, completions, **kwargs):
        assert isinstance(prompts[0], str) and isinstance(completions[0], str)
        return [float(completions[0].startswith(prompts[0][:3]))]

    def numpy_out(completions, **kwargs):
        import numpy
        return numpy.array([0.5 for _ in completions])

    def two(completions, **kwargs):
        return [1.0, 1.0]

    def text(completions, **kwargs):
        return ["yes"]

    def nan(completions, **kwargs):
        return [float("nan")]

    def boom(completions, **kwargs):
        raise RuntimeError("the function failed")

    def hang(completions, **kwargs):
        import time
        time.sleep(60)

    def no_completions(prompts):
        return [1.0]

    def progress(completions, trainer_state, **kwargs):
        return [None if trainer_state is None else trainer_state.global_step / trainer_state.max_steps]

    def needs_answer(completions, answer, **kwargs):
        return [float(completions[0][0]["content"] == answer[0])]
    """
)


@pytest.fixture
def rewards_module(user_module):
    return user_module(REWARDS, "my_rewards")


def _row(solution="4", kind="math", **extra):
    return Problem(
        [{"role": "user", "content": "What is 2+2?"}], solution, "mine", "", {"kind": kind, **extra}
    )


def _score(options, responses, problems, **runner):
    with RewardRunner(workers=1, options={"trl_function": options}, **runner) as r:
        return r.score(responses, with_verifier(problems, "trl_function"))


def test_functions_are_called_trls_way_and_summed_with_their_weights(rewards_module):
    m = rewards_module
    options = {
        "functions": [f"{m}.format_reward", f"{m}.exact"],
        "weights": [0.5, 2.0],
        "correctness": "exact",
    }
    responses = ["<think>x</think> <answer>4</answer>", "<answer>4</answer>", "<think>y</think><answer>5</answer>",
                 "<think>x</think> <answer>4</answer>"]  # fmt: skip
    problems = [_row(), _row(), _row(), _row(kind="code")]
    results, health = _score(options, responses, problems)
    assert [r.score for r in results] == [2.5, 2.0, 0.5, 0.5]  # 0.5 * format + 2 * exact
    assert [r.info["functions"] for r in results] == [
        {"format_reward": 1.0, "exact": 1.0},
        {"format_reward": 0.0, "exact": 1.0},
        {"format_reward": 1.0, "exact": 0.0},
        {"format_reward": 1.0, "exact": None},  # not a math row: `exact` does not apply, left out of the sum
    ]
    assert [r.correctness for r in results] == [1.0, 1.0, 0.0, 0.0]  # `exact` decides correctness
    assert [r.info["function_log"] for r in results] == [{"answered": 1.0}] * 4
    assert health["verifier/error_rate"] == 0.0


def test_without_a_correctness_function_the_clipped_sum_is_correctness_and_none_applying_scores_zero(
    rewards_module,
):
    m = rewards_module
    results, _ = _score({"functions": [f"{m}.exact"]}, ["<answer>4</answer>", "<answer>4</answer>"],
                        [_row(), _row(kind="code")])  # fmt: skip
    assert [(r.score, r.correctness, r.reason) for r in results] == [
        (1.0, 1.0, "correct"),
        (0.0, 0.0, "no_function_applies"),  # TRL's nansum of nothing: 0, not a free reward
    ]


def test_trls_own_functions_give_here_what_they_give_in_trl():
    """TRL's `accuracy_reward` and `think_format_reward` (`trl grpo`'s names) called one row at a time in our
    workers equal TRL's own batched call on the same completions and solutions."""
    from trl.rewards import accuracy_reward, think_format_reward

    responses = [r"<think>a</think>The answer is $\boxed{\frac{1}{2}}$", r"\boxed{0.5}", r"\boxed{3}",
                 "<think>no answer</think>", r"<think>x<think>y</think>\boxed{7}"]  # fmt: skip
    solutions = [r"$\frac{1}{2}$", r"$\frac{1}{2}$", "$4$", "$4$", "$7$"]
    conv = [[{"role": "assistant", "content": t}] for t in responses]
    want_acc = accuracy_reward(conv, solution=solutions)
    want_fmt = think_format_reward(conv)
    assert len(set(want_acc)) > 1 and len(set(want_fmt)) > 1  # the cases tell right from wrong
    options = {"functions": ["accuracy_reward", "think_format_reward"], "weights": [1.0, 0.1]}
    results, _ = _score(options, responses, [_row(s) for s in solutions])
    assert [r.info["functions"]["accuracy_reward"] for r in results] == want_acc
    assert [r.info["functions"]["think_format_reward"] for r in results] == want_fmt
    assert [r.score for r in results] == pytest.approx([a + 0.1 * f for a, f in zip(want_acc, want_fmt)])


def test_standard_format_async_functions_arrays_and_completion_ids(rewards_module, tiny_model_dir_unit):
    m = rewards_module
    results, _ = _score(
        {"functions": [f"{m}.plain"], "format": "standard"}, ["What next", "no"], [_row(), _row()]
    )
    assert [r.score for r in results] == [1.0, 0.0]  # the prompt's text and the completion's text
    results, _ = _score({"functions": [f"{m}.numpy_out"]}, ["a"], [_row()])
    assert results[0].score == 0.5
    options = {"functions": [f"{m}.short"], "tokenizer": tiny_model_dir_unit}
    results, _ = _score(options, ["1", "1 + 2 + 3 + 4 + 5 = 15"], [_row(), _row()])
    assert [r.score for r in results] == [1.0, 0.0]  # token counts from the policy's tokenizer


@pytest.fixture(scope="module")
def tiny_model_dir_unit(tmp_path_factory):
    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import build_tokenizer, corpus

    tok = build_tokenizer(corpus(generate("arithmetic", 100, seed=0, difficulty=2, split="train")), 64)
    out = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(out)
    return str(out)


def test_a_file_path_works_as_an_import_path_does(tmp_path):
    path = tmp_path / "rewards.py"
    path.write_text(REWARDS)
    results, _ = _score(
        {"functions": [f"{path}:format_reward"]}, ["<think>a</think><answer>1</answer>"], [_row()]
    )
    assert results[0].score == 1.0 and results[0].info["functions"] == {"format_reward": 1.0}


@pytest.mark.parametrize(
    "name, reason",
    [
        ("two", "returned 2 rewards for one completion"),
        ("text", "returned 'yes', not a finite number"),
        ("nan", "returned nan, not a finite number"),
        ("boom", "RuntimeError: the function failed"),
    ],
)
def test_a_function_that_returns_what_trl_could_not_read_or_raises_is_a_verifier_error(
    rewards_module, name, reason
):
    """The adversary's way to a reward it did not earn: a completion that breaks the function. It scores 0
    and counts as an error, never as the other functions' sum alone."""
    m = rewards_module
    results, health = _score({"functions": [f"{m}.format_reward", f"{m}.{name}"]},
                             ["<think>a</think><answer>1</answer>"], [_row()])  # fmt: skip
    assert results[0].score == 0.0 and reason in results[0].reason
    assert health["verifier/error_rate"] == 1.0


def test_a_function_that_hangs_is_killed_at_the_time_limit(rewards_module):
    results, health = _score({"functions": [f"{rewards_module}.hang"]}, ["a"], [_row()], timeout_s=1.0)
    assert results[0].score == 0.0 and results[0].reason == "timeout"
    assert health["verifier/timeout_rate"] == 1.0


@pytest.mark.parametrize(
    "options, message",
    [
        ({"functions": []}, "must be a non-empty list"),
        ({"functions": ["nothing"]}, "neither an import path"),
        ({"functions": ["no_such_module_here.f"]}, "importing no_such_module_here failed"),
        ({"functions": ["{m}.missing"]}, "defines no function 'missing'"),
        ({"functions": ["{m}.exact"], "weights": [1.0, 2.0]}, "one number per function (1)"),
        ({"functions": ["{m}.exact"], "correctness": "format_reward"}, "is not one of the functions"),
        ({"functions": ["{m}.exact"], "format": "chatml"}, "must be one of"),
        ({"functions": ["{m}.exact", "other.exact"]}, "names two functions alike"),
        ({"functions": ["{m}.short"]}, "needs completion_ids: set reward.options.trl_function.tokenizer"),
        ({"functions": ["{m}.no_completions"]}, "takes no 'completions'"),
        ({"functions": ["/no/such/file.py:f"]}, "no such file"),
    ],
)
def test_what_cannot_work_is_named_when_the_runner_is_built(rewards_module, options, message):
    options = {
        k: [x.format(m=rewards_module) for x in v] if k == "functions" else v for k, v in options.items()
    }
    with pytest.raises(ValueError, match="reward options for 'trl_function'") as e:
        RewardRunner(workers=1, options={"trl_function": options})
    assert message in str(e.value)


def test_a_row_without_a_column_a_function_requires_is_named_at_load(rewards_module):
    options = {"trl_function": {"functions": [f"{rewards_module}.needs_answer"]}}
    rows = with_verifier([_row(answer="4"), _row()], "trl_function")
    with pytest.raises(InputError, match=r"train data row 1: trl_function .*needs_answer takes \['answer'\]"):
        check_routable(rows, "train data", options)
    check_routable(rows[:1], "train data", options)  # the column is the row's extra_info key


def test_as_a_term_beside_the_routed_verifier_its_scores_reach_the_result(rewards_module):
    weights = {"correctness": 1.0, "trl_function": 0.5}
    opts = {"trl_function": {"functions": [f"{rewards_module}.format_reward"]}}
    row = Problem([{"role": "user", "content": "2+2"}], "4", "math", "math", {})
    with RewardRunner(workers=1, weights=weights, options=opts) as r:
        results, _ = r.score(["<think>a</think> <answer>$\\boxed{4}$</answer>", "$\\boxed{4}$"], [row, row])
    assert [r.info["terms"] for r in results] == [{"correctness": 1.0, "trl_function": 1.0},
                                                   {"correctness": 1.0, "trl_function": 0.0}]  # fmt: skip
    assert [r.score for r in results] == [1.5, 1.0]
    assert results[0].info["functions"] == {"format_reward": 1.0}  # kept for rollouts.jsonl and the metrics


def test_function_metrics_are_each_functions_mean_over_the_rows_it_applies_to():
    def res(fns, log=None):
        return RewardResult(0.0, {"functions": fns, **({"function_log": log} if log else {})})

    out = function_metrics([res({"a": 1.0, "b": None}, {"seen": 1.0}), res({"a": 0.0, "b": 0.5}),
                            res({"a": 1.0, "b": 1.5}, {"seen": 0.0}), RewardResult(0.0, {"reason": "error"})])  # fmt: skip
    assert out == pytest.approx({
        "reward/function/a/count": 3.0, "reward/function/a/mean": 2 / 3, "reward/function/a/std": 0.57735,
        "reward/function/b/count": 2.0, "reward/function/b/mean": 1.0, "reward/function/b/std": 0.70711,
        "reward/function_log/seen/count": 2.0, "reward/function_log/seen/mean": 0.5,
    }, abs=1e-5)  # fmt: skip
    assert function_metrics([RewardResult(1.0, {"reason": "correct"})]) == {}


def test_trl_data_keeps_its_columns_for_the_functions_and_rows_without_answers_route_to_them(
    rewards_module, tmp_path
):
    """`reasonrl data prepare trl`: TRL's prompt column as messages, the answer column as the ground truth
    (`solution`, else `answer`), every other column in extra_info, where the functions get it back."""
    from reasonrl.data.prepare import convert_files

    src = tmp_path / "grpo.jsonl"
    rows = [{"prompt": "What is 2+2?", "solution": "4", "kind": "math"},
            {"prompt": [{"role": "user", "content": "What is 2+2?"}], "answer": "4", "kind": "code"}]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems, _ = convert_files("trl", [str(src)])
    assert [(p.prompt, p.ground_truth, p.data_source) for p in problems] == [
        ([{"role": "user", "content": "What is 2+2?"}], "4", "math")
    ] * 2
    assert [p.extra_info["kind"] for p in problems] == ["math", "code"]
    results, _ = _score({"functions": [f"{rewards_module}.exact"]}, ["<answer>4</answer>"] * 2, problems)
    assert [r.info["functions"]["exact"] for r in results] == [1.0, None]  # `kind` reached the function
    bare, _ = convert_files("trl", [str(src)], {"answer": "none"})
    assert [(p.ground_truth, p.verifier) for p in bare] == [("", "trl_function")] * 2
    src.write_text(json.dumps({"question": "no prompt column", "solution": "1"}) + "\n")
    with pytest.raises(InputError, match="prompt.*missing"):
        convert_files("trl", [str(src)])
    src.write_text(json.dumps({"prompt": "no answer"}) + "\n")
    with pytest.raises(InputError, match="solution.*missing.*--option answer=none"):
        convert_files("trl", [str(src)])


def test_the_trainers_step_reaches_the_functions_as_trl_state(rewards_module):
    """`trainer_state.global_step` / `max_steps` (TRL's way to schedule a reward): the runner's, set by the
    trainer each step; None outside training (an eval), where such a function does not apply."""
    options = {"trl_function": {"functions": [f"{rewards_module}.progress"]}}
    with RewardRunner(workers=1, options=options) as r:
        row = with_verifier([_row()], "trl_function")
        assert r.score(["a"], row)[0][0].reason == "no_function_applies"
        r.trainer_state = {"global_step": 3, "max_steps": 12}
        assert r.score(["a"], row)[0][0].score == 0.25
    with pytest.raises(ValueError, match="'trainer_state' is the trainer's"):
        RewardRunner(workers=1, options={"trl_function": {**options["trl_function"], "trainer_state": {}}})


def test_the_ground_truth_is_the_solution_a_function_gets_over_a_worked_solution_in_the_row(rewards_module):
    """The built-in tasks keep a worked solution in extra_info.solution; a TRL accuracy function reads
    `solution` as the answer, so the ground truth is given there (label_key names another keyword)."""
    row = _row("4")
    row.extra_info["solution"] = "2+2=4 <answer>4</answer>"
    results, _ = _score({"functions": [f"{rewards_module}.exact"]}, ["<answer>4</answer>"], [row])
    assert results[0].score == 1.0
    results, _ = _score(
        {"functions": [f"{rewards_module}.exact"], "label_key": "gold"}, ["<answer>4</answer>"], [row]
    )
    assert results[0].score == 0.0  # `solution` is then the row's own (the worked text)
