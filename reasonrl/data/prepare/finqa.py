"""FinQA (`nanoverl/finqa` / the FinQA release): `pre_text` (list of sentences), `table` (cell
matrix), `post_text`, `question`, `answer`. data_source `table__finqa`; the table verifier compares
numbers with a tolerance (percent forms included)."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


def _lines(x) -> str:
    x = plain(x)
    return "\n".join(str(s) for s in x) if isinstance(x, list) else str(x or "")


@register("finqa", "nanoverl/finqa: pre_text, table, post_text, question, answer")
def finqa(row: dict, ctx) -> Problem:
    table = plain(need(row, "table"))
    if not isinstance(table, list) or not table or not all(isinstance(r, list) for r in table):
        raise RowError("table", "must be a matrix of cells")
    body = "\n\n".join(s for s in (_lines(row.get("pre_text")), prompts.markdown_table(table),
                                   _lines(row.get("post_text")), f"Question: {text(row, 'question')}") if s.strip())  # fmt: skip
    gold = text(row, "answer")
    uid = str(row.get("id") or ctx.index)
    return Problem(prompts.user(body, prompts.FINQA), gold, "table__finqa", "table", {"index": ctx.index},
                   uid=f"finqa/{uid}")  # fmt: skip
