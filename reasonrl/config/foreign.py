"""Recipes of other trainers as reasonrl recipes: what the verl, TRL and OpenRLHF readers share.

Owns: `Converted` (the recipe being built and the notes on what was left out or derived), `Reading` (one
file's settings: the other trainer's defaults, reading keys, applying a key table, noting leftovers), value
conversions (`choice`, `parse_value`: a Hydra / YAML value as Python), `read_source`, and `convert`
(dispatch by trainer). Does not own: each trainer's keys (`config.from_verl`, `config.from_trl`,
`config.from_openrlhf`), reading launch scripts (`config.shell`), the
config itself (`config.sections`), checking the result (`load_config`) or writing it (`cli.convert`).
docs/porting.md is the user's side of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasonrl.errors import InputError

SOURCES = ("verl", "trl", "openrlhf")


@dataclass
class Converted:
    recipe: dict[str, Any] = field(default_factory=dict)  # nested, as a recipe file holds it
    notes: list[str] = field(default_factory=list)  # what was left out or derived, one line each

    def set(self, dotted: str, value: Any) -> None:
        node = self.recipe
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value


class Reading:
    """One file's settings being read into a recipe: the other trainer's defaults filled in where the file
    sets nothing (one note lists them), `take` reads a key (and marks it read), `apply` maps a key table,
    `leftovers` notes every key no rule read: left out, or not needed (with the reason)."""

    def __init__(self, who: str, given: dict[str, Any], defaults: dict[str, Any]):
        self.out, self.used = Converted(), set()
        missing = {k: v for k, v in defaults.items() if k not in given}
        if missing:  # what the other trainer would use where the file is silent: the same run
            self.out.notes.append(f"{who}'s defaults where the file sets nothing: "
                                  + ", ".join(f"{k}={v}" for k, v in missing.items()))  # fmt: skip
        self.values = {**missing, **given}

    def take(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.values.get(key, default)

    def apply(self, table: dict[str, tuple[str, Callable]]) -> None:
        """Each key of `table` the file sets: its value converted to the reasonrl key (a value with no
        equivalent is noted)."""
        for key, (ours, convert) in table.items():
            if key not in self.values:
                continue
            value = self.take(key)
            if value is None:
                continue
            try:
                self.out.set(ours, convert(value))
            except (ValueError, TypeError) as e:
                self.out.notes.append(f"{key}={value!r}: {e}; left out")

    def derive(self, *steps: Callable[[], None], what: str, hint: str = "") -> None:
        """Runs the settings computed from several keys; a value they cannot use (a number that is not
        one, e.g. a shell variable the script does not set) is an InputError: `what (the error)hint`."""
        try:
            for step in steps:
                step()
        except InputError:
            raise
        except (ValueError, TypeError) as e:
            raise InputError(f"{what} ({e}){hint}") from None

    def leftovers(self, not_needed: dict[str, str | None], prefixes: dict[str, str] | None = None) -> None:
        """A note for every key no rule read: not needed (the reason; None: nothing to say) or left out."""
        for key, value in self.values.items():
            if key in self.used:
                continue
            why = not_needed[key] if key in not_needed else next(
                (r for p, r in (prefixes or {}).items() if key.startswith(p)), False)  # fmt: skip
            if why is False:
                self.out.notes.append(f"{key}={value!r}: no reasonrl equivalent, left out")
            elif why:
                self.out.notes.append(f"{key}: not needed ({why})")


def critic_warmup(out: Converted, setting: str, frozen: int) -> None:
    """`setting` (the other trainer's key=value) leaves the policy alone for its first `frozen` steps:
    algo.critic.warmup_steps where the converted estimator has a critic, a note where it has none."""
    from reasonrl.algorithms import ADVANTAGES

    if frozen <= 0:
        return
    estimator = out.recipe.get("algo", {}).get("adv_estimator", "grpo")
    if "values" in ADVANTAGES.get(estimator).needs:
        out.set("algo.critic.warmup_steps", frozen)
        out.notes.append(f"{setting}: the policy is not updated in the first {frozen} step(s) -> "
                         f"algo.critic.warmup_steps={frozen}")  # fmt: skip
    else:
        out.notes.append(f"{setting}: the first {frozen} step(s) update nothing there (no critic with "
                         f"{estimator}); left out")  # fmt: skip


def choice(table: dict[str, Any], what: str) -> Callable[[Any], Any]:
    def convert(value):
        key = str(value).lower() if isinstance(value, str) else value
        if key not in table:
            raise ValueError(
                f"{what} {value!r} has no reasonrl equivalent (known: {', '.join(map(str, table))})"
            )
        return table[key]

    return convert


def off_if_negative(value):  # verl's -1 = "not set" for frequencies and counts
    return 0 if value is None or int(value) < 0 else int(value)


def as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def parse_value(text: str) -> Any:
    """A Hydra override's value: bool / null / int / float / [list] / a string."""
    import yaml

    t = text.strip()
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", t):
        return float(t) if any(c in t for c in ".eE") else int(t)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.lower() in ("null", "none", "~"):
        return None
    if t.startswith("[") and t.endswith("]"):
        try:
            return [parse_value(str(x)) if isinstance(x, str) else x for x in yaml.safe_load(t)]
        except yaml.YAMLError:
            pass
    return t


def read_source(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    return p.read_text(encoding="utf-8", errors="replace")


def convert(source: str, path: str | Path) -> Converted:
    """The recipe for `path`, a verl launch script (source "verl"), a TRL config file ("trl") or an
    OpenRLHF launch script ("openrlhf")."""
    if source == "verl":
        from reasonrl.config.from_verl import convert_verl

        return without_foreign_options(convert_verl(read_source(path), Path(path).parent))
    if source == "trl":
        from reasonrl.config.from_trl import convert_trl

        return without_foreign_options(convert_trl(path))
    if source == "openrlhf":
        from reasonrl.config.from_openrlhf import convert_openrlhf

        return without_foreign_options(convert_openrlhf(read_source(path)))
    raise InputError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")


def without_foreign_options(out: Converted) -> Converted:
    """Options the recipe's own estimator, loss or engine does not take left out, with a note (the other
    trainer sets them whatever it runs: verl's gamma / lam beside GRPO, clip_ratio_c beside GSPO, vLLM's
    settings for another engine)."""
    from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
    from reasonrl.config.sections import AlgoConfig, RolloutConfig
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    algo, rollout = out.recipe.get("algo", {}), out.recipe.get("rollout", {})
    for section, dotted, registry, name in (
        (algo, "algo.adv_kwargs", ADVANTAGES, algo.get("adv_estimator", AlgoConfig.adv_estimator)),
        (algo, "algo.loss_kwargs", POLICY_LOSSES, algo.get("policy_loss", AlgoConfig.policy_loss)),
        (rollout, "rollout.engine_kwargs", ROLLOUT_ENGINES, rollout.get("engine", RolloutConfig.engine)),
    ):
        key = dotted.split(".")[1]
        options = section.get(key, {})
        if name not in registry:
            continue
        valid = registry.options(name)
        for k in [k for k in options if k not in valid]:
            out.notes.append(f"{dotted}.{k}={options.pop(k)!r}: not an option of {name}, left out")
        if key in section and not options:
            del section[key]
    return out
