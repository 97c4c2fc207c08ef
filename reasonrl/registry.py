"""A tiny name -> function registry, used only at the real seams of the system.

Owns: registration, lookup with an error that lists the known names, and checking keyword options
against a registered function's signature (so a typo in a recipe fails when the config loads).
Does not own: what the registered functions do, or which registries exist (each seam declares its own:
`rewards.base.VERIFIERS`, `algorithms.advantages.ADVANTAGES`, `algorithms.losses.POLICY_LOSSES`, ...).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class RegistryError(KeyError):
    """Unknown name or bad options for a registry entry. The message names the valid choices."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class Registry(Generic[F]):
    """Maps names to functions of one signature.

    >>> R = Registry("toy"); R.register("a")(len); R.get("a")("xy")
    2
    """

    def __init__(self, kind: str, positional: int = 0):
        self.kind = kind
        # number of leading positional parameters every entry takes (not configurable options)
        self.positional = positional
        self._entries: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            if name in self._entries and self._entries[name] is not fn:
                raise RegistryError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = fn
            return fn

        return deco

    def get(self, name: str) -> F:
        try:
            return self._entries[name]
        except KeyError:
            raise RegistryError(
                f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self._entries)) or '(none)'}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)

    def options(self, name: str) -> dict[str, inspect.Parameter]:
        """Keyword options of an entry (its parameters after the positional ones)."""
        params = list(inspect.signature(self.get(name)).parameters.values())
        return {
            p.name: p
            for p in params[self.positional :]
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        }

    def check_kwargs(self, name: str, kwargs: Iterable[str], where: str = "") -> None:
        """Raise RegistryError if any of `kwargs` is not an option of entry `name`."""
        fn = self.get(name)
        accepts_any = any(
            p.kind == inspect.Parameter.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()
        )
        if accepts_any:
            return
        valid = self.options(name)
        bad = [k for k in kwargs if k not in valid]
        if bad:
            loc = f"{where}: " if where else ""
            raise RegistryError(
                f"{loc}{self.kind} {name!r} has no option(s) {', '.join(map(repr, bad))}; "
                f"valid: {', '.join(valid) or '(none)'}"
            )
