"""MultiHiertt (the MultiHiertt release, JSON): `uid`, `paragraphs`, `tables` (HTML), `qa`
{`question`, `answer`, `text_evidence`, ...}. As Reasoning360 does, questions whose evidence
includes text are dropped (counted; option keep_text_evidence=true keeps them with the paragraphs);
HTML tables become markdown (cells spanning columns repeated). data_source `table__multihier`."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register
from reasonrl.rewards.ground_truth import plain
from reasonrl.rewards.verifiers.livebench import html_rows
from reasonrl.types import Problem


@register("multihiertt", "MultiHiertt JSON: uid, paragraphs, tables (HTML), qa {question, answer, text_evidence}",
          keep_text_evidence=False)  # fmt: skip
def multihiertt(row: dict, ctx) -> Problem | None:
    qa = plain(need(row, "qa"))
    if not isinstance(qa, dict) or not str(qa.get("question") or "").strip() or qa.get("answer") is None:
        raise RowError("qa", "must hold question and answer")
    if plain(qa.get("text_evidence")) and not ctx.options["keep_text_evidence"]:
        return None
    tables = plain(need(row, "tables"))
    tables = [html_rows(str(t)) for t in tables] if isinstance(tables, list) else []
    if not tables or not all(tables):
        raise RowError("tables", "must be a list of non-empty HTML tables")
    parts = [prompts.TABLE_PREAMBLE, *(prompts.markdown_table(t) for t in tables)]
    if ctx.options["keep_text_evidence"]:
        parts.append("\n".join(str(p) for p in plain(row.get("paragraphs") or [])))
    parts.append(f"The question is: {str(qa['question']).strip()}")
    uid = str(row.get("uid") or ctx.index)
    return Problem(prompts.user("\n\n".join(p for p in parts if p.strip()), prompts.TABLE), str(qa["answer"]),
                   "table__multihier", "table", {"index": ctx.index}, uid=f"multihiertt/{uid}")  # fmt: skip
