"""LiveBench (`livebench/reasoning`, `livebench/language`, `livebench/data_analysis`, split test):
`question_id`, `category`, `task`, `turns` (one user turn), `ground_truth`, `release_date`. As
Reasoning360's `ood__livebench`: single-turn rows, the turn as the prompt, `extra_info` = {task,
category, date}; options `since` / `until` (ISO dates, inclusive) keep a release window (Reasoning360
used 2024-06-01..2024-07-31). Multi-turn rows and rows outside the window are dropped (counted).
Scored by the livebench verifier's grader for the row's task."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.rewards.verifiers.livebench import GRADERS
from reasonrl.types import Problem


@register("livebench", "livebench/{reasoning,language,data_analysis}: question_id, task, turns, ground_truth, "
          "release_date", since=None, until=None)  # fmt: skip
def livebench(row: dict, ctx) -> Problem | None:
    task = text(row, "task")
    if task not in GRADERS:
        raise RowError("task", f"{task!r} has no grader; known: {', '.join(sorted(GRADERS))}")
    turns = plain(need(row, "turns"))
    if isinstance(turns, str):
        turns = [turns]
    if not isinstance(turns, list) or not turns:
        raise RowError("turns", "must be a non-empty list of user turns")
    if len(turns) != 1:
        return None
    date = str(row.get("release_date") or row.get("livebench_release_date") or "")[:10]
    since, until = ctx.options["since"], ctx.options["until"]
    if (since and date < str(since)) or (until and date > str(until)):
        return None
    gold = plain(need(row, "ground_truth"))
    qid = str(row.get("question_id") or ctx.index)
    extra = {"index": ctx.index, "task": task, "category": str(row.get("category") or ""), "date": date}
    return Problem(prompts.user(str(turns[0])), gold if isinstance(gold, str) else str(gold), "ood__livebench",
                   "ood", extra, uid=f"livebench/{qid}")  # fmt: skip
