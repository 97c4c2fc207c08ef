"""MBPP (`google-research-datasets/mbpp`): config `full` (`task_id`, `text`, `code`, `test_list`,
`test_setup_code`, `challenge_test_list`) and `sanitized` (`prompt`, `code`, `test_imports`,
`test_list`). data_source `codegen__mbpp`; gold = the asserts (plus setup code / imports), run by the
code verifier's trusted driver; the prompt shows the asserts, as Reasoning360's does."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


@register("mbpp", "google-research-datasets/mbpp (full or sanitized): text/prompt, code, test_list")
def mbpp(row: dict, ctx) -> Problem:
    tests = plain(need(row, "test_list"))
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise RowError("test_list", "must be a non-empty list of assert statements")
    challenge = plain(row.get("challenge_test_list") or [])
    if not isinstance(challenge, list):
        raise RowError("challenge_test_list", "must be a list of assert statements")
    challenge = [t for t in challenge if isinstance(t, str) and t.strip()]
    setup = str(row.get("test_setup_code") or "")
    imports = plain(row.get("test_imports") or [])
    if imports:
        setup = "\n".join([*imports, setup]).strip()
    task = text(row, "text", "prompt")
    body = f"{task}\n\n{prompts.MBPP}\n{prompts.code_fence(chr(10).join(tests))}\n\n{prompts.MBPP_AFTER}"
    gold = {"test_list": tests + challenge, "test_setup_code": setup}
    task_id = row.get("task_id", ctx.index)
    extra = {"index": ctx.index, "task_id": str(task_id)}
    if row.get("code"):
        extra["reference"] = str(row["code"])
    return Problem(prompts.user(body), gold, "codegen__mbpp", "codegen", extra, uid=f"mbpp/{task_id}")
