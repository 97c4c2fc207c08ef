"""Shared by the recipe-conversion tests: a file of another trainer's settings written and converted, and
a converted recipe written and loaded as reasonrl loads it."""

from __future__ import annotations

import yaml

from reasonrl.config import load_config
from reasonrl.config.foreign import convert


def convert_text(tmp_path, source: str, text: str, name: str = "run.sh"):
    """`reasonrl convert SOURCE` of `text` written to `<tmp_path>/<name>`: the Converted recipe and notes."""
    path = tmp_path / name
    path.write_text(text)
    return convert(source, path)


def load_recipe(tmp_path, recipe: dict, *overrides: str):
    """The RunConfig of a converted recipe, written as `reasonrl convert -o` writes it, with `overrides`."""
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return load_config(path, list(overrides))
