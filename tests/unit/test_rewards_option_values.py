"""Every verifier option's value is checked before any work: one of another kind than the option's
default (a text for a number, a number for true / false, a negative or non-finite number) is a
one-line error naming the option and the verifier, where it used to fail on the first sample (a
TypeError in the middle of a run) or pass silently (`partial: "false"` is true in Python)."""

from __future__ import annotations

import inspect

import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.base import check_setup

WRONG = {
    bool: ["false", 0, 1, None, [], 0.0],
    str: [0, None, True, ["any"], 1.5],
    int: ["3", 2.5, True, None, -1, float("nan"), []],
    float: ["0.1", True, None, -0.5, float("nan"), float("inf"), []],
}


def _typed_options():
    for name in VERIFIERS.names():
        for p in list(inspect.signature(VERIFIERS.get(name)).parameters.values())[2:]:
            if type(p.default) in WRONG:
                yield name, p.name, p.default


CASES = sorted(_typed_options())


def test_the_sweep_covers_the_typed_options_of_the_built_in_verifiers():
    got = {(n, k) for n, k, _ in CASES}
    for want in (("zebra", "partial"), ("table", "rel_tol"), ("overlong", "unit"), ("code", "timeout_s"),
                 ("math", "float_rounding"), ("ifeval", "loose"), ("reasoning_gym", "abs_tol")):  # fmt: skip
        assert want in got
    assert len(CASES) >= 20


def _required(name: str, tmp_path) -> dict:
    """The options a verifier cannot work without (the rest of each case is its default)."""
    if name == "reward_model":
        return {"path": "org/reward-model"}  # a hub id: read when it loads
    if name == "openrlhf_remote":
        return {"url": "http://127.0.0.1:9/get_reward"}
    if name == "trl_function":
        path = tmp_path / "trl_rewards.py"
        path.write_text("def f(completions, **kwargs):\n    return [0.0]\n")
        return {"functions": [f"{path}:f"]}
    if name not in ("verl_function", "openrlhf_function"):
        return {}
    path = tmp_path / "fn.py"
    path.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n"
        "def reward_func(queries, prompts, labels, **kwargs):\n    return {'rewards': [0.0]}\n"
    )
    return {"path": str(path)}


@pytest.mark.parametrize(("name", "key", "default"), CASES, ids=[f"{n}.{k}" for n, k, _ in CASES])
def test_an_option_of_the_wrong_kind_is_refused_naming_it(name, key, default, tmp_path):
    base = _required(name, tmp_path)
    check_setup(name, {**base, key: default})  # the default itself is fine
    if type(default) in (int, float):
        check_setup(name, {**base, key: type(default)(default)})
    for value in WRONG[type(default)]:
        with pytest.raises(ValueError) as e:
            check_setup(name, {**base, key: value})
        msg = str(e.value)
        assert "\n" not in msg and repr(value) in msg and key in msg, msg


def test_an_int_where_a_float_goes_is_fine_and_a_float_where_an_int_goes_is_not():
    check_setup("table", {"rel_tol": 0})
    check_setup("code", {"timeout_s": 3})
    with pytest.raises(
        ValueError, match=r"option 'memory_mb' of 'code' must be a whole number >= 0, got 512.5"
    ):
        check_setup("code", {"memory_mb": 512.5})
