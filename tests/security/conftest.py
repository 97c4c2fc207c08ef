"""Shared helpers for the sandbox containment suite: run a hostile program, find leftover processes.

Every test here runs one or more hostile programs through `rewards.sandbox.run_python` and asserts
containment from the host side. Without a working bwrap the suite is skipped locally and FAILS
under CI (env CI set), so a CI image without bubblewrap cannot pass silently.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from _hostile import SECRET_NAME, SECRET_VALUE


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.timeout(60))
            item.add_marker(pytest.mark.bwrap)  # skipped without bwrap locally, a failure under CI


@pytest.fixture(autouse=True)
def host_secret(monkeypatch):
    """A secret in the host environment that no sandboxed program may see."""
    monkeypatch.setenv(SECRET_NAME, SECRET_VALUE)
    return SECRET_VALUE


@pytest.fixture
def marker():
    """A unique string that hostile programs put in the argv of processes they try to leave behind."""
    return "reasonrl-marker-" + secrets.token_hex(8)
