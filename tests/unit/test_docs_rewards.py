"""docs/rewards.md stays true: every routing prefix and every registered verifier is documented."""

from __future__ import annotations

from pathlib import Path

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.routing import PREFIXES

DOC = (Path(__file__).parents[2] / "docs" / "rewards.md").read_text()


def test_every_prefix_is_in_the_routing_table_with_its_verifier():
    for prefix, name in PREFIXES:
        assert f"| `{prefix}` | {name} |" in DOC, prefix


def test_every_built_in_verifier_is_documented():
    built_in = [n for n in VERIFIERS.names() if VERIFIERS.get(n).__module__.startswith("reasonrl.")]
    assert len(built_in) >= 15
    for name in built_in:  # (other tests register verifiers of their own)
        assert name in DOC, name
