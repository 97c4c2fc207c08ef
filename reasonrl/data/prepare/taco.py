"""TACO-style code problems with stdin/stdout or call-based tests: TACO / APPS (`question`,
`input_output` = JSON text {"inputs", "outputs", "fn_name"?}, `starter_code`) and
PrimeIntellect / DeepCoder rows (`problem`, `tests` = JSON text, either that mapping or a list of
cases {"input", "output", "type": "stdin_stdout" | "function_call", "fn_name"}). data_source
`codegen__taco` (use --option data_source=codegen__primeintellect for those), prompt in
Reasoning360's TACO wording."""

from __future__ import annotations

import json
from typing import Any

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


def tests_of(row: dict) -> tuple[dict[str, Any], str]:
    field = "input_output" if row.get("input_output") is not None else "tests"
    spec = plain(need(row, "input_output", "tests"))
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise RowError(field, f"is not valid JSON ({e.msg})") from None
    if isinstance(spec, list):  # DeepCoder cases
        if not spec or not all(isinstance(c, dict) and "input" in c and "output" in c for c in spec):
            raise RowError(field, "must list {input, output} cases")
        fn = next((c.get("fn_name") for c in spec if c.get("fn_name")), None)
        if any(c.get("type") == "function_call" for c in spec) and fn:
            spec = {
                "inputs": [c["input"] for c in spec],
                "outputs": [c["output"] for c in spec],
                "fn_name": fn,
            }
        else:
            spec = {"inputs": [c["input"] for c in spec], "outputs": [c["output"] for c in spec]}
    if not isinstance(spec, dict) or not spec.get("inputs") or "outputs" not in spec:
        raise RowError(field, "must hold non-empty 'inputs' and 'outputs'")
    if len(spec["inputs"]) != len(spec["outputs"]):
        raise RowError(field, f"{len(spec['inputs'])} inputs but {len(spec['outputs'])} outputs")
    gold = {"inputs": spec["inputs"], "outputs": spec["outputs"]}
    if spec.get("fn_name"):
        gold["fn_name"] = str(spec["fn_name"])
    return gold, field


@register(
    "taco", "TACO / APPS (question, input_output, starter_code) or DeepCoder primeintellect (problem, tests)"
)
def taco(row: dict, ctx) -> Problem:
    question = text(row, "question", "problem")
    gold, _ = tests_of(row)
    starter = str(row.get("starter_code") or "")
    if starter.strip():
        body = f"{prompts.CODE_TASK} {prompts.CODE_STARTER}\n{prompts.code_fence(starter)}\n\n{question}"
    else:
        body = f"{prompts.CODE_TASK} {prompts.CODE_STDIO}\n\n{question}"
    extra = {"index": ctx.index}
    for key in ("source", "difficulty"):
        if row.get(key) is not None:
            extra[key] = str(row[key])
    return Problem(prompts.user(body), gold, "codegen__taco", "codegen", extra, uid=f"taco/{ctx.index}")
