"""MultiHiertt (the MultiHiertt release, JSON): `uid`, `paragraphs`, `tables` (HTML), `qa`
{`question`, `answer`, `text_evidence`, ...}. As Reasoning360 does, questions whose evidence
includes text are dropped (counted; option keep_text_evidence=true keeps them with the paragraphs);
HTML tables become markdown (cells spanning columns repeated). data_source `table__multihier`."""

from __future__ import annotations

from html.parser import HTMLParser

from reasonrl.data.prepare import RowError, need, prompts, register
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell, self._span = [], max(1, int(dict(attrs).get("colspan") or 1))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            if not self.rows:
                self.rows.append([])
            self.rows[-1].extend([" ".join("".join(self._cell).split())] * self._span)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_table(html: str) -> list[list[str]]:
    parser = _Cells()
    parser.feed(html)
    return [r for r in parser.rows if r]


@register("multihiertt", "MultiHiertt JSON: uid, paragraphs, tables (HTML), qa {question, answer, text_evidence}",
          keep_text_evidence=False)  # fmt: skip
def multihiertt(row: dict, ctx) -> Problem | None:
    qa = plain(need(row, "qa"))
    if not isinstance(qa, dict) or not str(qa.get("question") or "").strip() or qa.get("answer") is None:
        raise RowError("qa", "must hold question and answer")
    if plain(qa.get("text_evidence")) and not ctx.options["keep_text_evidence"]:
        return None
    tables = [html_table(str(t)) for t in plain(need(row, "tables"))]
    if not tables or not all(tables):
        raise RowError("tables", "must be a list of non-empty HTML tables")
    parts = [prompts.TABLE_PREAMBLE, *(prompts.markdown_table(t) for t in tables)]
    if ctx.options["keep_text_evidence"]:
        parts.append("\n".join(str(p) for p in plain(row.get("paragraphs") or [])))
    parts.append(f"The question is: {str(qa['question']).strip()}")
    uid = str(row.get("uid") or ctx.index)
    return Problem(prompts.user("\n\n".join(p for p in parts if p.strip()), prompts.TABLE), str(qa["answer"]),
                   "table__multihier", "table", {"index": ctx.index}, uid=f"multihiertt/{uid}")  # fmt: skip
