"""MATH (`hendrycks/competition_math`, `DigitalLearningGmbH/MATH-lighteval`: `problem`, `solution`,
`level`, `type`; the gold is the last `\\boxed{}` of the solution) and MATH-500
(`HuggingFaceH4/MATH-500`: `problem`, `answer`, `subject`, `level`, `unique_id`): boxed answers,
data_source `math__math` (Reasoning360's name for its MATH eval set), scored by the math verifier."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, prompts, register, text
from reasonrl.rewards.extract import last_boxed
from reasonrl.types import Problem


@register(
    "math", "HuggingFaceH4/MATH-500 (problem, answer, unique_id) or MATH (problem, solution with \\boxed{})"
)
def math(row: dict, ctx) -> Problem:
    problem = text(row, "problem", "question")
    if row.get("answer") is not None and str(row["answer"]).strip():
        gold = str(row["answer"]).strip()
    else:
        gold = last_boxed(text(row, "solution")) or ""
        if not gold.strip():
            raise RowError("solution", "has no \\boxed{} answer (and there is no 'answer' field)")
    uid = row.get("unique_id") or row.get("id") or ctx.index
    extra = {k: row[k] for k in ("subject", "type", "level") if row.get(k) is not None}
    extra["index"] = ctx.index
    return Problem(prompts.user(problem, prompts.MATH), gold, "math__math", "math", extra, uid=f"math/{uid}")
