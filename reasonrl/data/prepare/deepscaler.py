"""DeepScaleR (`agentica-org/DeepScaleR-Preview-Dataset`, `deepscaler.json`): `problem`, `answer`,
`solution` (may be empty). Some upstream rows have no answer: they fail (or are skipped with
--skip-bad-rows). data_source `math__deepscaler_preview` (Reasoning360's name)."""

from __future__ import annotations

from reasonrl.data.prepare import prompts, register, text
from reasonrl.types import Problem


@register("deepscaler", "agentica-org/DeepScaleR-Preview-Dataset: problem, answer, solution")
def deepscaler(row: dict, ctx) -> Problem:
    problem = text(row, "problem")
    return Problem(prompts.user(problem, prompts.MATH), text(row, "answer"), "math__deepscaler_preview", "math",
                   {"index": ctx.index, "original_question": problem}, uid=f"deepscaler/{ctx.index}")  # fmt: skip
