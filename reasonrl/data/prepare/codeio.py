"""CodeIO (`hkust-nlp/CodeIO-PyEdu-Reasoning-Raw`, jsonl): `problem_description`,
`io_requirements`, `refcode`, `ios` [{input, output}]. As Reasoning360 does, only the first io pair
of a program is used and a coin flip (seeded by option `seed` and the row index) asks for the
output given the input, or for the input given the output. data_source `simulation__codeio`; gold
= `"output": <json>` / `"input": <json>`, compared structurally by the codeio verifier."""

from __future__ import annotations

import json
import random

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem

_ASK = {
    "output": "Can you predict the output without writing any code? Reason step by step, then give the answer "
    'as JSON of the form {"output": <your output>}, where <your output> strictly matches the output requirement.',
    "input": "Can you predict a feasible input without writing any code? Reason step by step, then give the answer "
    'as JSON of the form {"input": <your input>}, where <your input> is a dictionary whose keys are exactly the '
    "input variables' names.",
}


@register(
    "codeio",
    "hkust-nlp/CodeIO-PyEdu-Reasoning-Raw jsonl: problem_description, io_requirements, refcode, ios",
    seed=42,
)
def codeio(row: dict, ctx) -> Problem:
    ios = plain(need(row, "ios"))
    if (
        not isinstance(ios, list)
        or not ios
        or not isinstance(ios[0], dict)
        or not {"input", "output"} <= set(ios[0])
    ):
        raise RowError("ios", "must list {input, output} pairs")
    io = ios[0]
    predict = "input" if random.Random(f"{ctx.options['seed']}:{ctx.index}").random() < 0.5 else "output"
    given = "output" if predict == "input" else "input"
    body = (
        "You are given a question that requires some input and output variables as follows:\n"
        f"{text(row, 'problem_description')}\n\nThe input and output requirements are as follows:\n"
        f"{text(row, 'io_requirements')}\n\nGiven the following {given}:\n{json.dumps(io[given])}\n\n{_ASK[predict]}\n\n"
        "Tip: here is a reference code snippet for this question. You may use it to guide your reasoning, "
        f"but do not copy spans of it.\n\n{text(row, 'refcode')}"
    )
    gold = f'"{predict}": {json.dumps(io[predict])}'
    return Problem(prompts.user(body, prompts.CODEIO_ANSWER), gold, "simulation__codeio", "coding-inference",
                   {"index": ctx.index, "predict": predict}, uid=f"codeio/{ctx.index}")  # fmt: skip
