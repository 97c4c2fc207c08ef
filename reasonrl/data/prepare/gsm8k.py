"""GSM8K (`openai/gsm8k`, config main or socratic): `question`, `answer` = rationale ending
`#### <number>`. verl's convention: data_source `openai/gsm8k`, gold = the number after `####`
without thousands separators, the instruction to answer after "####"; extra_info keeps the question and
the worked answer (verl's SFT data: `data.response_key=extra_info.answer`)."""

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
    i, question = ctx.index, text(row, "question")
    # the question and the whole worked answer kept as verl keeps them (extra_info.question / .answer: what
    # verl's SFT trainer reads; here `data.response_key=extra_info.answer` with algo.objective=sft)
    return Problem(prompts.user(question, prompts.GSM8K), gold, "openai/gsm8k", "math",
                   {"split": ctx.options["split"], "index": i, "question": question, "answer": answer},
                   uid=f"gsm8k/{ctx.options['split']}/{i}")  # fmt: skip
