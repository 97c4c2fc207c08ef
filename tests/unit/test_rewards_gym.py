"""reasoning-gym adapter: entry reconstruction, the task's own scorer, lenient fallback."""

from __future__ import annotations

import json

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers.gym import extract_gym_answer, lenient_match, non_finite, rebuild_entry
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(120)


def P(gt, **extra):
    return Problem(
        prompt=[{"role": "user", "content": "q"}],
        ground_truth=gt,
        data_source="reasoning_gym",
        extra_info=extra,
    )


def score(response, problem, **opts):
    return VERIFIERS.get("reasoning_gym")(response, problem, **opts)


@pytest.mark.parametrize(
    "response, answer",
    [
        ("<answer> 42 </answer>", "42"),
        ("<think>x</think> 42", "42"),
        ("<think>x</think><answer>7</answer>", "7"),
        ("<think><answer>7</answer></think>", None),  # answer only inside the think block
        ("<think>unclosed", None),
        ("", None),
    ],
)
def test_extract(response, answer):
    assert extract_gym_answer(response) == answer


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        ("Hello", "hello", True),
        ("100.5", "100", True),  # within 1%
        ("102", "100", False),
        (r"\text{42}", "42", True),
        ("abc", "42", False),
        ("42 or 43", "42", False),
        # non-finite numbers: a tolerance times inf used to admit every gold
        ("inf", "100", False),
        ("-inf", "-3", False),
        ("1e999", "100", False),
        ("1" * 400, "7", False),
        ("Infinity", "inf", True),
        ("1", "inf", False),  # a finite answer to an infinite gold
        ("0.5", "0.01", False),  # the absolute tolerance is 0.01
        ("0.02", "0.01", True),  # ... inclusive
        ("$5$", "5", True),  # LaTeX math delimiters
        ("\\(5\\)", "5", True),
    ],
)
def test_lenient_match(pred, gold, expected):
    assert lenient_match(pred, gold) is expected


def test_float_match_defaults_to_one_percent_or_a_hundredth():
    from reasonrl.rewards.verifiers.gym import float_match

    assert float_match("101", "100") is True and float_match("102", "100") is False
    assert float_match("0.02", "0.01") is True and float_match("0.03", "0.01") is False
    assert float_match("x", "1") is False


def test_rebuild_entry_forms():
    task, entry = rebuild_entry(P("5", task="basic_arithmetic", metadata=json.dumps({"expression": "2+3"})))
    assert task == "basic_arithmetic" and entry["answer"] == "5" and entry["metadata"]["expression"] == "2+3"
    task, entry = rebuild_entry(P("x", entry={"answer": "9", "metadata": {"source_dataset": "leg_counting"}}))
    assert task == "leg_counting" and entry["answer"] == "9"
    task, entry = rebuild_entry(P({"task": "leg_counting", "answer": "4"}))
    assert task == "leg_counting" and entry["answer"] == "4"
    assert rebuild_entry(P("3"))[0] is None
    # precedence: extra_info.task, then metadata's source_dataset, then the ground truth's task
    gt = json.dumps({"task": "basic_arithmetic", "answer": "4"})
    assert rebuild_entry(P(gt))[0] == "basic_arithmetic"  # a JSON ground truth is read
    assert rebuild_entry(P(" " + gt))[0] == "basic_arithmetic"
    assert rebuild_entry(P(gt, metadata=json.dumps({"source_dataset": "leg_counting"})))[0] == "leg_counting"
    assert rebuild_entry(P(gt, task="leg_counting"))[0] == "leg_counting"
    # an entry in extra_info wins over a ground-truth mapping; a mapping without an answer is the answer
    assert rebuild_entry(P({"answer": "4"}, entry={"answer": "9"}))[1]["answer"] == "9"
    task, entry = rebuild_entry(P({"foo": 1}))
    assert task is None and entry == {"question": "q", "answer": {"foo": 1}, "metadata": {}}


def test_game_of_life_halting_takes_only_true_or_false():
    from reasonrl.rewards.verifiers.gym import _exact_bool

    assert (
        _exact_bool(" TRUE ", {"answer": "True"}) == 1.0 and _exact_bool("false", {"answer": "False"}) == 1.0
    )
    assert _exact_bool("false", {"answer": "True"}) == 0.0
    assert _exact_bool("yes", {"answer": "yes"}) == 0.0  # only "true" or "false" answers it


def test_fallback_without_task():
    got = score("<answer>HELLO</answer>", P("hello"))
    assert (got.score, got.info["scorer"]) == (1.0, "lenient")
    assert score("<answer>110</answer>", P("100")).score == 0.0
    assert score("<answer>110</answer>", P("100"), rel_tol=0.15).score == 1.0


def test_task_scorer_from_reasoning_gym():
    rg = pytest.importorskip("reasoning_gym", reason="optional dependency reasoning-gym not installed")
    entry = rg.create_dataset("basic_arithmetic", size=1, seed=3)[0]
    problem = P(entry["answer"], task="basic_arithmetic", metadata=entry["metadata"])
    right = score(f"<think>work</think><answer>{entry['answer']}</answer>", problem)
    assert (right.score, right.info["scorer"]) == (1.0, "basic_arithmetic")
    wrong = score("<answer>not a number</answer>", problem)
    assert wrong.score == 0.0
    hidden = score(f"<think><answer>{entry['answer']}</answer></think>", problem)
    assert (hidden.score, hidden.reason) == (0.0, "no_answer")


def test_unknown_task_raises():
    pytest.importorskip("reasoning_gym", reason="optional dependency reasoning-gym not installed")
    with pytest.raises(ValueError, match="not registered"):
        score("<answer>1</answer>", P("1", task="no_such_task"))


@pytest.mark.parametrize(
    "text, expected",
    [("nan", True), ("-inf", True), ("Infinity", True), ("(nan)", True), ("1+nani", True), ("inf+infi", True),
     ("The answer is inf.", True), ("1e999", True), ("1" * 400, True),
     ("banana", False), ("info", False), ("infinite", False), ("nanjing", False), ("1e5", False),
     ("1" * 300, False), ("3.5", False)],
)  # fmt: skip
def test_non_finite(text, expected):
    assert non_finite(text) is expected


def test_non_finite_answers_score_zero_where_the_task_scorer_gives_one():
    rg = pytest.importorskip("reasoning_gym", reason="optional dependency reasoning-gym not installed")
    entries = rg.create_dataset("complex_arithmetic", size=4, seed=1)
    upstream = rg.get_score_answer_fn("complex_arithmetic")
    for entry in entries:
        problem = P(entry["answer"], task="complex_arithmetic", metadata=entry["metadata"])
        assert score(f"<answer>{entry['answer']}</answer>", problem).score == 1.0
        assert score("<answer>7 + 100i</answer>", problem).score < 0.5  # distance-based partial credit
        for hack in ("nan", "NaN", "(nan)", "1+nani", "inf", "1e999"):
            got = score(f"<answer>{hack}</answer>", problem)
            assert (got.score, got.reason) == (0.0, "non_finite"), hack
    # why the guard exists: reasoning-gym 0.1.25's own scorer, min(1, exp(-|nan - gold|)), gives 1
    assert upstream(answer="nan", entry=entries[0]) == 1.0


@pytest.mark.parametrize("task", ["arc_agi", "rearc"])
def test_arc_grids_from_json_rows_score_their_answer(task):
    """Rows store the metadata as JSON (lists): the grids are turned back into the tuples reasoning-gym's
    scorer compares, or the right answer would get its 0.05 partial credit."""
    rg = pytest.importorskip("reasoning_gym", reason="optional dependency reasoning-gym not installed")
    entry = json.loads(json.dumps(rg.create_dataset(task, size=1, seed=1)[0]))
    assert rg.get_score_answer_fn(task)(answer=entry["answer"], entry=entry) == 0.05  # upstream, on lists
    problem = P(entry["answer"], task=task, metadata=entry["metadata"])
    assert score(f"<answer>{entry['answer']}</answer>", problem).score == 1.0


def test_game_of_life_halting_scores_only_the_right_verdict():
    rg = pytest.importorskip("reasoning_gym", reason="optional dependency reasoning-gym not installed")
    entry = rg.create_dataset("game_of_life_halting", size=1, seed=1)[0]
    assert rg.get_score_answer_fn("game_of_life_halting")(answer="maybe", entry=entry) == 1.0  # upstream
    problem = P(entry["answer"], task="game_of_life_halting", metadata=entry["metadata"])
    assert score(f"<answer>{entry['answer']}</answer>", problem).score == 1.0
    assert score("<answer>maybe</answer>", problem).score == 0.0
    other = "True" if entry["answer"] == "False" else "False"
    assert score(f"<answer>{other}</answer>", problem).score == 0.0


def test_a_task_scorer_that_raises_on_the_answer_scores_it_zero(monkeypatch):
    from reasonrl.rewards.verifiers import gym

    def boom(answer, entry):
        raise KeyError("no such cell")

    monkeypatch.setitem(gym.SCORE_OVERRIDES, "boom_task", boom)
    got = score("<answer>1</answer>", P("1", task="boom_task"))
    assert (got.score, got.reason, got.info["error"]) == (0.0, "unparsable", "KeyError: 'no such cell'")


@pytest.mark.parametrize(
    "task_score, score_, reason",
    [
        (1.0, 1.0, "correct"),
        (1.5, 1.0, "correct"),
        (0.4, 0.4, "partial"),
        (0.0, 0.0, "wrong"),
        (-2.0, 0.0, "wrong"),
    ],
)
def test_a_task_score_is_clamped_to_one_and_labelled(monkeypatch, task_score, score_, reason):
    """A task scorer's value outside [0, 1] (a bug there) is clamped; the reason tells full from partial."""
    from reasonrl.rewards.verifiers import gym

    monkeypatch.setitem(gym.SCORE_OVERRIDES, "odd_task", lambda answer, entry: task_score)
    got = score("<answer>1</answer>", P("1", task="odd_task"))
    assert (got.score, got.reason) == (score_, reason)


def test_score_entry_gives_zero_with_its_error(monkeypatch):
    """`score_entry` (also the conformance sweep's) returns 0 with the error, the error cut to 100 characters."""
    from reasonrl.rewards.verifiers import gym

    def boom(answer, entry):
        raise ValueError("x" * 300)

    monkeypatch.setitem(gym.SCORE_OVERRIDES, "boom_task", boom)
    monkeypatch.setitem(gym.SCORE_OVERRIDES, "one_task", lambda answer, entry: 1.0)
    assert gym.score_entry("boom_task", "1", {"answer": "1", "metadata": {}}) == (
        0.0,
        "ValueError: " + "x" * 100,
    )
    got = gym.score_entry("one_task", "nan", {"answer": "1", "metadata": {}})
    assert got[0] == 0.0 and got[1].startswith("non_finite")


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("(Q ∨ Q)", 1.0),  # modus ponens: needs both premises
        ("(P ∧ Q)", 1.0),
        ("Q", 0.25),  # the task's own scorer counts a lone variable as trivial
        ("P", 0.25),  # a premise copied
        ("(P → Q)", 0.25),
        ("(¬P ∨ Q)", 0.25),  # a premise rewritten: equivalent to it
        ("(Q ∨ ¬Q)", 0.25),  # a tautology: the task's own trivial value
        ("¬Q", 0.05),  # invalid: the task's own value
    ],
)
def test_propositional_logic_does_not_reward_restating_a_premise(answer, expected):
    """Any valid conclusion scores 1 with reasoning-gym's scorer, so copying a premise did too."""
    pytest.importorskip("reasoning_gym", reason="optional dependency reasoning-gym not installed")
    entry = {"question": "Given:\n1. P\n.2. (P → Q)\n.What can we conclude from the above statements?",
             "answer": None, "metadata": {"source_dataset": "propositional_logic", "premises": ["P", "(P → Q)"],
                                          "variables": ["P", "Q"]}}  # fmt: skip
    assert (
        score(f"<answer>{answer}</answer>", P(None, task="propositional_logic", entry=entry)).score
        == expected
    )
