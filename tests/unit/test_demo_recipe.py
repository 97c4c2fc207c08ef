"""`reasonrl demo` runs recipes/demo.yaml, which ships inside the package (the repository's recipes/
directory links to it)."""

from pathlib import Path

from reasonrl.cli.demo import RECIPE
from reasonrl.config import load_config, to_dict

REPO_RECIPES = Path(__file__).parents[2] / "recipes"


def test_demo_runs_the_packaged_recipe_which_is_the_repository_one():
    assert RECIPE.is_file() and RECIPE.parent.name == "recipes" and RECIPE.parent.parent.name == "reasonrl"
    assert (REPO_RECIPES / "demo.yaml").resolve() == RECIPE.resolve()
    cfg = to_dict(load_config(RECIPE))
    assert cfg["train"]["steps"] == 900 and cfg["data"]["task"] == "addsub"
    assert cfg["model"]["path"] == "demo:addsub" and cfg["rollout"]["n"] == 8
