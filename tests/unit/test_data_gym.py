"""reasoning-gym mixes and settings (`reasonrl.data.gym`): the weighted mix's parsing, `task.field=value`
settings and curriculum levels, each bad value refused with the setting named before anything is
generated; a level's settings reach the generated entries."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("reasoning_gym")

from reasonrl.data.gym import (  # noqa: E402
    curriculum_range,
    dataset_at,
    dataset_seed,
    generate,
    level_config,
    parse_mix,
    sweep,
    task_configs,
    task_hint,
)
from reasonrl.errors import InputError  # noqa: E402

MIX = [("leg_counting", 1.0)]


def test_a_mix_keeps_its_order_and_weights_with_one_as_the_default():
    assert parse_mix("basic_arithmetic:2.5, leg_counting ,,") == [
        ("basic_arithmetic", 2.5),
        ("leg_counting", 1.0),
    ]


@pytest.mark.parametrize(
    "spec, where, message",
    [
        ("leg_counting:x", "--tasks", "--tasks 'leg_counting:x': weight 'x' is not a number"),
        (" , ", "--tasks", "--tasks: give at least one reasoning-gym dataset, e.g. 'basic_arithmetic:2,leg_counting:1'"),
        ("leg_counting,leg_counting:2", "--tasks", "--tasks 'leg_counting,leg_counting:2': a dataset is named twice"),
        ("leg_countin:1", "mixture[0].reasoning_gym", "mixture[0].reasoning_gym: unknown reasoning-gym dataset "
         "'leg_countin' (did you mean 'leg_counting'?); known: "),
    ],
)  # fmt: skip
def test_a_bad_mix_is_refused_naming_the_setting(spec, where, message):
    with pytest.raises(InputError) as e:
        parse_mix(spec, where)
    assert str(e.value).startswith(message)
    assert message.endswith("known: ") or str(e.value) == message


@pytest.mark.parametrize(
    "setting",
    ["leg_counting", "leg_counting=3", "basic_arithmetic.min_terms=3", ".max_animals=3"],
)
def test_a_setting_not_of_the_form_task_field_value_for_a_task_in_the_mix_is_refused(setting):
    with pytest.raises(InputError) as e:
        task_configs(MIX, [setting])
    assert (
        str(e.value) == f"--config {setting!r}: expected TASK.FIELD=VALUE with TASK one of ['leg_counting']"
    )


def test_settings_are_json_values_and_later_ones_override_a_level():
    assert task_configs(MIX, ["leg_counting.max_animals=3"]) == {"leg_counting": {"max_animals": 3}}
    text = task_configs([("caesar_cipher", 1.0)], ["caesar_cipher.delimiter=."])  # not JSON: kept as text
    assert text == {"caesar_cipher": {"delimiter": "."}}
    cfg = task_configs(MIX, ["leg_counting.level=2", "leg_counting.max_animals=2"], where="curriculum")
    assert cfg == {"leg_counting": {**level_config("leg_counting", 2), "max_animals": 2}}
    assert level_config("leg_counting", 2)["max_animals"] == 3  # the override changed something


def test_a_level_sets_every_attribute_and_is_capped_at_each_attributes_top():
    # leg_counting: num_animals has 36 levels, num_instances 10 (2, 4, ..., 1024)
    assert level_config("leg_counting", 0) == {"min_animals": 1, "max_animals": 1, "min_instances": 2,
                                               "max_instances": 4}  # fmt: skip
    assert level_config("leg_counting", 3)["max_animals"] == 4
    high = level_config("leg_counting", 12)
    assert high["max_animals"] == 13 and high["max_instances"] == 1024  # instances capped at their top
    assert level_config("leg_counting", 500) == level_config("leg_counting", 35)
    assert curriculum_range("leg_counting") == 35 and level_config("leg_counting", 34) != level_config(
        "leg_counting", 35
    )
    assert curriculum_range("gsm_symbolic") is None


@pytest.mark.parametrize(
    "mix, setting, message",
    [
        (MIX, "leg_counting.level=-1", "--config 'leg_counting.level=-1': level must be >= 0, got -1"),
        (MIX, "leg_counting.level=x", "--config 'leg_counting.level=x': invalid literal for int() with base 10: 'x'"),
        ([("gsm_symbolic", 1.0)], "gsm_symbolic.level=1", "--config 'gsm_symbolic.level=1': gsm_symbolic has no curriculum"),
    ],
)  # fmt: skip
def test_a_bad_level_is_refused_naming_the_setting(mix, setting, message):
    with pytest.raises(InputError) as e:
        task_configs(mix, [setting])
    assert str(e.value) == message


def test_settings_the_task_refuses_are_caught_before_generation_naming_the_task():
    with pytest.raises(InputError) as e:
        task_configs(MIX, ["leg_counting.min_animals=5", "leg_counting.max_animals=2"])
    assert str(e.value) == "--config for leg_counting: max_animals must be >= min_animals"
    with pytest.raises(InputError) as e:
        task_configs(MIX, ["leg_counting.colour=3"], where="curriculum.fixed")
    assert str(e.value).startswith("curriculum.fixed for leg_counting: ")


def test_generated_entries_follow_the_level_and_the_seed():
    rows = generate("leg_counting", 6, 1, ["leg_counting.level=0"])
    metas = [json.loads(p.extra_info["entry"])["metadata"] for p in rows]
    assert all(m["num_animals"] == 1 for m in metas)  # level 0: one kind of animal
    assert [p.uid for p in rows] == [f"gym/1/{i}" for i in range(6)]
    assert {p.extra_info["task"] for p in rows} == {"leg_counting"}
    high = generate("leg_counting", 6, 1, ["leg_counting.level=20"])
    assert max(json.loads(p.extra_info["entry"])["metadata"]["num_animals"] for p in high) > 1
    # the user's seed is hashed before it reaches reasoning-gym; raw_seed passes it as it is
    assert dataset_seed(1) != 1
    raw = generate("leg_counting", 3, dataset_seed(1), raw_seed=True)
    assert [p.ground_truth for p in raw] == [p.ground_truth for p in generate("leg_counting", 3, 1)]
    with pytest.raises(InputError, match="^--size must be >= 1$"):
        generate("leg_counting", 0, 1)


def test_a_dataset_at_a_level_takes_the_fixed_settings_over_the_levels():
    at = dataset_at("leg_counting", 20, {"max_instances": 8}, seed=3, size=8)
    assert (at.config.max_animals, at.config.max_instances) == (21, 8)  # fixed over the level's 1024
    plain = dataset_at("leg_counting", None, {"max_instances": 8}, seed=3, size=8)
    assert plain.config.max_instances == 8 and plain.config.max_animals != 21  # no level: the defaults


def test_a_task_hint_names_reasoning_gym_datasets_only():
    assert (
        task_hint("leg_counting", "use --tasks") == "; 'leg_counting' is a reasoning-gym dataset: use --tasks"
    )
    assert task_hint("addsub", "use --tasks") == "" and task_hint("composite", "use --tasks") == ""


@pytest.mark.parametrize(
    "scores, failure",
    [
        (lambda text: 1.0, "row 0: reference / empty / wrong scored [1.0, 1.0, 1.0]"),  # takes anything
        (lambda text: 0.0, "row 0: reference / empty / wrong scored [0.0, 0.0, 0.0]"),  # takes nothing
        (lambda text: 0.0 if not text or "zzz" in text or "inf" in text.lower() or "999" in text else 1.0,
         "row 0: non-finite answers scored {'nan': 1.0, '-inf': 0.0, '1e999': 0.0, 'nan+nani': 1.0, 'Infinity': 0.0}"),  # takes NaN
    ],
)  # fmt: skip
def test_the_sweep_reports_a_verifier_that_can_be_fooled_or_refuses_the_reference(
    monkeypatch, scores, failure
):
    from reasonrl.rewards import VERIFIERS
    from reasonrl.types import RewardResult

    assert sweep(rows=2, names=["leg_counting"]) == {}  # the real verifier holds
    monkeypatch.setattr(VERIFIERS, "get", lambda name: lambda text, problem: RewardResult(scores(text)))
    assert sweep(rows=2, names=["leg_counting"]) == {"leg_counting": f"AssertionError: {failure}"}
