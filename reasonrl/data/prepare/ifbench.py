"""IFBench-style multi-constraint rows (`allenai/IF_multi_constraints_upto5`, as Reasoning360's
`ood__ifbench`): `messages` (the first is the user turn, constraints written into it), `ground_truth`
(a Python literal: [{"instruction_id": [...], "kwargs": [...]}]). The prompt is kept as it is; scored
prompt-level strict by the ifbench verifier. data_source `ood__ifbench`."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register
from reasonrl.rewards.ground_truth import plain
from reasonrl.rewards.verifiers.ifbench import constraints
from reasonrl.types import Problem


@register(
    "ifbench", "allenai/IF_multi_constraints_upto5: messages, ground_truth ([{instruction_id, kwargs}])"
)
def ifbench(row: dict, ctx) -> Problem:
    messages = plain(need(row, "messages"))
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        raise RowError("messages", "must be a list of {role, content} messages")
    content = str(messages[0].get("content") or "")
    if not content.strip():
        raise RowError("messages", "the first message has no content")
    gold = plain(need(row, "ground_truth"))
    p = Problem(prompts.user(content), gold, "ood__ifbench", "ood", {"index": ctx.index},
                uid=f"ifbench/{row.get('key', ctx.index)}")  # fmt: skip
    try:
        ids = [i for i, _ in constraints(p)]
    except ValueError as e:
        raise RowError("ground_truth", str(e)) from None
    p.extra_info["instruction_id_list"] = ids
    return p
