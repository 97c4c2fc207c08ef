"""IFEval (`google/IFEval`, split train, 541 rows): `key`, `prompt`, `instruction_id_list`, `kwargs`
(one dict per instruction); IFBench's test file (`allenai/IFBench` `IFBench_test.jsonl`, 300 rows, its own
58 instruction ids, options `uid=ifbench loose=true`) has the same shape. The prompt is kept as it is; gold = the kwargs list (None-valued keys
dropped), `extra_info.instruction_id_list`, as Reasoning360's `ood__ifeval`; scored prompt-level
strict by the ifeval verifier."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import decoded
from reasonrl.types import Problem


@register("ifeval", "google/IFEval or allenai/IFBench test: key, prompt, instruction_id_list, kwargs",
          uid="ifeval", loose=False)  # fmt: skip
def ifeval(row: dict, ctx) -> Problem:
    from reasonrl.rewards.verifiers.ifeval import unsupported

    ids = decoded(need(row, "instruction_id_list"))
    kwargs = decoded(need(row, "kwargs"))
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise RowError("instruction_id_list", "must be a non-empty list of instruction ids")
    unknown = unsupported(ids)
    if unknown:
        raise RowError("instruction_id_list", f"unknown instruction id(s) {unknown}")
    if not isinstance(kwargs, list) or len(kwargs) != len(ids) or any(k is not None and not isinstance(k, dict)
                                                                         for k in kwargs):  # fmt: skip
        raise RowError("kwargs", f"must be a list of {len(ids)} dicts (one per instruction)")
    gold = [{k: v for k, v in (kw or {}).items() if v is not None} for kw in kwargs]
    key = str(row.get("key", ctx.index))
    prompt = text(row, "prompt")
    extra = {"index": ctx.index, "instruction_id_list": ids, "key": key}
    if ctx.options["loose"]:  # scored loose: IFEval's variants without the first / last line or `*`
        extra["loose"] = True
    return Problem(prompts.user(prompt), gold, "ood__ifeval", "ood", extra, uid=f"{ctx.options['uid']}/{key}")
