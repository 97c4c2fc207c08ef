"""A user's Python code named in a recipe: a function from a file (`path.py`, `path.py:name`) or an import
path (`package.module.function`), as reward functions (`verl_function`, `openrlhf_function`,
`trl_function`) and tools (`rollout.tools.functions`) are named.

Owns: importing a file once per process and file version (`load_function`), resolving an import path
with the working directory on `sys.path`, as TRL imports its `--reward_funcs` (`load_callable`), and
running what an async function returned to its end (`awaited`), whether a module is installed (`installed`) and a
stand-in for one that is not (`stand_in`: a user's class written against verl or OpenRLHF gets its base), and
the entry of a file listing the user's classes or servers (`listed_in`: verl's tool and interaction configs,
an MCP servers file).
Does not own: calling them (the verifiers, `rollout.function_tools`) or their time limits.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

_loaded: dict[tuple[str, int], Any] = {}  # (resolved path, mtime_ns) -> module


def load_function(path: str, name: str = "compute_score"):
    """The function `name` of the Python file `path` (imported once per process and file version);
    ValueError naming the file and what is wrong."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path {path!r}: no such file")
    file = file.resolve()
    key = (str(file), file.stat().st_mtime_ns)
    if key not in _loaded:
        tag = hashlib.sha1(key[0].encode()).hexdigest()[:10]
        spec = importlib.util.spec_from_file_location(f"reasonrl_verl_fn_{tag}", file)
        if spec is None or spec.loader is None:
            raise ValueError(f"path {path!r}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # the user's file: its own error, named, once
            raise ValueError(f"path {path!r}: importing it failed ({type(e).__name__}: {e})") from None
        _loaded[key] = module
    fn = getattr(_loaded[key], name, None)
    if not callable(fn):
        raise ValueError(f"path {path!r} defines no function {name!r}")
    return fn


def load_callable(spec: str):
    """The function `spec` names: `path.py:name` (a file) or `module.function` (imported with the working
    directory on `sys.path`); ValueError naming the spec and what is wrong."""
    if ":" in spec:
        path, name = spec.rsplit(":", 1)
        return load_function(path, name)
    if "." not in spec:
        raise ValueError(
            f"{spec!r} is neither an import path (module.function) nor a file (path.py:function)"
        )
    module, name = spec.rsplit(".", 1)
    if os.getcwd() not in sys.path:  # TRL imports a reward function's module from the working directory
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), name, None)
    except Exception as e:  # the user's module: its own error, named
        raise ValueError(f"{spec!r}: importing {module} failed ({type(e).__name__}: {e})") from None
    if not callable(fn):
        raise ValueError(f"{spec!r}: {module} defines no function {name!r}")
    return fn


def installed(name: str) -> bool:
    """Whether module `name` can be imported (a directory of its package's name in the working directory, a
    namespace package without it, is not it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def stand_in(module: str, classes: list) -> None:
    """Register `module` (dotted, with its parent packages) holding `classes`, where it is not installed: the
    base classes a user's file written for another trainer imports (OpenRLHF's agent bases, verl's
    BaseInteraction), so the file runs without that trainer."""
    import importlib.machinery
    import types

    if module in sys.modules or installed(module):
        return
    parts = module.split(".")
    names = [".".join(parts[: i + 1]) for i in range(len(parts))]
    for name in names:
        if name != module and name in sys.modules:  # a package another stand-in (or the trainer) made
            continue
        made = types.ModuleType(name)
        made.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=name != module)
        if name != module:
            made.__path__ = []
        sys.modules[name] = made
    for parent, child in zip(names, names[1:]):
        setattr(sys.modules[parent], child.rsplit(".", 1)[1], sys.modules[child])
    for cls in classes:
        setattr(sys.modules[module], cls.__name__, cls)


def awaited(value):
    """`value`, or what it gives once awaited when a coroutine function returned it (an async reward function
    or tool, which TRL awaits on its event loop): run to its end here."""
    import asyncio
    import inspect

    if not inspect.isawaitable(value):
        return value

    async def wait():
        return await value

    return asyncio.run(wait())


def listed_in(path: str, key: str, what: str):
    """The value at `key` of the YAML (or JSON) file `path` (a file listing a user's classes or servers), or
    ValueError naming the file: missing, not `what` (unreadable), or without a non-empty `key`."""
    import yaml

    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        got = (yaml.safe_load(file.read_text(encoding="utf-8")) or {}).get(key)
    except (yaml.YAMLError, AttributeError) as e:
        raise ValueError(f"{path}: not {what} ({str(e).splitlines()[0]})") from None
    if not got:
        raise ValueError(f"{path}: no {key!r} entry")
    return got
