"""AReaL-boba (`inclusionAI/AReaL-boba-Data`, `AReaL-boba-106k.jsonl`): `prompt` already rendered
for DeepSeek-R1-Distill (`<｜User｜>... <｜Assistant｜><think>\\n`), `task` ("math"), `query_id`,
`solutions` (["\\boxed{x}", ...]). The prompt is kept as it is with `apply_chat_template: false`
(as RLinf reads it), so it is tokenised without the model's template; gold = the first solution's
boxed content. data_source `math__areal_boba`."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, register, text
from reasonrl.rewards.extract import last_boxed
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


@register("areal", "inclusionAI/AReaL-boba-Data jsonl: prompt (templated), task, query_id, solutions")
def areal(row: dict, ctx) -> Problem:
    task = str(row.get("task") or "math")
    if task != "math":
        raise RowError("task", f"{task!r} is not supported (only math rows are converted)")
    solutions = plain(need(row, "solutions"))
    if isinstance(solutions, str):
        solutions = [solutions]
    if not isinstance(solutions, list) or not solutions:
        raise RowError("solutions", "must be a non-empty list of solutions")
    if not isinstance(solutions[0], (str, int, float)) or isinstance(solutions[0], bool):
        raise RowError("solutions", "first solution has no answer")
    first = str(solutions[0])
    gold = last_boxed(first) or first.strip()
    if not gold:
        raise RowError("solutions", "first solution has no answer")
    qid = str(row.get("query_id") or ctx.index)
    return Problem([{"role": "user", "content": text(row, "prompt")}], gold, "math__areal_boba", "math",
                   {"index": ctx.index, "query_id": qid}, uid=f"areal/{qid}", apply_chat_template=False)  # fmt: skip
