"""The Hydra config file a verl launch script names (`--config-path DIR --config-name NAME`).

verl's multi-turn examples keep part of their settings there (`examples/sglang_multiturn/config/*.yaml`:
`multi_turn.enable`, `max_user_turns`, the tool format, ...) and put the rest on the command line. Owns:
finding that file (the path as written, beside the script, or, where a shell variable starts the path,
its tail under one of the script's parent directories: the layout of verl's repository) and its settings
as dotted keys, which the script's own overrides then override (as Hydra does). `defaults` other than
verl's own trainer configs are noted as not read. Does not own: what the keys mean (`config.from_verl`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# verl's own: its defaults; TTRL's fork's (its `ttrl` / `unsupervised_reward` sections off, config.from_ttrl)
VERL_BASES = {"ppo_trainer", "_self_", "ppo_megatron_trainer", "sft_trainer", "ppo_trainer_ttrl"}


def _args(text: str) -> dict[str, str]:
    """The script's --config-path / --config-name (its variables expanded), by name."""
    from reasonrl.config.shell import script_commands

    out: dict[str, str] = {}
    for words in script_commands(text):
        for i, w in enumerate(words):
            for name in ("config-path", "config-name", "config_path", "config_name"):
                key = name.replace("_", "-")
                if w.startswith(f"--{name}="):
                    out[key] = w.split("=", 1)[1]
                elif w == f"--{name}" and i + 1 < len(words):
                    out[key] = words[i + 1]
    return out


def candidates(path: str, base: Path | None) -> list[Path]:
    """Where `path` may be: as written (an absolute path, or relative to where the command runs), then
    under the script's directory and each of its parents (verl's scripts run from the repository's root);
    a path that a shell variable starts (`$PROJECT_DIR/examples/...`): its tail under those directories."""
    tail = re.sub(r"^(\$\{?\w+\}?|\$\([^)]*\))/?", "", path)  # "$PROJECT_DIR/examples/x" -> examples/x
    if "$" in tail:
        return []
    here = [Path(path).expanduser()] if tail == path else []
    if Path(tail).is_absolute() or base is None:
        return here
    return here + [d / tail for d in (base, *base.parents)]


def hydra_settings(text: str, base: Path | None, notes: list[str]) -> dict[str, Any]:
    """The dotted settings of the config file the script names (empty when it names none); a note says
    which file was read, or that it is not here."""
    import yaml

    args = _args(text)
    name, where = args.get("config-name"), args.get("config-path")
    if name is None or re.sub(r"\.ya?ml$", "", name) in VERL_BASES:  # verl's own: its defaults, known here
        return {}
    file = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    dirs = candidates(where, base) if where else ([base] if base is not None else [])
    found = next((d / file for d in dirs if (d / file).is_file()), None)
    if found is None:
        notes.append(f"--config-name={name}: verl's config file {file} is not here (--config-path={where}); its "
                     "settings are not read: add them to the script as overrides, or convert it beside its config "
                     "directory")  # fmt: skip
        return {}
    try:
        data = yaml.safe_load(found.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        notes.append(f"{found}: not a YAML file ({str(e).splitlines()[0]}); its settings are not read")
        return {}
    if not isinstance(data, dict):
        notes.append(f"{found}: not a mapping of settings; not read")
        return {}
    data.pop("hydra", None)
    others = [d for d in data.pop("defaults", None) or [] if isinstance(d, str) and d not in VERL_BASES]
    from reasonrl.config import dotted

    settings = dotted(data)
    notes.append(f"read verl's config file {file} ({len(settings)} settings; the script's overrides win)"
                 + (f"; its defaults {', '.join(others)} are not read" if others else ""))  # fmt: skip
    return settings
