"""The training-time curriculum (opt-in, `data.curriculum` in the recipe): per-task difficulty moved by
recent accuracy, and an online pass-rate record per prompt that lets the sampler skip prompts that
are always or never solved.

Owns: `Curriculum` (its state is plain data, saved in checkpoints by the sampler that holds it).
  levels     reasoning-gym style: for each task with a difficulty knob (generated sources), the mean
             verifier score of its last `last_k` groups moves its level up when >= success_threshold
             and down when <= failure_threshold (then the window starts over), within
             [min_level, max_level] (reasoning-gym tasks: their curriculum's own range).
  pass rates for every prompt (keyed by a hash of its data_source and text), the mean scores of its last groups; a prompt whose last
             `skip_solved_after` groups all scored 1 everywhere, or whose last `skip_unsolved_after`
             groups all scored 0 everywhere, is skipped from then on (0 turns a rule off). Zero-variance
             groups cost generation and teach a group-relative estimator nothing.
Metrics (`metrics()`): curriculum/<task>/level, curriculum/<task>/acc (window mean), and the
number of prompts skipped as solved / unsolved. Does not own: drawing prompts (`data.mixture`).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CurriculumConfig:
    enabled: bool = False
    last_k: int = 8  # groups per task in the accuracy window
    success_threshold: float = 0.7  # reasoning-gym's training defaults
    failure_threshold: float = 0.1
    min_level: int = 0
    max_level: int = 10  # built-in tasks; reasoning-gym tasks use their curriculum's own top level
    skip_solved_after: int = 0  # skip a prompt after this many all-correct groups in a row (0: never)
    skip_unsolved_after: int = 0  # skip a prompt after this many all-wrong groups in a row (0: never)


def task_of(problem) -> str:
    return str(problem.extra_info.get("task") or problem.data_source)


def prompt_key(problem) -> str:
    """A prompt's identity across files and uids: a hash of its data_source and text."""
    text = problem.data_source + "\0" + "\0".join(str(m.get("content", "")) for m in problem.prompt)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


@dataclass
class Curriculum:
    config: CurriculumConfig
    levels: dict[str, int] = field(default_factory=dict)  # task -> level (tasks with a knob only)
    bounds: dict[str, list[int]] = field(default_factory=dict)  # task -> [lowest, highest] level
    windows: dict[str, list[float]] = field(default_factory=dict)  # task -> last group means
    record: dict[str, list[float]] = field(default_factory=dict)  # prompt key -> last group means
    skipped: dict[str, str] = field(default_factory=dict)  # prompt key -> "solved" | "unsolved"

    def add_task(self, task: str, level: int, lowest: int = 0, highest: int | None = None) -> None:
        """A task with a difficulty knob, starting at `level`, moving within its own [lowest, highest]
        intersected with the config's [min_level, max_level]."""
        lo = max(lowest, self.config.min_level)
        hi = self.config.max_level if highest is None else min(highest, self.config.max_level)
        hi = max(hi, lo)
        self.bounds[task] = [lo, hi]
        self.levels.setdefault(task, max(lo, min(level, hi)))

    def level(self, task: str) -> int:
        return self.levels[task]

    def observe(self, problem, rewards: list[float]) -> None:
        """One scored group of `problem`: each completion's correctness (`RolloutGroup.correctness`)."""
        if not rewards:
            return
        mean = sum(float(r) for r in rewards) / len(rewards)
        c = self.config
        task = task_of(problem)
        if task in self.levels:
            win = self.windows.setdefault(task, [])
            win.append(mean)
            if len(win) >= c.last_k:
                acc = sum(win[-c.last_k :]) / c.last_k
                lvl = self.levels[task]
                lo, hi = self.bounds[task]
                if acc >= c.success_threshold and lvl < hi:
                    self.levels[task], self.windows[task] = lvl + 1, []
                elif acc <= c.failure_threshold and lvl > lo:
                    self.levels[task], self.windows[task] = lvl - 1, []
                else:
                    del win[: len(win) - c.last_k]
        keep = max(c.skip_solved_after, c.skip_unsolved_after)
        if keep:
            rec = self.record.setdefault(prompt_key(problem), [])
            rec.append(mean)
            if len(rec) > keep:
                del rec[: len(rec) - keep]
            if (
                c.skip_solved_after
                and len(rec) >= c.skip_solved_after
                and min(rec[-c.skip_solved_after :]) >= 1.0
            ):
                self.skipped[prompt_key(problem)] = "solved"
            elif (
                c.skip_unsolved_after
                and len(rec) >= c.skip_unsolved_after
                and max(rec[-c.skip_unsolved_after :]) <= 0.0
            ):
                self.skipped[prompt_key(problem)] = "unsolved"

    def skips(self, problem) -> bool:
        return bool(self.skipped) and prompt_key(problem) in self.skipped

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for task, lvl in self.levels.items():
            out[f"curriculum/{task}/level"] = float(lvl)
            win = self.windows.get(task) or []
            if win:
                out[f"curriculum/{task}/acc"] = sum(win) / len(win)
        if self.config.skip_solved_after or self.config.skip_unsolved_after:
            vals = list(self.skipped.values())
            out["curriculum/skipped_solved"] = float(vals.count("solved"))
            out["curriculum/skipped_unsolved"] = float(vals.count("unsolved"))
        return out

    def state_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("config")
        return d

    def load_state_dict(self, d: dict[str, Any]) -> None:
        for k, v in d.items():
            setattr(self, k, v)
