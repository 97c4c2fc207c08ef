"""Stopping a run early on what its metrics say (`train.stop_when`): a rule names a logged metric, a bound
it must not cross (`below` or `above`) and how many of its logged values in a row may cross it before the
run stops (`patience`, default 1). The first rule met ends the run after that step's metrics, with a
checkpoint of that step, as a finished run (`stopped` in its result, a line in the log), not an error.

Why: a run can go wrong while every step looks busy. Label-free rewards collapse onto one answer for
every prompt (`reward/pseudo/vote/distinct_labels` falling towards 1 / prompts, docs/rewards.md), the
entropy collapses (`actor/entropy`), held-out accuracy falls (`eval/accuracy`, logged at validation
steps only: a rule counts the steps that log its metric), or completions run into the token limit
(`rollout/truncated_frac`). transformers' early stopping watches an eval metric the same way.

Owns: `StopRules` (the streaks and the decision; every rank decides alike, from the reduced metrics) and
`check_stop_rules` (the recipe's rules, a ConfigError naming the rule). Does not own: logging the metrics
(`trainer.metrics`) or saving the checkpoint (`trainer.loop`). A resumed run counts its streaks afresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    metric: str
    below: float | None = None
    above: float | None = None
    patience: int = 1

    def crossed(self, value: float) -> bool:
        return value < self.below if self.below is not None else value > self.above

    def __str__(self) -> str:
        bound = f"below {self.below:g}" if self.below is not None else f"above {self.above:g}"
        return f"{self.metric} {bound}"


def check_stop_rules(rules) -> list[Rule]:
    """The rules of `train.stop_when`; ConfigError naming the first that cannot work."""
    from reasonrl.config import ConfigError

    out = []
    for i, r in enumerate(rules or ()):
        where = f"train.stop_when[{i}]"
        if not isinstance(r, dict):
            raise ConfigError(f"{where} must be a mapping {{metric, below | above, patience}}, got {r!r}")
        unknown = sorted(set(r) - {"metric", "below", "above", "patience"})
        if unknown:
            raise ConfigError(
                f"{where} has unknown key(s) {unknown}: a rule is {{metric, below | above, patience}}"
            )
        if not isinstance(r.get("metric"), str) or not r["metric"]:
            raise ConfigError(
                f"{where}.metric must name a logged metric (e.g. eval/accuracy), got {r.get('metric')!r}"
            )
        bounds = [k for k in ("below", "above") if r.get(k) is not None]
        if len(bounds) != 1:
            raise ConfigError(f"{where} needs one bound, below or above, got {bounds or 'none'}")
        value = r[bounds[0]]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}.{bounds[0]} must be a finite number, got {value!r}")
        patience = r.get("patience", 1)
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ConfigError(
                f"{where}.patience must be a whole number >= 1 (logged values in a row), got {patience!r}"
            )
        out.append(Rule(r["metric"], r.get("below"), r.get("above"), patience))
    return out


class StopRules:
    """The streak of each rule: how many of its metric's logged values in a row crossed its bound."""

    def __init__(self, rules) -> None:
        self.rules = check_stop_rules(rules)
        self.streaks = [0] * len(self.rules)

    def check(self, step: int, metrics: dict) -> str | None:
        """Why the run stops after `step` (the first rule whose streak reached its patience), or None. A step
        that does not log a rule's metric (or logs no number) leaves its streak as it was."""
        for i, rule in enumerate(self.rules):
            value = metrics.get(rule.metric)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            self.streaks[i] = self.streaks[i] + 1 if rule.crossed(float(value)) else 0
            if self.streaks[i] >= rule.patience:
                times = (
                    f"{rule.patience} logged values in a row" if rule.patience > 1 else "at step " + str(step)
                )
                return (f"train.stop_when: {rule} ({times}; {value:.4g} at step {step}): the run stops here, "
                        "with a checkpoint of this step")  # fmt: skip
        return None
