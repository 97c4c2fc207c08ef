"""TTRL's test-time sets (PRIME-RL/TTRL `verl/data/*-TTT/{train,test}.json`: AIME-TTT, AMC-TTT, MATH-TTT,
GPQA-TTT; a JSON list of `prompt`, `answer`, `source`, `id`) for training on unlabelled prompts
(`reward.pseudo_label`, docs/rewards.md). Rows keep the data_source TTRL's own reward manager routes by
(`AIME-TTT`, ...: math; `GPQA-TTT`: choice, its options already written in the prompt as "A. ...", the answer
their letter); the task name comes from `source` (aime, amc, math, gpqa_diamond) or option `task`.
Option `labels` false writes every ground truth as "" (no label: the votes are the only one); true (TTRL's own
files) keeps them, for the pass rates and `reward/pseudo/*` metrics alone."""

from __future__ import annotations

from reasonrl.data.prepare import InputError, RowError, prompts, register, text
from reasonrl.types import Problem

SETS = {"aime": "AIME-TTT", "amc": "AMC-TTT", "math": "MATH-TTT", "gpqa_diamond": "GPQA-TTT"}


@register("ttrl", "PRIME-RL/TTRL *-TTT json: prompt, answer, source (aime, amc, math, gpqa_diamond), id",
          labels=True, task=None)  # fmt: skip
def ttrl(row: dict, ctx) -> Problem:
    labels = ctx.options["labels"]
    if not isinstance(labels, bool):
        raise InputError(f"converter ttrl: option labels must be true or false, got {labels!r}")
    source = ctx.options["task"] or text(row, "source")
    if source not in SETS:
        message = f"{source!r} is not one of TTRL's sets ({', '.join(SETS)})"
        if ctx.options["task"]:
            raise InputError(f"converter ttrl: option task {message}")
        raise RowError("source", message)
    name = SETS[source]
    choice = name == "GPQA-TTT"
    answer = text(row, "answer")
    if choice and answer not in ("A", "B", "C", "D"):
        raise RowError("answer", f"a GPQA-TTT answer is an option letter A-D, got {answer!r}")
    uid = f"{name}/{row.get('id', ctx.index)}"
    question = prompts.user(text(row, "prompt"), prompts.CHOICE if choice else prompts.MATH)
    return Problem(question, answer if labels else "", name, "stem" if choice else "math",
                   {"index": ctx.index, "task": source}, uid=uid)  # fmt: skip
