"""Guru / Reasoning360 files (`LLM360/guru-RL-92k`, both packagings): verl rows passed through and
validated: the compressed `extra_info` / `ground_truth` form is decoded (`data.schema`), test-case
fields kept, and every row must route to a verifier by its data_source (checked by the driver)."""

from __future__ import annotations

from reasonrl.data.prepare import register
from reasonrl.data.schema import decode_guru_row
from reasonrl.types import Problem


@register("guru", "LLM360/guru-RL-92k parquet (plain or extra-info-compressed): verl rows")
def guru(row: dict, ctx) -> Problem:
    p = Problem.from_row(decode_guru_row(row, "row"), where="row")
    if p.extra_info.pop("ground_truth_json", False) and isinstance(p.ground_truth, str):
        import json

        p.ground_truth = json.loads(p.ground_truth)
    p.uid = p.uid or f"{p.data_source}/{ctx.index}"
    return p
