"""LUFFY's training data (Elliott/Openr1-Math-46k-8192, its `data/prepare_train.py` -> openr1.parquet):
verl rows (data_source, prompt, reward_model.ground_truth, extra_info) with a `target` column, the
demonstration (a list whose first message's content is DeepSeek-R1's reasoning trace, as LUFFY's dataset
reads it), which becomes `extra_info.response`: `algo.guidance` puts it in each group (docs/algorithms.md,
"Off-policy guidance"), and `algo.objective: sft` trains on it. A row whose data_source routes to no
verifier is routed to `math` (LUFFY scores its rows with math-verify), counted in the report; a row with no
target is an error naming the field (guidance needs one per row), or is kept without one with
`--option require_target=false` (for RL without guidance).
"""

from __future__ import annotations

from reasonrl.data.prepare import RowError, count, register
from reasonrl.types import Problem


def _trace(target) -> str:
    first = target[0] if isinstance(target, (list, tuple)) and len(target) else target
    content = first.get("content") if isinstance(first, dict) else first
    if not isinstance(content, str) or not content.strip():
        raise RowError("target", "must be a list of messages whose first has the demonstration's text "
                       f"(content), got {str(target)[:60]!r}")  # fmt: skip
    return content


@register("luffy", "Elliott/Openr1-Math-46k-8192 (LUFFY): verl rows + target (the demonstration, extra_info.response)",
          require_target=True)  # fmt: skip
def luffy(row: dict, ctx) -> Problem:
    from reasonrl.rewards.routing import verifier_name

    p = Problem.from_row(row, where="row")  # its message names the field (convert_rows adds file and row)
    target = row.get("target")
    if target is None or (isinstance(target, (list, tuple)) and not target):
        if ctx.options["require_target"]:
            raise RowError(
                "target", "missing (the demonstration; --option require_target=false keeps such rows)"
            )
    else:
        p.extra_info["response"] = _trace(target)
    try:
        verifier_name(p)
    except ValueError:
        p.data_source = "math"
        count(ctx, "routed to math")
    p.uid = f"luffy/{p.extra_info.get('index', ctx.index)}"
    return p
