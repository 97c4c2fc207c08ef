"""The mixture's sources one by one (files in seeded epochs, a built-in task, reasoning-gym datasets),
the sampler's prompt budget, metrics and state, and `build_sampler` choosing and building them from a
recipe's `data` section, without a model (a tokenizer of characters measures prompts)."""

from __future__ import annotations

import json
import pickle

import pytest

from reasonrl.config import load_config
from reasonrl.data.curriculum import Curriculum, CurriculumConfig
from reasonrl.data.mixture import FileSource, GymSource, MixtureSampler, TaskSource, build_sampler
from reasonrl.data.sampler import PromptSampler
from reasonrl.data.schema import write_problems
from reasonrl.data.tasks import generate
from reasonrl.errors import InputError
from reasonrl.types import Problem, RolloutGroup


class Chars:
    """A tokenizer whose tokens are the prompt's characters (no chat template)."""

    chat_template = None

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": list(range(len(text)))}


def _problems(n: int) -> list[Problem]:
    return [
        Problem([{"role": "user", "content": f"question {i}"}], str(i), "math", uid=f"q{i}") for i in range(n)
    ]


def _texts(problems) -> list[str]:
    return [p.user_text for p in problems]


def test_a_file_source_draws_each_problem_once_per_epoch_in_a_new_order_each_epoch():
    src = FileSource("f", _problems(6), seed=1)
    epochs = [_texts(src.draw(None) for _ in range(6)) for _ in range(3)]
    assert all(sorted(e) == sorted(_texts(_problems(6))) for e in epochs)  # each problem once per epoch
    assert epochs[0] != _texts(_problems(6)) and len({tuple(e) for e in epochs}) == 3  # reshuffled each epoch
    assert (src.epoch, src.index) == (2, 6)
    plain = FileSource("f", _problems(6), seed=1, shuffle=False)
    assert _texts(plain.draw(None) for _ in range(8)) == _texts(_problems(6) + _problems(2))
    again = FileSource("f", _problems(6), seed=1)
    again.load_state_dict(pickle.loads(pickle.dumps(FileSource("f", _problems(6), seed=1).state_dict())))
    assert _texts(again.draw(None) for _ in range(6)) == epochs[0]


def test_a_file_source_passes_over_skipped_prompts_and_names_itself_when_all_are():
    problems = _problems(4)
    c = Curriculum(CurriculumConfig(enabled=True, skip_solved_after=1))
    c.observe(problems[0], [1.0])
    src = FileSource("f", problems, seed=0, shuffle=False)
    assert _texts(src.draw(c) for _ in range(6)) == ["question 1", "question 2", "question 3"] * 2
    for p in problems[1:]:
        c.observe(p, [1.0])
    with pytest.raises(InputError, match="data.mixture f: the curriculum skips every prompt"):
        src.draw(c)
    with pytest.raises(InputError, match="data.mixture empty: no problems"):
        FileSource("empty", [], seed=0)


def test_a_task_source_generates_varied_numbered_problems_never_below_level_one():
    src = TaskSource("arith", "arithmetic", 2, seed=0)
    drawn = [src.draw(None) for _ in range(5)]
    assert [p.uid for p in drawn] == [f"arith/2/{i}" for i in range(5)]
    assert len(set(_texts(drawn))) == 5 and all(p.extra_info["task"] == "arithmetic" for p in drawn)
    s = MixtureSampler([(TaskSource("arith", "arithmetic", 2, 0), 1.0)], 2, 0,
                       CurriculumConfig(enabled=True, last_k=1))  # fmt: skip
    for _ in range(4):
        s.observe([RolloutGroup(p, [], [], rewards=[0.0, 0.0]) for p in s.next()])
    assert s.curriculum.level("arithmetic") == 1  # down from 2, held at the task's lowest difficulty


def test_a_gym_source_counts_each_task_and_resumes_from_its_state():
    pytest.importorskip("reasoning_gym")
    src = GymSource("gym", "basic_arithmetic:1,leg_counting:1", seed=0)
    drawn = [src.draw(None) for _ in range(8)]
    for task in ("basic_arithmetic", "leg_counting"):
        idx = [int(p.uid.split("/")[3]) for p in drawn if p.extra_info["task"] == task]
        assert idx == list(range(len(idx))) and idx  # each task's own running index, from 0
    assert src.draws == 8 and sum(src.counters.values()) == 8
    # (task, start level, lowest, highest) for tasks with a curriculum only (gsm_symbolic has none)
    assert GymSource("g", "gsm_symbolic:1,leg_counting:1", 0).tasks() == [("leg_counting", 0, 0, 35)]
    state = pickle.loads(pickle.dumps(src.state_dict()))
    follow = _texts(src.draw(None) for _ in range(4))
    again = pickle.loads(pickle.dumps(GymSource("gym", "basic_arithmetic:1,leg_counting:1", seed=0)))
    again.load_state_dict(state)
    assert _texts(again.draw(None) for _ in range(4)) == follow


def test_generated_prompts_over_the_budget_are_skipped_counted_and_a_source_of_only_those_is_an_error():
    s = MixtureSampler([(TaskSource("arith", "arithmetic", 3, 0), 1.0)], 4, 0, max_prompt_tokens=10)
    s.bind(Chars())
    batch = s.next()
    assert all(len(p.user_text) <= 10 for p in batch)  # 9 to 12 characters at difficulty 3
    assert s.overlong > 0 and s.metrics() == {
        "data/overlong_skipped": float(s.overlong)
    }  # one source: no share
    s.bind(None)  # no tokenizer: nothing is measured
    before = s.overlong
    s.next()
    assert s.overlong == before
    exact = MixtureSampler([(TaskSource("arith", "arithmetic", 2, 0), 1.0)], 4, 0, max_prompt_tokens=6)
    exact.bind(Chars())
    assert len(exact.next()) == 4 and exact.overlong == 0  # 6 characters each: exactly the budget fits
    tight = MixtureSampler([(TaskSource("arith", "arithmetic", 2, 0), 1.0)], 1, 0, max_prompt_tokens=1)
    tight.bind(Chars())
    with pytest.raises(InputError, match="data.mixture arith: 100 generated prompts in a row exceed"):
        tight.next()
    assert tight.overlong == 100
    files = MixtureSampler([(FileSource("f", _problems(3), 0), 1.0)], 3, 0, max_prompt_tokens=1)
    files.bind(Chars())
    assert len(files.next()) == 3 and files.overlong == 0  # files were fitted when loaded


def test_sampler_metrics_observe_and_state_without_a_curriculum():
    with pytest.raises(InputError, match="data.mixture: no sources"):
        MixtureSampler([], 2, 0)
    s = MixtureSampler(
        [(FileSource("a", _problems(3), 0), 1.0), (FileSource("b", _problems(3), 0), 3.0)], 1, 0
    )
    assert s.metrics() == {"data/a/share": 0.0, "data/b/share": 0.0}
    s.next()
    assert sorted(s.metrics().values()) == [0.0, 1.0]  # one prompt drawn: its source has all of it
    s.batch_size = 3
    s.next()
    s.observe([RolloutGroup(p, [], [], rewards=[1.0]) for p in _problems(2)])  # no curriculum: nothing to do
    m = s.metrics()
    assert m["data/a/share"] + m["data/b/share"] == pytest.approx(1.0) and m["data/a/share"] == s.drawn[0] / 4
    state = s.state_dict()
    assert state["curriculum"] is None and state["draws"] == 4
    with pytest.raises(ValueError):  # the mixture changed between save and load
        MixtureSampler([(FileSource("a", _problems(3), 0), 1.0)], 4, 0).load_state_dict(state)
    on = MixtureSampler([(FileSource("a", _problems(3), 0), 1.0)], 4, 0, CurriculumConfig(enabled=True))
    one = dict(state, drawn=[1], sources=state["sources"][:1])
    on.load_state_dict(one)  # a state saved without a curriculum keeps the new one as it starts
    assert on.curriculum.levels == {} and on.drawn == [1]


def _data(tmp_path, *overrides):
    return load_config(None, [f"log.run_dir={tmp_path / 'run'}", *overrides]).data


def test_build_sampler_plain_single_source_and_mixture(tmp_path):
    train = _problems(5)
    plain = build_sampler(_data(tmp_path), 2, train, Chars(), log=lambda *a: None)
    assert isinstance(plain, PromptSampler)
    on = "data.curriculum.enabled=true"
    task = build_sampler(_data(tmp_path, on, "data.task=arithmetic", "data.difficulty=3"), 2, train, Chars())
    assert isinstance(task, MixtureSampler) and [type(s) for s in task.sources] == [TaskSource]
    assert (task.sources[0].name, task.sources[0].difficulty, task.curriculum.level("arithmetic")) == (
        "arithmetic", 3, 3)  # fmt: skip
    path = tmp_path / "t.parquet"
    write_problems(path, generate("countdown", 4, seed=0, difficulty=2))
    files = build_sampler(_data(tmp_path, on, f"data.train_files=[{path}]"), 2, train, Chars())
    assert files.sources[0].name == "train" and files.sources[0].problems == train  # the run's loaded rows
    mixture = json.dumps([{"name": "f", "files": str(path), "weight": 3}, {"name": "a", "task": "addsub"},
                          {"name": "g", "reasoning_gym": "leg_counting:1", "config": ["leg_counting.min_animals=2"]}])  # fmt: skip
    pytest.importorskip("reasoning_gym")
    m = build_sampler(
        _data(tmp_path, f"data.mixture={mixture}", "data.max_prompt_tokens=64"), 2, train, Chars()
    )
    assert [type(s) for s in m.sources] == [FileSource, TaskSource, GymSource] and m.weights == [
        3.0,
        1.0,
        1.0,
    ]
    assert len(m.sources[0].problems) == 4 and m.curriculum is None and m.max_prompt_tokens == 64
    assert m._tokenizer is not None and m.sources[2].fixed["leg_counting"]


def test_the_curriculum_moves_on_correctness_not_on_the_shaped_reward():
    from reasonrl.types import RewardResult

    # rewards with shaping terms: solved answers with a length penalty (0.8), unsolved ones with a
    # format bonus (0.2); the curriculum must see 1 and 0
    def group(p, correct):
        results = [RewardResult(0.8 if correct else 0.2, {"correctness": float(correct)}) for _ in range(2)]
        return RolloutGroup(p, [], [], rewards=[r.score for r in results], results=results)

    s = MixtureSampler([(TaskSource("arith", "arithmetic", 3, 0), 1.0)], 2, 0,
                       CurriculumConfig(enabled=True, last_k=1, skip_solved_after=1))  # fmt: skip
    drawn = s.next()
    s.observe([group(drawn[0], True), group(drawn[1], True)])
    assert s.curriculum.level("arithmetic") == 5  # one level up per group (a window of one)
    assert s.metrics()["curriculum/skipped_solved"] == 2.0  # solved: correctness 1 (rewards 0.8 < 1)
    s.observe([group(p, False) for p in s.next()])
    assert s.curriculum.level("arithmetic") == 3  # accuracy 0 <= 0.1, down twice (the rewards' 0.2 is not)
