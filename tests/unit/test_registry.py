"""Registry: lookup errors list the known names; keyword options are checked against signatures."""

from __future__ import annotations

import pytest

from reasonrl.registry import Registry, RegistryError


def _make() -> Registry:
    reg: Registry = Registry("widget", positional=2)

    @reg.register("alpha")
    def alpha(x, y, scale: float = 1.0, shift: float = 0.0):
        return (x + y) * scale + shift

    @reg.register("beta")
    def beta(x, y, *extra, power: int = 2):
        return (x - y) ** power

    @reg.register("gamma")
    def gamma(x, y, **anything):
        return x * y

    return reg


def test_get_returns_the_registered_function():
    reg = _make()
    assert reg.get("alpha")(2, 3, scale=2.0, shift=1.0) == 11.0
    assert reg.get("beta")(5, 2) == 9
    assert "alpha" in reg and "delta" not in reg
    assert reg.names() == ["alpha", "beta", "gamma"]


def test_unknown_name_lists_known_names_sorted():
    reg = _make()
    with pytest.raises(RegistryError) as e:
        reg.get("alpah")
    assert str(e.value) == "unknown widget 'alpah'; known: alpha, beta, gamma"


def test_empty_registry_says_none():
    with pytest.raises(RegistryError) as e:
        Registry("thing").get("x")
    assert str(e.value) == "unknown thing 'x'; known: (none)"


def test_registry_error_is_a_key_error_with_plain_message():
    err = RegistryError("plain message")
    assert isinstance(err, KeyError)
    assert str(err) == "plain message"  # KeyError would have quoted it


def test_duplicate_name_rejected_but_same_function_is_idempotent():
    reg = _make()
    alpha = reg.get("alpha")
    assert reg.register("alpha")(alpha) is alpha
    with pytest.raises(RegistryError, match="widget 'alpha' is already registered"):
        reg.register("alpha")(lambda x, y: 0)
    assert reg.get("alpha") is alpha


def test_options_skip_positional_and_varargs():
    reg = _make()
    assert list(reg.options("alpha")) == ["scale", "shift"]
    assert list(reg.options("beta")) == ["power"]
    assert list(reg.options("gamma")) == []
    assert reg.options("alpha")["scale"].default == 1.0


CHECK_ROWS = [
    # (entry, kwargs, error text or None)
    ("alpha", {}, None),
    ("alpha", {"scale": 2}, None),
    ("alpha", {"scale": 2, "shift": 1}, None),
    ("alpha", {"scael": 2}, "in algo: widget 'alpha' has no option(s) 'scael'; valid: scale, shift"),
    ("alpha", {"x": 1}, "has no option(s) 'x'"),  # a positional parameter is not an option
    ("alpha", {"scale": 1, "a": 1, "b": 2}, "has no option(s) 'a', 'b'"),
    ("beta", {"power": 3}, None),
    ("beta", {"extra": 1}, "widget 'beta' has no option(s) 'extra'; valid: power"),
    ("gamma", {"whatever": 1, "more": 2}, None),  # **kwargs accepts anything
    ("delta", {}, "unknown widget 'delta'; known: alpha, beta, gamma"),
]


@pytest.mark.parametrize("name,kwargs,error", CHECK_ROWS)
def test_check_kwargs(name, kwargs, error):
    reg = _make()
    if error is None:
        reg.check_kwargs(name, kwargs, where="in algo")
        return
    with pytest.raises(RegistryError) as e:
        reg.check_kwargs(name, kwargs, where="in algo")
    assert error in str(e.value)


def test_check_kwargs_without_where_has_no_prefix():
    with pytest.raises(RegistryError) as e:
        _make().check_kwargs("alpha", ["bad"])
    assert str(e.value) == "widget 'alpha' has no option(s) 'bad'; valid: scale, shift"


def test_real_registries_reject_typos():
    from reasonrl.algorithms import ADVANTAGES, POLICY_LOSSES
    from reasonrl.rewards.base import VERIFIERS

    ADVANTAGES.check_kwargs("grpo", {"scale_by_std": False})
    with pytest.raises(RegistryError, match="'scale_by_sd'"):
        ADVANTAGES.check_kwargs("grpo", {"scale_by_sd": False})
    POLICY_LOSSES.check_kwargs("ppo_clip", {"clip_low": 0.1, "clip_high": 0.3})
    with pytest.raises(RegistryError, match="'clip'"):
        POLICY_LOSSES.check_kwargs("ppo_clip", {"clip": 0.2})
    with pytest.raises(RegistryError) as e:
        VERIFIERS.get("arithmetc")
    assert "arithmetic" in str(e.value) and "countdown" in str(e.value)
