"""MMLU-Pro (`TIGER-Lab/MMLU-Pro`, split test, 12,032 questions): `question_id`, `question`, `options`
(up to 10), `answer` (the letter), `answer_index`, `category`, `src`. Options are listed `(A) ...` in
the released order; the "N/A" padding some rows carry after their real options is dropped, as
MMLU-Pro's own evaluation does, and `extra_info.choices` lists the rest. Gold = the answer letter
(checked against `answer_index`). data_source `stem__mmlu_pro`, scored by the choice verifier."""

from __future__ import annotations

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem

LETTERS = "ABCDEFGHIJ"


@register("mmlu_pro", "TIGER-Lab/MMLU-Pro: question_id, question, options, answer, answer_index, category")
def mmlu_pro(row: dict, ctx) -> Problem:
    options = plain(need(row, "options"))
    if not isinstance(options, list):
        raise RowError("options", "must be a list")
    options = [str(o) for o in options]
    while options and options[-1].strip() == "N/A":
        options.pop()
    if not 2 <= len(options) <= len(LETTERS):
        raise RowError("options", f"must hold 2 to {len(LETTERS)} options besides N/A padding")
    letter = text(row, "answer").upper()
    if letter not in LETTERS[: len(options)]:
        raise RowError("answer", f"{letter!r} is not one of the {len(options)} options")
    index = row.get("answer_index")
    if index is not None and (isinstance(index, bool) or str(index).strip() != str(LETTERS.index(letter))):
        raise RowError("answer_index", f"{index} is not the answer letter {letter!r}")
    body = text(row, "question") + "\n\n" + "\n".join(f"({LETTERS[k]}) {o}" for k, o in enumerate(options))
    extra = {"index": ctx.index, "choices": options}  # the choice verifier takes only their letters
    for key in ("category", "src"):
        if row.get(key) is not None:
            extra[key] = str(row[key])
    uid = str(row.get("question_id", ctx.index))
    return Problem(
        prompts.user(body, prompts.CHOICE), letter, "stem__mmlu_pro", "stem", extra, uid=f"mmlu_pro/{uid}"
    )
