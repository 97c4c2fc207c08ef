"""Training on several sources with weights, and the curriculum's hooks into drawing prompts:
`data.mixture` and `data.curriculum` in a recipe.

Owns: the sources a mixture draws from and `MixtureSampler`.
  files          problems loaded from files (checked and fitted to the prompt budget at load), drawn in
                 seeded per-epoch permutations, as `PromptSampler` does
  task           a built-in procedural task generated one problem at a time at its current difficulty
                 (the curriculum's level; train side of the held-out split)
  reasoning_gym  a weighted mix of reasoning-gym datasets generated one entry at a time at each task's
                 current curriculum level (or the fixed `config` settings)
Each draw k picks a source by weight with a generator seeded by (seed, k), so the sequence of prompts
depends only on the seed, the draw count and the curriculum state, all of which are in
`state_dict()`: a resumed run draws exactly what an uninterrupted one would. Prompts the curriculum
skips (always / never solved) are passed over; generated prompts over the token budget are skipped
and counted. Does not own: the curriculum's rules (`data.curriculum`), loading files
(`data.schema`), generating (`data.tasks`, `data.gym`).
"""

from __future__ import annotations

import random
from typing import Any

from reasonrl.data.curriculum import Curriculum, CurriculumConfig
from reasonrl.data.prompts import with_template_kwargs
from reasonrl.errors import InputError
from reasonrl.types import Problem, template_kwargs

MIXTURE_KINDS = ("files", "task", "reasoning_gym")
_MIXTURE_KEYS = {"name", "weight", "files", "task", "difficulty", "reasoning_gym", "config"}


def check_data_config(d) -> None:
    """The `data` section's mixture and curriculum settings; a ConfigError naming the key."""
    from reasonrl.config import ConfigError

    if d.difficulty < 1:  # every built-in task starts at 1
        raise ConfigError(f"data.difficulty must be >= 1, got {d.difficulty}")
    try:
        template_kwargs(dict(d.chat_template_kwargs), "data", label="data.chat_template_kwargs")
    except InputError as e:
        raise ConfigError(str(e)) from None
    names = set()
    for i, m in enumerate(d.mixture):
        where = f"data.mixture[{i}]"
        if not isinstance(m, dict):
            raise ConfigError(f"{where} must be a mapping")
        unknown = sorted(set(m) - _MIXTURE_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(_MIXTURE_KEYS)}")
        kinds = [k for k in MIXTURE_KINDS if m.get(k)]
        if len(kinds) != 1:
            raise ConfigError(f"{where}: give exactly one of {', '.join(MIXTURE_KINDS)}")
        if d.prompt_key and kinds != ["files"]:  # generated rows keep the prompt they are made with
            raise ConfigError(f"data.prompt_key with {where}.{kinds[0]}: only data files' rows take their prompt "
                              "from a field")  # fmt: skip
        name = m.get("name")
        if not isinstance(name, str) or not name or name in names:
            raise ConfigError(f"{where}.name must be a unique non-empty string")
        names.add(name)
        w = m.get("weight", 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < float("inf"):
            raise ConfigError(f"{where}.weight must be a finite number > 0, got {w!r}")
        level = m.get("difficulty", 1)
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise ConfigError(f"{where}.difficulty must be a whole number >= 1, got {level!r}")
        if "difficulty" in m and not m.get("task"):  # (a reasoning-gym entry sets its own: `config`)
            raise ConfigError(f"{where}.difficulty applies to a built-in task only")
        if m.get("task"):
            check_task(
                f"{where}.task", str(m["task"]), f"{where}.reasoning_gym: '{m['task']}:1' instead of task"
            )
    if d.mixture and d.train_files:
        raise ConfigError("data.mixture and data.train_files both set; put the files in the mixture")
    c = d.curriculum
    if c.last_k < 1 or not 0 <= c.failure_threshold < c.success_threshold <= 1:
        raise ConfigError(
            "data.curriculum: need last_k >= 1 and 0 <= failure_threshold < success_threshold <= 1"
        )
    if c.skip_solved_after < 0 or c.skip_unsolved_after < 0 or c.min_level < 0 or c.max_level < c.min_level:
        raise ConfigError("data.curriculum: skip_*_after and min_level must be >= 0, max_level >= min_level")


GYM_INDEX_SPACE = 1_000_000  # reasoning-gym items are a pure function of (seed, index): no cost to size


class FileSource:
    def __init__(self, name: str, problems: list[Problem], seed: int, shuffle: bool = True):
        if not problems:
            raise InputError(f"data.mixture {name}: no problems")
        self.name, self.problems, self.seed, self.shuffle = name, problems, seed, shuffle
        self.epoch, self.index = 0, 0
        self._order: list[int] | None = None

    def _perm(self) -> list[int]:
        if self._order is None:
            self._order = list(range(len(self.problems)))
            if self.shuffle:
                random.Random(f"{self.seed}-{self.name}-{self.epoch}").shuffle(self._order)
        return self._order

    def draw(self, curriculum: Curriculum | None) -> Problem | None:
        for _ in range(len(self.problems)):
            if self.index >= len(self.problems):
                self.epoch, self.index, self._order = self.epoch + 1, 0, None
            p = self.problems[self._perm()[self.index]]
            self.index += 1
            if curriculum is None or not curriculum.skips(p):
                return p
        raise InputError(
            f"data.mixture {self.name}: the curriculum skips every prompt (all solved or unsolved)"
        )

    def tasks(self) -> list[tuple[str, int, int, int | None]]:
        return []

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.epoch, self.index, self._order = int(d["epoch"]), int(d["index"]), None

    def __getstate__(self):
        return {**self.__dict__, "_order": None}


def check_task(key: str, task: str, gym_way: str) -> None:
    """ConfigError unless `task` is a built-in task (naming the reasoning-gym way for a gym dataset)."""
    from reasonrl.config import ConfigError
    from reasonrl.data.gym import task_hint
    from reasonrl.data.tasks import TASKS

    if task not in TASKS:
        raise ConfigError(f"{key}={task!r} is not a valid choice; valid: {', '.join(sorted(TASKS))}"
                          f"{task_hint(task, gym_way)}")  # fmt: skip


class TaskSource:
    """A built-in procedural task at the curriculum's level (difficulty = level)."""

    def __init__(self, name: str, task: str, difficulty: int, seed: int):
        check_task(f"data.mixture {name}: task", task, f"reasoning_gym: '{task}:1' instead of task")
        self.name, self.task, self.difficulty, self.seed, self.index = name, task, difficulty, seed, 0

    def tasks(self) -> list[tuple[str, int, int, int | None]]:
        return [(self.task, self.difficulty, 1, None)]  # (task, start level, lowest, highest)

    def draw(self, curriculum: Curriculum | None) -> Problem:
        from reasonrl.data.tasks import TASKS, is_heldout

        level = (
            curriculum.level(self.task)
            if curriculum is not None and self.task in curriculum.levels
            else self.difficulty
        )
        for attempt in range(1000):  # the train side of the held-out split
            (p,) = TASKS[self.task](
                n=1, seed=hash_seed(self.seed, self.name, level, self.index, attempt), difficulty=level
            )
            if not is_heldout(p):
                break
        self.index += 1
        p.extra_info["task"] = self.task
        p.uid = f"{self.name}/{level}/{self.index - 1}"
        return p

    def state_dict(self) -> dict[str, Any]:
        return {"index": self.index}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.index = int(d["index"])


class GymSource:
    """reasoning-gym datasets by weight, each at its curriculum level (or fixed `config` settings)."""

    def __init__(self, name: str, spec: str, seed: int, settings: list[str] | None = None):
        from reasonrl.data.gym import parse_mix, task_configs

        self.name, self.seed = name, seed
        self.mix = parse_mix(spec, f"data.mixture {name}: reasoning_gym")
        # validated now, before training
        self.fixed = task_configs(self.mix, list(settings or []), f"data.mixture {name}: config")
        self.counters = {t: 0 for t, _ in self.mix}
        self.draws = 0
        self._cache: dict[tuple[str, int | None], Any] = {}

    def tasks(self) -> list[tuple[str, int, int, int | None]]:
        from reasonrl.data.gym import curriculum_range

        out = []
        for t, _ in self.mix:
            rng = curriculum_range(t)
            if rng is not None:
                out.append((t, 0, 0, rng))
        return out

    def _dataset(self, task: str, level: int | None):
        key = (task, level)
        if key not in self._cache:
            from reasonrl.data.gym import dataset_at

            self._cache[key] = dataset_at(task, level, self.fixed[task], hash_seed(self.seed, self.name, task, level),
                                          GYM_INDEX_SPACE)  # fmt: skip
        return self._cache[key]

    def draw(self, curriculum: Curriculum | None) -> Problem:
        from reasonrl.data.gym import entry_problem

        rng = random.Random(f"{self.seed}:{self.name}:{self.draws}")
        task = rng.choices([t for t, _ in self.mix], weights=[w for _, w in self.mix])[0]
        self.draws += 1
        level = curriculum.level(task) if curriculum is not None and task in curriculum.levels else None
        i = self.counters[task] % GYM_INDEX_SPACE
        self.counters[task] += 1
        return entry_problem(task, self._dataset(task, level)[i], uid=f"{self.name}/{task}/{level}/{i}")

    def state_dict(self) -> dict[str, Any]:
        return {"draws": self.draws, "counters": dict(self.counters)}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.draws, self.counters = int(d["draws"]), {k: int(v) for k, v in d["counters"].items()}

    def __getstate__(self):
        return {**self.__dict__, "_cache": {}}


def hash_seed(*parts: Any) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:6], "little")


class MixtureSampler:
    """Draws `batch_size` prompts per `next()` from weighted sources, with an optional curriculum.
    Same interface as `PromptSampler` plus `observe(groups)`, `metrics()` and `bind(tokenizer)`."""

    def __init__(self, sources: list[tuple[Any, float]], batch_size: int, seed: int,
                 curriculum: CurriculumConfig | None = None, max_prompt_tokens: int | None = None,
                 template_kwargs: dict | None = None):  # fmt: skip
        if not sources:
            raise InputError("data.mixture: no sources")
        self.sources = [s for s, _ in sources]
        self.weights = [float(w) for _, w in sources]
        self.batch_size, self.seed, self.draws = batch_size, seed, 0
        self.curriculum = Curriculum(curriculum) if curriculum is not None and curriculum.enabled else None
        if self.curriculum is not None:
            for s in self.sources:
                for task, level, lowest, highest in s.tasks():
                    self.curriculum.add_task(task, level, lowest, highest)
        self.max_prompt_tokens = max_prompt_tokens
        self.overlong = 0
        self.drawn = [0] * len(self.sources)
        self._tokenizer = None
        self.template_kwargs = dict(template_kwargs or {})  # data.chat_template_kwargs, for generated prompts

    def bind(self, tokenizer) -> None:
        """The tokenizer that measures generated prompts against `max_prompt_tokens`."""
        self._tokenizer = tokenizer

    def _fits(self, p: Problem) -> bool:
        if self._tokenizer is None or self.max_prompt_tokens is None:
            return True
        from reasonrl.data.prompts import encode_prompt

        return len(encode_prompt(self._tokenizer, p)) <= self.max_prompt_tokens

    def _draw_one(self) -> Problem:
        k = random.Random(f"{self.seed}:mixture:{self.draws}").choices(
            range(len(self.sources)), self.weights
        )[0]
        self.draws += 1
        src = self.sources[k]
        for _ in range(100):
            p = src.draw(self.curriculum)
            if not isinstance(src, FileSource):  # (files got them at load)
                p = with_template_kwargs([p], self.template_kwargs)[0]
            if isinstance(src, FileSource) or self._fits(p):  # files were fitted at load
                self.drawn[k] += 1
                return p
            self.overlong += 1
        raise InputError(
            f"data.mixture {src.name}: 100 generated prompts in a row exceed data.max_prompt_tokens"
        )

    def next(self) -> list[Problem]:
        return [self._draw_one() for _ in range(self.batch_size)]

    def observe(self, groups) -> None:
        if self.curriculum is not None:
            for g in groups:
                self.curriculum.observe(g.problem, g.correctness)  # solved, not shaped

    def metrics(self) -> dict[str, float]:
        total = max(1, sum(self.drawn))
        out = (
            {f"data/{s.name}/share": n / total for s, n in zip(self.sources, self.drawn)}
            if len(self.sources) > 1
            else {}
        )
        if self.overlong:
            out["data/overlong_skipped"] = float(self.overlong)
        return {**out, **(self.curriculum.metrics() if self.curriculum is not None else {})}

    def state_dict(self) -> dict[str, Any]:
        return {"draws": self.draws, "drawn": list(self.drawn), "overlong": self.overlong,
                "sources": [s.state_dict() for s in self.sources],
                "curriculum": self.curriculum.state_dict() if self.curriculum is not None else None}  # fmt: skip

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.draws, self.drawn, self.overlong = int(d["draws"]), list(d["drawn"]), int(d["overlong"])
        for s, sd in zip(self.sources, d["sources"], strict=True):
            s.load_state_dict(sd)
        if self.curriculum is not None and d.get("curriculum") is not None:
            self.curriculum.load_state_dict(d["curriculum"])

    def __getstate__(self):
        return {**self.__dict__, "_tokenizer": None}


def build_sampler(d, batch_size: int, train: list[Problem], tokenizer, reward_options: dict | None = None,
                  log=print, verifier: str | None = None, unverified: bool = False, vote: bool = False):  # fmt: skip
    """The prompt sampler of a run from its `data` section: the plain `PromptSampler` over `train`
    when there is neither a mixture nor a curriculum (unchanged behaviour), else a `MixtureSampler`
    (one source built from `train_files` / `task` when no mixture is given). `verifier`: `reward.verifier`,
    for the rows of a mixture's files; `unverified`: rows with no checkable answer pass (SFT,
    `routing.check_routable`); `vote`: labels voted by the samples (`reward.pseudo_label`)."""
    from reasonrl.data.prompts import fit_prompts, with_prompt_key
    from reasonrl.data.sampler import PromptSampler
    from reasonrl.data.schema import load_problems
    from reasonrl.rewards import check_routable
    from reasonrl.rewards.routing import with_verifier

    if not d.mixture and not d.curriculum.enabled:
        return PromptSampler(train, batch_size, seed=d.seed, shuffle=d.shuffle)
    kwargs = dict(d.chat_template_kwargs)
    entries = list(d.mixture) or [
        {"name": "train", "files": list(d.train_files)} if d.train_files else
        {"name": d.task, "task": d.task, "difficulty": d.difficulty}
    ]  # fmt: skip
    sources = []
    for m in entries:
        name, weight = m["name"], float(m.get("weight", 1.0))
        if m.get("files"):
            files = [m["files"]] if isinstance(m["files"], str) else list(m["files"])
            problems = train if not d.mixture else with_template_kwargs(load_problems(files), kwargs)
            if d.mixture:  # (data.prompt_key: train rows were given theirs in trainer.setup.load_data)
                problems = with_prompt_key(problems, d.prompt_key, f"data.mixture {name}")
            problems = with_verifier(problems, verifier)
            check_routable(problems, f"data.mixture {name}", reward_options, unverified, vote)
            problems = fit_prompts(tokenizer, problems, d.max_prompt_tokens, f"data.mixture {name}",
                                   d.drop_overlong_prompts, log)  # fmt: skip
            src = FileSource(name, problems, d.seed, d.shuffle)
        elif m.get("task"):
            src = TaskSource(name, str(m["task"]), int(m.get("difficulty", d.difficulty)), d.seed)
        else:
            src = GymSource(name, str(m["reasoning_gym"]), d.seed, list(m.get("config") or []))
        sources.append((src, weight))
    sampler = MixtureSampler(sources, batch_size, d.seed, d.curriculum, d.max_prompt_tokens, kwargs)
    sampler.bind(tokenizer)
    return sampler
