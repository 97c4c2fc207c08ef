"""`reasonrl demo`'s built-in settings and recipes/demo.yaml describe the same run."""

from pathlib import Path

from reasonrl.cli.demo import DEMO
from reasonrl.config import load_config, to_dict

RECIPE = Path(__file__).parents[2] / "recipes" / "demo.yaml"


def test_demo_settings_equal_the_recipe():
    from_code = to_dict(load_config(None, DEMO + ["log.run_dir=runs/demo"]))
    from_recipe = to_dict(load_config(RECIPE))
    assert from_code == from_recipe
    assert from_code["train"]["steps"] == 900 and from_code["data"]["task"] == "addsub"
