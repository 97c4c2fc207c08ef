"""HiTab (microsoft/HiTab raw release): question rows (`id`, `question`, `answer` list,
`aggregation`, `table_id`) with the table either inline (`table` / `texts`: a cell matrix) or in
`<tables_dir>/<table_id>.json` (its `texts`; option tables_dir). data_source `table__hitab`; gold =
the answers joined by `|` (the table verifier matches them one-to-one)."""

from __future__ import annotations

import json
from pathlib import Path

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


def _table(row: dict, tables_dir: str | None) -> list[list]:
    table = plain(row.get("table", row.get("texts")))
    if table is None and row.get("table_id") is not None:
        if not tables_dir:
            raise RowError("table", "missing (the row names table_id: pass --option tables_dir=DIR)")
        path = Path(tables_dir) / f"{row['table_id']}.json"
        if not path.is_file():
            raise RowError("table_id", f"table file {path} not found")
        table = json.loads(path.read_text(encoding="utf-8")).get("texts")
    if isinstance(table, dict):
        table = table.get("texts")
    if not isinstance(table, list) or not table or not all(isinstance(r, list) for r in table):
        raise RowError("table", "must be a matrix of cells")
    return table


@register("hitab", "microsoft/HiTab: id, question, answer (list), table / table_id", tables_dir=None)
def hitab(row: dict, ctx) -> Problem:
    answers = plain(need(row, "answer"))
    answers = answers if isinstance(answers, list) else [answers]
    if not answers:
        raise RowError("answer", "is empty")
    body = f"{prompts.TABLE_PREAMBLE}\n\n{prompts.markdown_table(_table(row, ctx.options['tables_dir']))}\n\n" \
        f"The question is: {text(row, 'question')}"  # fmt: skip
    gold = "|".join(str(a) for a in answers)
    uid = str(row.get("id") or ctx.index)
    extra = {"index": ctx.index, "aggregation": json.dumps(plain(row.get("aggregation")))}
    return Problem(
        prompts.user(body, prompts.TABLE), gold, "table__hitab", "table", extra, uid=f"hitab/{uid}"
    )
