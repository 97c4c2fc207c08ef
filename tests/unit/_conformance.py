"""Shared pieces of the conformance tests (third-party cases in shared/conformance/, see its README).

Owns: where the case files live (`CONFORMANCE_DIR`: `shared/` sits beside the repo), reading a jsonl
file into numbered rows, and the agreement check (floor, new and stale disagreements). Does not own:
running any verifier, the per-suite option mapping or the KNOWN lists (each test file keeps its own).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

CONFORMANCE_DIR = Path(__file__).parents[2].parent / "shared" / "conformance"


# a plausible wrong answer of the right type (not a crash), for wrapping an entry point's result
PERTURB = """

def __reasonrl_perturb(r):
    if isinstance(r, bool):
        return not r
    if isinstance(r, (int, float)):
        return r + 1
    if isinstance(r, str):
        return r + "x"
    if isinstance(r, tuple):
        return r + (None,)
    if isinstance(r, list):
        return r + [None]
    return None
"""


def case_file(name: str) -> Path:
    """CONFORMANCE_DIR/name. Missing: the calling module is skipped with a message naming the file,
    except under CI=true, where it fails loudly (CI always has ../shared beside the clone)."""
    path = CONFORMANCE_DIR / name
    if not path.exists():
        msg = f"conformance cases not found at {path} (the project's shared/ folder must sit beside the repo)"
        if os.environ.get("CI", "").lower() == "true":
            raise FileNotFoundError(msg)
        pytest.skip(msg, allow_module_level=True)
    return path


def numbered_rows(name: str) -> list[tuple[str, dict]]:
    """("line N", row) for every non-blank line of CONFORMANCE_DIR/name (N 1-based); skip if missing."""
    lines = case_file(name).read_text(encoding="utf-8").splitlines()
    return [(f"line {n}", json.loads(s)) for n, s in enumerate(lines, 1) if s.strip()]


def assert_agreement(
    disagree: dict[str, str], total: int, known: dict[str, str], floor: float = 0.95
) -> None:
    """Agreement >= floor, no disagreement outside `known`, and no `known` entry that now agrees."""
    agreement = 1 - len(disagree) / total
    assert agreement >= floor, f"agreement {agreement:.3f}"
    new = {k: v for k, v in disagree.items() if k not in known}
    fixed = sorted(set(known) - set(disagree))
    assert not new, f"new disagreements: {new}"
    assert not fixed, f"listed disagreements now agree (remove them from KNOWN): {fixed}"
