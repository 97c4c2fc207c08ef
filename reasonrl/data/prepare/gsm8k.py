"""GSM8K (`openai/gsm8k`, config main or socratic): `question`, `answer` = rationale ending
`#### <number>`. verl's convention: data_source `openai/gsm8k`, gold = the number after `####`
without thousands separators, the instruction to answer after "####"."""

from __future__ import annotations

import re

from reasonrl.data.prepare import RowError, prompts, register, text
from reasonrl.types import Problem

_FINAL = re.compile(r"####\s*(.+?)\s*$")


@register("gsm8k", "openai/gsm8k (main / socratic): question, answer ending '#### <number>'", split="test")
def gsm8k(row: dict, ctx) -> Problem:
    answer = text(row, "answer")
    m = _FINAL.search(answer)
    if not m:
        raise RowError("answer", "has no final '#### <number>' line")
    gold = m.group(1).replace(",", "").strip()
    i = ctx.index
    return Problem(prompts.user(text(row, "question"), prompts.GSM8K), gold, "openai/gsm8k", "math",
                   {"split": ctx.options["split"], "index": i}, uid=f"gsm8k/{ctx.options['split']}/{i}")  # fmt: skip
