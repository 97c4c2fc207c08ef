"""The recipes shipped inside the package: by name from any directory (a pip install has no recipes/
beside the user), and every file the package ships named by its package data (so a wheel has it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reasonrl.config import ConfigError, load_config


def test_a_built_in_recipe_by_name_or_by_its_repository_path_from_any_directory(tmp_path, monkeypatch):
    """A pip install has no recipes/ beside the user: `reasonrl train grpo` (or the docs' `recipes/grpo.yaml`)
    reads the recipe shipped in the package; a file of that name in the working directory wins."""
    from reasonrl.config import BUILTIN_RECIPES, builtin_recipes, recipe_path

    monkeypatch.chdir(tmp_path)
    shipped = load_config(BUILTIN_RECIPES / "dapo.yaml")
    for name in ("dapo", "dapo.yaml", "recipes/dapo.yaml"):
        assert recipe_path(name) == BUILTIN_RECIPES / "dapo.yaml"
        assert load_config(name) == shipped
    assert load_config("dapo") != load_config("grpo")  # (the name picks the recipe)
    assert recipe_path("distributed/gpu1_qwen05b") == BUILTIN_RECIPES / "distributed" / "gpu1_qwen05b.yaml"
    names = builtin_recipes()
    assert "grpo" in names and "distributed/gpu8_qwen7b" in names and len(names) == len(
        list(BUILTIN_RECIPES.rglob("*.yaml")))  # fmt: skip
    (tmp_path / "dapo.yaml").write_text("train:\n  steps: 3\n")  # a local file of the name wins
    assert recipe_path("dapo.yaml") == Path("dapo.yaml")
    assert load_config("dapo.yaml").train.steps == 3
    for bad in ("nope", "../recipes/grpo", "/recipes/grpo.yaml"):  # no name outside the shipped directory
        with pytest.raises(ConfigError, match="recipe file not found"):
            recipe_path(bad)


def test_every_file_the_package_ships_is_in_its_package_data():
    """A recipe or viewer file under reasonrl/ that no package-data pattern names is missing from a wheel
    (the distributed recipes were)."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "reasonrl"
    ]
    data = [p.relative_to(root / "reasonrl").as_posix() for p in (root / "reasonrl").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]  # fmt: skip
    assert "recipes/distributed/slurm_multinode.sh" in data
    missing = [
        f
        for f in data
        if not any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/") for pat in patterns)
    ]
    assert missing == []


@pytest.mark.parametrize("command", ["train", "plan"])
def test_the_recipe_argument_help_names_every_shipped_recipe(command, capsys):
    from reasonrl.cli.main import build_parser
    from reasonrl.config import builtin_recipes

    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps at any space
    names = builtin_recipes()
    assert {"demo", "grpo", "dapo", "distributed/gpu1_qwen05b"} <= set(names)
    assert f"({', '.join(names)})" in text
