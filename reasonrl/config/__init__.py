"""Run configuration: section dataclasses composed into `RunConfig`, loaded from a YAML recipe plus
dotted command-line overrides (`algo.clip_high=0.28`), type-checked by OmegaConf structured configs.

Owns: loading, merging and (de)serialising; the schema is `sections`, cross-field checks `checks`.
Library code receives its own section or plain arguments, never the whole config (rule 6). Errors name
the key and valid choices. Does not own: the registries whose names and keyword options it checks
(`algorithms`, `rewards`), or building the run from the config (`trainer.setup`).
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reasonrl.config.checks import import_plugins, validate
from reasonrl.config.rollout_sections import AgentConfig
from reasonrl.config.sections import (
    RENAMED,
    AlgoConfig,
    CheckpointConfig,
    ConfigError,
    CriticConfig,
    DataConfig,
    DynamicSamplingConfig,
    EntropyControlConfig,
    GuidanceConfig,
    InteractionConfig,
    KLConfig,
    LogConfig,
    LoraSpec,
    ModelConfig,
    OffPolicyConfig,
    RewardConfig,
    RolloutConfig,
    RunConfig,
    SearchToolConfig,
    ShapingConfig,
    ToolsConfig,
    TrainConfig,
    ValConfig,
)

__all__ = [
    "AgentConfig",
    "AlgoConfig",
    "CheckpointConfig",
    "ConfigError",
    "CriticConfig",
    "DataConfig",
    "DynamicSamplingConfig",
    "EntropyControlConfig",
    "GuidanceConfig",
    "KLConfig",
    "LogConfig",
    "LoraSpec",
    "ModelConfig",
    "OffPolicyConfig",
    "RENAMED",
    "RewardConfig",
    "RolloutConfig",
    "RunConfig",
    "ShapingConfig",
    "SearchToolConfig",
    "ToolsConfig",
    "InteractionConfig",
    "TrainConfig",
    "ValConfig",
    "dotted",
    "from_dict",
    "import_plugins",
    "load_cli",
    "load_config",
    "migrate",
    "to_dict",
    "to_yaml",
    "validate",
]

_ = MISSING  # re-exported for recipes that want required fields


def _failing_key(cfg, parts: list[tuple[str, object]]) -> str | None:
    """The key of the first (key, part) whose part does not merge into `cfg` on its own (OmegaConf names
    no key for a list item of the wrong type, e.g. a string where data.mixture holds mappings)."""
    for key, part in parts:
        try:
            OmegaConf.merge(cfg, part)
        except OmegaConfBaseException:
            return key
    return None


def _parts(recipe: Path | None, overrides: list[str]) -> list[tuple[str, object]]:
    """Each override, or each `section.key` of the recipe, as (key, a config holding only it)."""
    if recipe is None:
        return [(o.partition("=")[0], OmegaConf.from_dotlist([o])) for o in overrides]
    out = []
    for section, body in OmegaConf.to_container(OmegaConf.load(recipe)).items():
        items = body.items() if isinstance(body, dict) else [(None, body)]
        out += [(f"{section}.{k}" if k is not None else str(section),
                 OmegaConf.create({section: {k: v} if k is not None else v})) for k, v in items]  # fmt: skip
    return out


def _fail(e: OmegaConfBaseException, source: str, key: str | None = None) -> ConfigError:
    key = getattr(e, "full_key", None) or key or ""
    msg = str(e).split("\n")[0]
    if not key:  # a merge error on a whole section names only its class, e.g. "... of TrainConfig"
        for f in fields(RunConfig):
            if isinstance(f.default_factory, type) and f.default_factory.__name__ in msg:
                key = f.name
    hint = ""
    if re.search(r"\w:[^\s/]", key):  # `{a:0.1}` reads as the key "a:0.1", not as a: 0.1
        hint = " (in {key: value} a space must follow each colon)"
    return ConfigError(f"{source}: invalid config key '{key}': {msg}{hint}")


BUILTIN_RECIPES = Path(__file__).resolve().parents[1] / "recipes"  # shipped in the package


def builtin_recipes() -> list[str]:
    """The recipes shipped with the package, by name ("grpo", "distributed/gpu1_qwen05b", ...)."""
    return sorted(
        p.relative_to(BUILTIN_RECIPES).with_suffix("").as_posix() for p in BUILTIN_RECIPES.rglob("*.yaml")
    )


def recipe_path(recipe: str | Path) -> Path:
    """The recipe file: `recipe` itself when that file exists, else a built-in recipe named by it: "grpo",
    "grpo.yaml", "distributed/gpu1_qwen05b", or the repository path the docs write, "recipes/grpo.yaml",
    from any directory (a pip install has no recipes/ beside it). ConfigError listing the built-in ones."""
    path = Path(recipe)
    if path.is_file():
        return path
    name = path.as_posix().removeprefix("recipes/")
    shipped = BUILTIN_RECIPES / (name if name.endswith(".yaml") else name + ".yaml")
    if not path.is_absolute() and ".." not in Path(name).parts and shipped.is_file():
        return shipped
    raise ConfigError(
        f"recipe file not found: {recipe} (built-in recipes, by name: {', '.join(builtin_recipes())})"
    )


def load_config(recipe: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Defaults <- YAML recipe (a file, or a built-in recipe's name: `recipe_path`) <- dotted overrides, then
    `validate`. Returns a typed RunConfig object."""
    cfg = OmegaConf.structured(RunConfig)
    if recipe is not None:
        recipe = recipe_path(recipe)
        _check_renamed(_check_recipe_shape(Path(recipe)), str(recipe))
    if overrides:
        for o in overrides:
            key, _, value = o.partition("=")
            if key in RENAMED and not value.lstrip().startswith("{"):
                raise ConfigError(f"command-line override: config key '{key}' is now '{RENAMED[key]}'")
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise ConfigError(f"override {bad[0]!r} must look like section.key=value")
    source, part = str(recipe), Path(recipe) if recipe is not None else None
    try:
        if recipe is not None:
            cfg = OmegaConf.merge(cfg, OmegaConf.load(Path(recipe)))
        source, part = "command-line override", None
        if overrides:
            cfg = OmegaConf.merge(cfg, _dotlist(list(overrides)))
    except OmegaConfBaseException as e:
        raise _fail(e, source, _failing_key(cfg, _parts(part, list(overrides or [])))) from None
    try:
        run: RunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
        validate(run)
    except OmegaConfBaseException as e:  # a ${...} interpolation naming nothing (e.g. a shell variable)
        raise ConfigError(f"{getattr(e, 'full_key', None) or source}: {str(e).splitlines()[0]}") from None
    return run


def _dotlist(overrides: list[str]) -> DictConfig:
    """The overrides as a config; ConfigError naming the first whose value YAML cannot read."""
    import yaml

    try:
        return OmegaConf.from_dotlist(overrides)
    except yaml.YAMLError:
        for o in overrides:
            try:
                OmegaConf.from_dotlist([o])
            except yaml.YAMLError as e:
                raise ConfigError(f"command-line override {o!r}: its value is not YAML ({str(e).splitlines()[0]}); "
                                  "quote it: key='...'") from None  # fmt: skip
        raise


def load_cli(recipe: str | None, overrides: list[str]) -> RunConfig:
    """A command's `RECIPE [overrides ...]` arguments: a first argument that is an override
    (`key=value`, and no file by that name) means there is no recipe."""
    import os

    if recipe and "=" in recipe and not os.path.exists(recipe):
        recipe, overrides = None, [recipe, *overrides]
    return load_config(recipe, overrides)


def _check_renamed(data: dict | None, source: str) -> None:
    """A recipe in the flat `algo` layout of earlier releases: name the key's new place."""
    algo = (data or {}).get("algo")
    for key, value in algo.items() if isinstance(algo, dict) else ():
        if f"algo.{key}" in RENAMED and not isinstance(value, dict):
            raise ConfigError(f"{source}: config key 'algo.{key}' is now '{RENAMED['algo.' + key]}'")


def _check_recipe_shape(path: Path) -> dict | None:
    """A recipe must be valid YAML whose top level is a mapping of sections."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a recipe must be a mapping of sections (model:, train:, ...), got {type(data).__name__}"
        )
    return data


def to_yaml(cfg: RunConfig | DictConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def dotted(d: dict, prefix: str = "") -> dict[str, Any]:
    """A nested mapping of settings as {"section.key": value} (an empty section sets nothing)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(dotted(v, key + ".") if isinstance(v, dict) else {key: v})
    return out


def to_dict(cfg: RunConfig) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore[return-value]


def migrate(d: dict[str, Any]) -> dict[str, Any]:
    """A config dict stored by an earlier release (a checkpoint's state.json), with renamed keys moved to
    where they live now; a current dict comes back unchanged."""
    import copy

    d = copy.deepcopy(d)
    algo = d.get("algo")
    if not isinstance(algo, dict):
        return d
    for old, new in RENAMED.items():
        flat = old.split(".", 1)[1]
        if flat in algo and not isinstance(algo[flat], dict):
            value = algo.pop(flat)
            section, leaf = new.split(".")[1:]
            algo.setdefault(section, {})[leaf] = value
    return d


def from_dict(d: dict[str, Any]) -> RunConfig:
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RunConfig), migrate(d)))  # type: ignore[return-value]
