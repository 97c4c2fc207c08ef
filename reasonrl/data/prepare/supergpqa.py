"""SuperGPQA (`m-a-p/SuperGPQA`): `uuid`, `question`, `options` (up to 10), `answer` (text),
`answer_letter`, `discipline`, `field`, `subfield`, `difficulty`. Options are listed `(A) ...` in
the released order (as Reasoning360 does); gold = `answer_letter`; `extra_info.choices` lists them,
so the verifier takes only their letters. data_source `stem__supergpqa`."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem

LETTERS = "ABCDEFGHIJ"


@register("supergpqa", "m-a-p/SuperGPQA: question, options, answer_letter, discipline, field, difficulty")
def supergpqa(row: dict, ctx) -> Problem:
    options = plain(need(row, "options"))
    if not isinstance(options, list) or not 2 <= len(options) <= len(LETTERS):
        raise RowError("options", f"must be a list of 2 to {len(LETTERS)} options")
    letter = text(row, "answer_letter").upper()
    if letter not in LETTERS[: len(options)]:
        raise RowError("answer_letter", f"{letter!r} is not one of the {len(options)} options")
    body = text(row, "question") + "\n\n" + "\n".join(f"({LETTERS[k]}) {o}" for k, o in enumerate(options))
    extra = {"index": ctx.index, "choices": [str(o) for o in options]}
    for key in ("discipline", "field", "subfield", "difficulty"):
        if row.get(key) is not None:
            extra[key] = str(row[key])
    uid = str(row.get("uuid") or ctx.index)
    return Problem(
        prompts.user(body, prompts.CHOICE), letter, "stem__supergpqa", "stem", extra, uid=f"supergpqa/{uid}"
    )
