"""ZebraLogic (`allenai/ZebraLogicBench-private`, config grid_mode): `id`, `size` ("NxM"), `puzzle`,
`solution` {"header": [...], "rows": [[...]]}. data_source `logic__zebra_puzzle_dataset`; the
zebra verifier gives the fraction of correct cells (Reasoning360's partial credit)."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import decoded
from reasonrl.types import Problem


@register(
    "zebralogic", "allenai/ZebraLogicBench-private grid_mode: id, size, puzzle, solution {header, rows}"
)
def zebralogic(row: dict, ctx) -> Problem:
    sol = decoded(need(row, "solution"))
    if (
        not isinstance(sol, dict)
        or not isinstance(sol.get("header"), list)
        or not isinstance(sol.get("rows"), list)
    ):
        raise RowError("solution", "must be {'header': [...], 'rows': [[...], ...]}")
    if not sol["rows"] or any(not isinstance(r, list) or len(r) != len(sol["header"]) for r in sol["rows"]):
        raise RowError("solution", "every row must be a list of one value per header column")
    gold = {"header": [str(h) for h in sol["header"]], "rows": [[str(c) for c in r] for r in sol["rows"]]}
    pid = str(row.get("id") or ctx.index)
    extra = {"index": ctx.index, "id": pid, "grid_size": str(row.get("size") or "")}
    return Problem(prompts.user(text(row, "puzzle"), prompts.ZEBRA), gold, "logic__zebra_puzzle_dataset",
                   "logical_reasoning", extra, uid=f"zebralogic/{pid}")  # fmt: skip
