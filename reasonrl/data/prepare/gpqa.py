"""GPQA (`Idavidrein/gpqa`, config gpqa_diamond; gated): `Question`, `Correct Answer`,
`Incorrect Answer 1..3`, `Record ID`. The four options are shuffled with a seeded permutation per
record (a hash of the seed and the record id: stable across runs and file orders, recorded in
`extra_info.permutation`), gold = the correct option's letter. Tools shuffle differently (simple-evals
Random(0), lm-eval random.shuffle, Reasoning360 seed 42), so letter distributions differ; ours is
fixed and recorded. `extra_info.choices` lists the options as shown, so the verifier takes only
A-D. data_source `stem__gpqa_diamond`, scored by the multiple-choice verifier."""

from __future__ import annotations

import hashlib
import random

from reasonrl.data.prepare import prompts, register, text
from reasonrl.types import Problem

LETTERS = "ABCD"


@register(
    "gpqa", "Idavidrein/gpqa gpqa_diamond: Question, Correct Answer, Incorrect Answer 1-3, Record ID", seed=0
)
def gpqa(row: dict, ctx) -> Problem:
    correct = text(row, "Correct Answer")
    options = [correct, *(text(row, f"Incorrect Answer {k}") for k in (1, 2, 3))]
    rid = str(row.get("Record ID") or ctx.index)
    digest = hashlib.sha256(f"{ctx.options['seed']}:{rid}".encode()).digest()[:8]
    order = list(range(4))
    random.Random(int.from_bytes(digest, "little")).shuffle(order)
    shown = [options[k] for k in order]
    letter = LETTERS[order.index(0)]
    body = text(row, "Question") + "\n\n" + "\n".join(f"({LETTERS[k]}) {o}" for k, o in enumerate(shown))
    extra = {"index": ctx.index, "record_id": rid, "permutation": order, "choices": shown}
    return Problem(prompts.user(body, prompts.CHOICE), letter, "stem__gpqa_diamond", "stem", extra,
                   uid=f"gpqa_diamond/{rid}")  # fmt: skip
