"""Our "reasoning_gym" verifier against reasoning-gym's scoring tests
(shared/conformance/reasoning_gym_scoring_cases.jsonl).

The rows name no task, so the verifier uses its lenient fallback (`gym.lenient_match`), which follows
reasoning-gym's documented policy (case-insensitive string match, float match with rel_tol / abs_tol
0.01, LaTeX-stripped match). A `rel_tol=` in the upstream harness is passed as our option. Agreement
must stay >= 95%; every disagreement is listed in KNOWN and the list must stay exact.
"""

from __future__ import annotations

import re

import pytest
from _conformance import assert_agreement, numbered_rows

from reasonrl.rewards import VERIFIERS
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(120)

CASES = "reasoning_gym_scoring_cases.jsonl"

KNOWN: dict[str, str] = {
    "line 6": "empty answer vs empty gold: upstream string_match says equal; an empty response is "
    "'no_answer' (0) for us, so a model can never be rewarded for saying nothing",
}


def test_reasoning_gym_scoring_conformance():
    verifier = VERIFIERS.get("reasoning_gym")
    rows = numbered_rows(CASES)
    assert len(rows) == 22
    disagree = {}
    for case_id, row in rows:
        opts = {}
        m = re.search(r"rel_tol=([0-9.]+)", row["config"]["harness"])
        if m:
            opts["rel_tol"] = float(m.group(1))
        problem = Problem(
            prompt=[{"role": "user", "content": "q"}], ground_truth=row["gold"], data_source="reasoning_gym"
        )
        got = verifier(row["pred"], problem, **opts)
        assert got.info.get("scorer", "lenient") == "lenient" or got.reason == "no_answer"
        if (got.score == 1.0) != row["expected"]:
            disagree[case_id] = f"expected {row['expected']}, got {got.info}"
    assert_agreement(disagree, len(rows), KNOWN)
