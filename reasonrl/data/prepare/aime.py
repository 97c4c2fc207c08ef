"""AIME (`HuggingFaceH4/aime_2024`: `id`, `problem`, `answer`; `Maxwell-Jia/AIME_2024`: `ID`,
`Problem`, `Answer`; `yentinglin/aime_2025`, `math-ai/aime25`, `opencompass/AIME2025`:
`problem` / `question`, `answer`): integer answers in \\boxed{}, data_source `aime<year>` (option
`year`, else the row's `year`, else plain `aime`), scored by the math verifier."""

from __future__ import annotations

from reasonrl.data.prepare import InputError, RowError, prompts, register, text
from reasonrl.types import Problem


@register("aime", "HuggingFaceH4/aime_2024, yentinglin/aime_2025, ...: id, problem, answer", year=None)
def aime(row: dict, ctx) -> Problem:
    year = ctx.options["year"] or row.get("year")
    if year and (isinstance(year, bool) or not str(year).strip().isdigit()):
        if ctx.options["year"]:
            raise InputError(f"converter aime: option year must be a year such as 2024, got {year!r}")
        raise RowError("year", f"must be a year such as 2024, got {year!r}")
    name = f"aime{str(year)[-2:]}" if year else "aime"
    gold = text(row, "answer", "Answer")
    uid = row.get("id", row.get("ID", ctx.index))
    extra = {"index": ctx.index, **({"year": int(str(year))} if year else {})}
    return Problem(prompts.user(text(row, "problem", "Problem", "question"), prompts.MATH), gold, name, "math",
                   extra, uid=f"{name}/{uid}")  # fmt: skip
