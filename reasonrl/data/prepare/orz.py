"""Open-Reasoner-Zero (`data/orz_math_57k_collected.json` and its siblings in the ORZ repository):
a JSON list of two-message conversations, `[{"from": "human", "value": problem}, {"from":
"assistant", "ground_truth": {"value": answer}}]`. data_source `math__orz`."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, prompts, register
from reasonrl.types import Problem


def _turns(row: dict) -> list:
    turns = row.get("conversations")
    if not isinstance(turns, list):
        raise RowError("0", "expected a [human, assistant] message pair")
    return turns


@register(
    "orz",
    "Open-Reasoner-Zero orz_math_*.json: [[{from: human, value}, {from: assistant, ground_truth: {value}}]]",
)
def orz(row, ctx) -> Problem:
    turns = _turns(row)
    if len(turns) < 2 or not all(isinstance(t, dict) for t in turns[:2]):
        raise RowError("0", "expected a [human, assistant] message pair")
    problem = str(turns[0].get("value") or "").strip()
    gt = turns[1].get("ground_truth")
    gold = gt.get("value") if isinstance(gt, dict) else None
    if not problem:
        raise RowError("0.value", "missing problem text")
    if gold is None or not str(gold).strip():
        raise RowError("1.ground_truth.value", "missing answer")
    return Problem(prompts.user(problem, prompts.MATH), str(gold).strip(), "math__orz", "math",
                   {"index": ctx.index, "original_question": problem}, uid=f"orz/{ctx.index}")  # fmt: skip
