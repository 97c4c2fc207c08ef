"""Helpers for the sandbox containment suite (imported by conftest.py and the test modules)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

SECRET_NAME = "REASONRL_SECURITY_TEST_SECRET"
SECRET_VALUE = "s3cr3t-" + secrets.token_hex(12)
REPO_ROOT = Path(__file__).resolve().parents[2]


def processes_with(text: str) -> list[int]:
    """Host pids whose command line contains `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if text.encode() in cmdline and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def assert_no_survivors(text: str, grace_s: float = 3.0) -> None:
    """No process whose argv contains `text` is alive (zombies are allowed a short grace period)."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = [p for p in processes_with(text) if _state(p) not in ("Z", "X", None)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert alive == [], f"processes survived the sandbox run: {alive}"


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def outcome_program(body: str) -> str:
    """Wrap `body` so the program prints the exception class name (or its own output)."""
    indented = "\n".join("    " + line for line in body.splitlines())
    return f"try:\n{indented}\nexcept Exception as e:\n    print(type(e).__name__)\n"
