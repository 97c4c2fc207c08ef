"""DAPO-Math-17k (`BytedTsinghua-SIA/DAPO-Math-17k`): verl rows already (data_source `math_dapo`,
the "Answer: $Answer" wrapper prompt, `reward_model.ground_truth`, `extra_info.index`). The released
file repeats one 17,917-row block 100 times: rows whose whitespace-normalised prompt was already
seen are dropped (counted in the report); a repeat with a different answer is dropped too and
counted as a conflict (`conflicts` in the report). The prompt is kept as DAPO wrote it; the math
verifier reads its "Answer: x" line."""

from __future__ import annotations

from reasonrl.data.prepare import count, register
from reasonrl.types import Problem


@register("dapo", "BytedTsinghua-SIA/DAPO-Math-17k: verl rows (prompt, reward_model, extra_info.index)")
def dapo(row: dict, ctx) -> Problem | None:
    p = Problem.from_row(row, where="row")  # its message names the field (convert_rows adds file and row)
    key = " ".join(p.user_text.split())
    seen = ctx.state.setdefault("seen", {})
    if key in seen:
        if seen[key] != str(p.ground_truth):
            count(ctx, "conflicts")
        return None
    seen[key] = str(p.ground_truth)
    p.data_source = p.data_source or "math_dapo"
    p.uid = f"dapo/{p.extra_info.get('index', ctx.index)}"
    return p
