"""The curriculum's rules (levels from a window of recent accuracy, skipping always / never solved
prompts) and the mixture sampler (weights, determinism, exact resume from its state, pickling for
the rollout worker), without a model."""

from __future__ import annotations

import pickle

import pytest

from reasonrl.data.curriculum import Curriculum, CurriculumConfig, prompt_key
from reasonrl.data.mixture import FileSource, GymSource, MixtureSampler, TaskSource
from reasonrl.data.tasks import generate, is_heldout
from reasonrl.types import Problem, RolloutGroup


def _group(p, rewards):
    return RolloutGroup(p, [], [], rewards=list(rewards))


def test_levels_move_with_the_window_and_stay_in_bounds():
    c = Curriculum(CurriculumConfig(enabled=True, last_k=3, success_threshold=0.7, failure_threshold=0.1))
    c.add_task("t", level=1, lowest=1, highest=3)
    p = Problem([{"role": "user", "content": "q"}], "1", "x", extra_info={"task": "t"})
    for _ in range(2):
        c.observe(p, [1, 1, 1, 0])
    assert c.level("t") == 1  # the window is not full yet
    c.observe(p, [1, 1, 1, 1])  # mean of the window (0.75, 0.75, 1) >= 0.7
    assert c.level("t") == 2 and c.windows["t"] == []
    for _ in range(6):
        c.observe(p, [1, 1])
    assert c.level("t") == 3  # capped at the highest level
    for _ in range(3):
        c.observe(p, [0, 0, 0, 1])  # 0.25 > failure threshold: no move
    assert c.level("t") == 3
    for _ in range(9):
        c.observe(p, [0, 0])
    assert c.level("t") == 1  # down twice, then held at the lowest
    m = c.metrics()
    assert m["curriculum/t/level"] == 1.0 and m["curriculum/t/acc"] == 0.0


def test_level_moves_at_exactly_each_threshold_one_level_at_a_time_and_holds_between():
    cfg = CurriculumConfig(enabled=True, last_k=2, success_threshold=0.75, failure_threshold=0.25)
    c = Curriculum(cfg)
    c.add_task("t", level=5)
    p = Problem([{"role": "user", "content": "q"}], "1", "x", extra_info={"task": "t"})
    c.observe(p, [])  # no rewards: nothing observed
    assert c.windows == {} and c.level("t") == 5
    for rewards in ([1, 0], [1, 1, 0, 0], [0, 1]):  # window means 0.5: between the thresholds
        c.observe(p, rewards)
    assert c.level("t") == 5 and c.windows["t"] == [0.5, 0.5]  # held; the window keeps its last 2
    assert c.metrics() == {"curriculum/t/level": 5.0, "curriculum/t/acc": 0.5}  # no skip counts: rules off
    c.observe(p, [1, 1])  # window (0.5, 1.0): exactly the success threshold
    assert c.level("t") == 6 and c.metrics() == {"curriculum/t/level": 6.0}  # empty window: no acc
    c.observe(p, [0, 0, 0, 0])
    c.observe(p, [1, 0])  # window (0.0, 0.5): exactly the failure threshold
    assert c.level("t") == 5  # one level down
    c.observe(p, [1, 0, 0, 0])
    assert c.metrics()["curriculum/t/acc"] == 0.25
    assert c.record == {} and c.skipped == {}  # skip rules off: no per-prompt record kept


def test_prompts_always_or_never_solved_are_skipped():
    c = Curriculum(CurriculumConfig(enabled=True, skip_solved_after=2, skip_unsolved_after=3))
    easy, hard, mixed = (
        Problem([{"role": "user", "content": t}], "1", "x") for t in ("easy", "hard", "mixed")
    )
    for _ in range(2):
        c.observe(easy, [1, 1, 1])
        c.observe(hard, [0, 0, 0])
        c.observe(mixed, [1, 0, 1])
    assert c.skips(easy) and not c.skips(hard) and not c.skips(mixed)
    c.observe(hard, [0, 0])
    assert c.skips(hard) and c.metrics()["curriculum/skipped_unsolved"] == 1.0
    for _ in range(3):
        c.observe(mixed, [1, 0, 1])
    assert not c.skips(mixed)  # solved sometimes: neither rule
    assert len(c.record[prompt_key(mixed)]) == 3  # the longest rule's groups (3), no more
    one_rule = Curriculum(CurriculumConfig(enabled=True, skip_solved_after=1))
    one_rule.observe(easy, [1])
    assert one_rule.metrics() == {"curriculum/skipped_solved": 1.0, "curriculum/skipped_unsolved": 0.0}
    same_text = Problem([{"role": "user", "content": "easy"}], "2", "x", uid="other")
    assert prompt_key(same_text) == prompt_key(easy) and c.skips(same_text)


def _sampler(curriculum=None):
    files = generate("countdown", 12, seed=0, difficulty=2)
    return MixtureSampler([(FileSource("files", files, 0), 2.0), (TaskSource("arith", "arithmetic", 2, 0), 1.0)],
                          batch_size=6, seed=3, curriculum=curriculum)  # fmt: skip


def test_mixture_draws_by_weight_deterministically_and_resumes_exactly():
    a, b = _sampler(), _sampler()
    batches = [a.next() for _ in range(20)]
    assert [[p.user_text for p in x] for x in batches] == [[p.user_text for p in b.next()] for _ in range(20)]
    drawn = [p.data_source for x in batches for p in x]
    share = drawn.count("reasonrl/countdown") / len(drawn)
    assert 0.55 < share < 0.8  # weight 2 : 1
    assert a.metrics()["data/files/share"] == pytest.approx(share)
    generated = [p for x in batches for p in x if p.data_source == "reasonrl/arithmetic"]
    assert not any(is_heldout(p) for p in generated)  # never from the held-out side
    c = _sampler()
    for _ in range(7):
        c.next()
    state = c.state_dict()
    continued = [[p.user_text for p in c.next()] for _ in range(5)]
    d = pickle.loads(pickle.dumps(_sampler()))  # as the rollout worker receives it
    d.load_state_dict(state)
    assert [[p.user_text for p in d.next()] for _ in range(5)] == continued


def test_curriculum_changes_what_a_task_source_generates():
    assert _sampler(CurriculumConfig()).curriculum is None  # opt-in: off by default
    s = _sampler(CurriculumConfig(enabled=True, last_k=2, failure_threshold=0.1, success_threshold=0.5))
    assert s.curriculum.level("arithmetic") == 2
    for _ in range(40):
        batch = s.next()
        s.observe([_group(p, [1.0] * 4) for p in batch])  # everything solved: levels climb
    assert s.curriculum.level("arithmetic") > 4
    hard = [p for p in s.next() if p.extra_info.get("task") == "arithmetic"]
    assert hard and all(
        p.user_text.count("+") + p.user_text.count("-") + p.user_text.count("*") > 4 for p in hard
    )
    state = pickle.loads(pickle.dumps(s.state_dict()))
    t = _sampler(CurriculumConfig(enabled=True, last_k=2, failure_threshold=0.1, success_threshold=0.5))
    t.load_state_dict(state)
    assert t.curriculum.levels == s.curriculum.levels
    assert [p.user_text for p in t.next()] == [p.user_text for p in s.next()]


def test_gym_source_uses_each_task_level():
    pytest.importorskip("reasoning_gym")
    cfg = CurriculumConfig(enabled=True, last_k=1, success_threshold=0.5, failure_threshold=0.0)
    s = MixtureSampler([(GymSource("gym", "basic_arithmetic:1,leg_counting:1", 0), 1.0)], 8, 0, cfg)
    assert s.curriculum.levels == {"basic_arithmetic": 0, "leg_counting": 0}
    first = s.next()
    assert {p.extra_info["task"] for p in first} == {"basic_arithmetic", "leg_counting"}
    s.observe([_group(p, [1.0]) for p in first if p.extra_info["task"] == "basic_arithmetic"])
    assert s.curriculum.levels["basic_arithmetic"] >= 1 and s.curriculum.levels["leg_counting"] == 0
    later = [p for p in s.next() if p.extra_info["task"] == "basic_arithmetic"]
    level = s.curriculum.levels["basic_arithmetic"]
    assert later and all(p.uid.startswith(f"gym/basic_arithmetic/{level}/") for p in later)
