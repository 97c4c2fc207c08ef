"""reasoning-gym generation: `reasonrl data generate reasoning_gym --tasks 'basic_arithmetic:2,leg_counting:1'
--size N --seed S` writes verl rows (data_source `reasoning_gym`) whose `extra_info` carries the task
name and the whole entry (question, answer, metadata as JSON), which is what the `reasoning_gym`
verifier rebuilds to call the task's own scorer.

Owns: parsing a weighted task mix (`parse_mix`), per-task settings (`task.field=value`, passed to the
task's config; `task.level=L` sets every curriculum attribute of the task to level L through
reasoning-gym's curriculum), generation through reasoning-gym's composite dataset (weights
unnormalised, sub-datasets seeded from the seed, as reasoning-gym does), and `sweep` (the
conformance check of every registered dataset). Does not own: scoring (`rewards.verifiers.gym`), the curriculum
during training (`data.curriculum`). reasoning-gym is the optional extra `gym`, imported here only.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from reasonrl.data.prepare import prompts
from reasonrl.errors import InputError
from reasonrl.types import Problem

# datasets whose entries carry no reference answer (any valid solution is checked by simulation), so
# "the reference scores 1" cannot hold; and datasets left out of the sweep
NO_REFERENCE = {
    "boxnet": "answer is None: plans are checked by simulating them",
    "graph_color": "answer is None: any proper colouring is accepted",
    "propositional_logic": "answer is None: any valid conclusion is checked",
    "rubiks_cube": "answer is None: move sequences are checked by simulating the cube",
    "rush_hour": "answer is None: move sequences are checked by simulating the board",
}
NOT_SWEPT = {"composite": "the mixer of other datasets, not a task"}
# answers that are never right against a finite reference (complex_arithmetic's own scorer gave "nan" 1)
NON_FINITE_HACKS = ("nan", "-inf", "1e999", "nan+nani", "Infinity")


def _gym():
    try:
        import reasoning_gym
    except ImportError:
        raise InputError(
            "reasoning-gym generation needs the optional package: pip install 'reasonrl[gym]'"
        ) from None
    return reasoning_gym


def task_hint(name: str, way: str) -> str:
    """ "" or, where `name` is a reasoning-gym dataset (not a built-in task), "; NAME is a reasoning-gym
    dataset: <way>" (`way`: how the caller's setting asks for one); "" without reasoning-gym too."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError:
        return ""
    return f"; {name!r} is a reasoning-gym dataset: {way}" if name in DATASETS and name != "composite" else ""


def parse_mix(spec: str, where: str = "--tasks") -> list[tuple[str, float]]:
    """'a:2,b:1,c' -> [(a, 2.0), (b, 1.0), (c, 1.0)]; names checked against reasoning-gym's registry.
    `where`: the setting's name in errors (the CLI's --tasks, a mixture entry's reasoning_gym key)."""
    _gym()
    from reasoning_gym.factory import DATASETS  # registers the datasets

    known = sorted(set(DATASETS) - {"composite"})
    out: list[tuple[str, float]] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, weight = part.partition(":")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise InputError(f"{where} {part!r}: weight {weight!r} is not a number") from None
        if not 0 < w < float("inf"):  # NaN and infinities too: reasoning-gym's draw cannot weigh them
            raise InputError(f"{where} {part!r}: weight must be a finite number > 0")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            raise InputError(f"{where}: unknown reasoning-gym dataset {name!r}"
                             f"{f' (did you mean {close[0]!r}?)' if close else ''}; known: {', '.join(known)}")  # fmt: skip
        out.append((name, w))
    if not out:
        raise InputError(
            f"{where}: give at least one reasoning-gym dataset, e.g. 'basic_arithmetic:2,leg_counting:1'"
        )
    if len({n for n, _ in out}) != len(out):
        raise InputError(f"{where} {spec!r}: a dataset is named twice")
    return out


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def task_configs(mix: list[tuple[str, float]], settings: list[str], where: str = "--config"
                 ) -> dict[str, dict[str, Any]]:  # fmt: skip
    """'task.field=value' settings -> {task: {field: value}}; `task.level=L` expands through the task's
    curriculum (every attribute at level L). `where`: the settings' name in errors."""
    gym = _gym()
    names = {n for n, _ in mix}
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for s in settings:
        key, eq, raw = s.partition("=")
        task, dot, fld = key.partition(".")
        if not eq or not dot or task not in names:
            raise InputError(f"{where} {s!r}: expected TASK.FIELD=VALUE with TASK one of {sorted(names)}")
        if fld == "level":
            try:
                out[task].update(level_config(task, int(raw)))
            except (ValueError, IndexError, KeyError) as e:
                raise InputError(f"{where} {s!r}: {e}") from None
        else:
            out[task][fld] = _value(raw)
    for task, cfg in out.items():  # validate now, naming the task, before anything is written
        try:
            gym.create_dataset(task, size=1, seed=0, **cfg)
        except (TypeError, AssertionError, ValueError) as e:
            raise InputError(f"{where} for {task}: {e}") from None
    return out


def curriculum_range(task: str) -> int | None:
    """The highest curriculum level of a reasoning-gym task (every attribute at its top), or None."""
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if not has_curriculum(task):
        return None
    cur = create_curriculum(task)
    return max(len(a.levels) - 1 for a in cur.attributes.values())


def level_config(task: str, level: int) -> dict[str, Any]:
    """Config fields of `task` with every curriculum attribute at `level` (capped at its top)."""
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if not has_curriculum(task):
        raise ValueError(f"{task} has no curriculum")
    if level < 0:
        raise ValueError(f"level must be >= 0, got {level}")
    cur = create_curriculum(task)
    for name, attr in cur.attributes.items():
        cur.set_attr_level(name, min(level, len(attr.levels) - 1))
    return _config_fields(cur.generate_configuration())


def dataset_at(task: str, level: int | None, fixed: dict[str, Any], seed: int, size: int):
    """A reasoning-gym dataset of `task` at curriculum `level` (None: `fixed` settings only)."""
    cfg = {**(level_config(task, level) if level is not None else {}), **fixed}
    return _gym().create_dataset(task, size=size, seed=seed, **cfg)


def _config_fields(config) -> dict[str, Any]:
    from dataclasses import asdict

    return {k: v for k, v in asdict(config).items() if k not in ("seed", "size")}


def dataset_seed(seed: int) -> int:
    """The reasoning-gym seed behind a user's `--seed` (see `generate`)."""
    from reasonrl.data.mixture import hash_seed

    return hash_seed("reasoning_gym", seed)


def entry_problem(task: str, entry: dict[str, Any], uid: str) -> Problem:
    clean = json.loads(json.dumps(entry, default=str))
    return Problem(prompts.user(str(entry["question"]), prompts.GYM), str(entry["answer"]), "reasoning_gym",
                   "reasoning", {"task": task, "entry": json.dumps(clean)}, uid=uid)  # fmt: skip


def generate(
    tasks: str | list[tuple[str, float]],
    size: int,
    seed: int,
    settings: list[str] | None = None,
    raw_seed: bool = False,
) -> list[Problem]:
    """`size` problems from a weighted mix of reasoning-gym datasets, deterministic in `seed`.

    reasoning-gym builds item i of a dataset from its seed + i, so raw seeds less than `size` apart
    share problems: raw seed 1 with 5000 items holds all of seed 42's first 4959, which are the `rg_*`
    eval benchmarks. So reasoning-gym gets `dataset_seed(seed)`, a 48-bit hash, and two seeds (or a
    seed and the benchmarks) share no problem in practice. `raw_seed=True` passes `seed` as it is: the
    benchmarks use it to be reasoning-gym's own evaluation items."""
    gym = _gym()
    from reasoning_gym.composite import DatasetSpec

    mix = parse_mix(tasks) if isinstance(tasks, str) else tasks
    if size < 1:
        raise InputError("--size must be >= 1")
    configs = task_configs(mix, settings or [])
    specs = [DatasetSpec(name=n, weight=w, config=configs[n]) for n, w in mix]
    ds = gym.create_dataset(
        "composite", size=size, seed=seed if raw_seed else dataset_seed(seed), datasets=specs
    )
    out = []
    for i in range(size):
        entry = ds[i]
        task = entry["metadata"].get("source_dataset", mix[0][0])
        out.append(entry_problem(task, entry, uid=f"gym/{seed}/{i}"))
    return out


def sweep(rows: int = 3, seed: int = 1, names: list[str] | None = None) -> dict[str, str]:
    """Every registered dataset (or `names`): generate `rows` entries and check that the entry's own
    answer scores 1 through our verifier while an empty and a wrong answer score below 1, and a
    non-finite number (`NON_FINITE_HACKS`) scores 0 against a finite reference. Returns
    {dataset: why it does not hold}; an empty dict means every dataset passed."""
    from reasoning_gym.factory import DATASETS

    from reasonrl.rewards import VERIFIERS
    from reasonrl.rewards.verifiers.gym import non_finite

    gym = _gym()
    verify = VERIFIERS.get("reasoning_gym")
    failures: dict[str, str] = {}
    for name in sorted(names or DATASETS):
        if name in NOT_SWEPT:
            continue
        try:
            ds = gym.create_dataset(name, size=rows, seed=seed)
            for i in range(rows):
                p = entry_problem(name, ds[i], uid=f"{name}/{i}")
                ans = json.loads(p.extra_info["entry"])["answer"]
                if ans is None:
                    raise AssertionError("entry has no reference answer")
                scores = [
                    verify(r, p).score for r in (f"<answer>{ans}</answer>", "", "<answer>zzz 12345</answer>")
                ]
                if scores[0] != 1.0 or scores[1] >= 1.0 or scores[2] >= 1.0:
                    raise AssertionError(f"row {i}: reference / empty / wrong scored {scores}")
                if not non_finite(str(ans)):
                    hacks = {h: verify(f"<answer>{h}</answer>", p).score for h in NON_FINITE_HACKS}
                    if any(hacks.values()):
                        raise AssertionError(f"row {i}: non-finite answers scored {hacks}")
        except Exception as e:  # noqa: BLE001 - the sweep reports every kind of failure
            failures[name] = f"{type(e).__name__}: {str(e)[:200]}"
    return failures
