"""Multiple-choice verifier "choice" (GPQA, SuperGPQA, MMLU-style; Reasoning360 `stem__gpqa*`).

Owns: finding the chosen option letter (last `\\boxed{}`, `<answer>`, "Answer: X" / "the answer is
(X)", "Option X", or a last line that is only the letter in bold), and comparing it with the gold letter. Does not own: free-form STEM answers (`judge`).

Policy: an answer that names no letter, or several letters ("A or B", "A, C"), scores 0 with reason
"no_answer" / "ambiguous"; a random letter is never substituted (unlike Reasoning360's SuperGPQA
scorer). Valid letters are A..J unless `extra_info["choices"]` / `["options"]` says how many.
A hedge after the chosen letter is ambiguous too: another option joined by "or", "and", "also",
"maybe", ... ("A (or B)", "A, also C", "the answer is A or possibly B") or a list of other options
("A, but B, C, D could be right"). Words that restate the chosen option's own text are not a hedge:
the listed text of that option when `extra_info` lists them ("D. Both A and B"), or, without a list,
text that begins "Both", "All", "None" or "Neither".
"""

from __future__ import annotations

import re
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, checks_ground_truth, result
from reasonrl.rewards.extract import answer_region, answer_tag, last_boxed
from reasonrl.rewards.ground_truth import plain, single
from reasonrl.rewards.verifiers.math import clean_latex
from reasonrl.types import Problem

LETTERS = "ABCDEFGHIJ"
_ANSWER_LINE = re.compile(
    r"(?:answer\s*(?:is)?\s*[:：]?|answer\s+is|correct\s+(?:option|choice)\s+is)\s*"
    r"(?:option\s*)?([^\n]{0,80})",
    re.IGNORECASE,
)
_LEAD = re.compile(r"^\(?\*{0,2}\(?([A-Z])\)?\*{0,2}(?:$|[\s.:,;)\]]+(.*))", re.DOTALL)
# after the chosen letter: another option joined to it by a hedge word, or a list of other options
_HEDGE_WORDS = r"(?i:or|and|also|maybe|possibly|perhaps|probably|alternatively|otherwise|either|plus)"
_FILLER = r"(?:[\s,]+(?i:maybe|possibly|perhaps|probably|even|option|choice|answer))*"
_OPTION_TEXT = re.compile(r"(?i:both|all|none|neither)\b")


def _hedged(rest: str, valid: str) -> bool:
    """Whether the words after a chosen letter name another option beside it."""
    letter = rf"\(?(?!I\s+[a-z])[{valid}]\)?(?![\w'])"  # not the pronoun: "and I think"
    joined = rf"\b{_HEDGE_WORDS}\b{_FILLER}[\s,:(]*{letter}"
    listed = rf"(?<![\w\\']){letter}\s*[,/;&]\s*{letter}"
    return re.search(joined, rest) is not None or re.search(listed, rest) is not None


def _own_text(rest: str, letter: str, options: list | None) -> str:
    """`rest` less the chosen option's own text at its start (all of it when it restates that text)."""
    if options is None:
        return "" if _OPTION_TEXT.match(rest) else rest
    index = LETTERS.index(letter)
    own = " ".join(str(options[index]).split()).lower() if index < len(options) else ""
    flat = " ".join(rest.split())
    return flat[len(own) :] if own and flat.lower().startswith(own) else rest


def _options(problem: Problem) -> list | None:
    """The listed options' text (`extra_info` "choices" / "options", n >= 2), or None.

    Only a list (or a parquet array) counts: a string there is the options' text, not their number.
    """
    for key in ("choices", "options"):
        opts = plain(problem.extra_info.get(key))
        if isinstance(opts, list) and len(opts) >= 2:
            return opts
    return None


def _valid_letters(problem: Problem) -> str:
    """A..J, or the first n letters where `extra_info` lists n >= 2 choices (a list beyond J: A..J)."""
    opts = _options(problem)
    return LETTERS if opts is None else LETTERS[: len(opts)]


def letter_of(candidate: str, valid: str = LETTERS, options: list | None = None) -> tuple[str | None, str]:
    """(letter, reason) for an answer span such as "C", "(C)", "\\text{C}", "C. 42 kJ". `options`: the
    listed options' text, whose restatement after the letter is no hedge (module docstring)."""
    s = clean_latex(candidate).strip().strip("*").strip()
    s = re.sub(r"^(?:option|choice)\s+(?=\(?[A-Z]\b)", "", s, flags=re.IGNORECASE)  # "Option C"
    m = _LEAD.match(s)
    if m is None or m.group(1) not in valid:
        return None, "no_answer"
    rest = (m.group(2) or "").strip()
    if m.group(1) == "I" and rest[:1].islower():  # "I think ...", not option I
        return None, "no_answer"
    # "A or B", "A and C", "A, B": several standalone option letters means no single choice
    if re.match(rf"^(?:(?:or|and|/|,|&)\s*)?\(?(?!I\s+[a-z])[{valid}]\)?(?:$|[\s,.;)])", rest):
        return None, "ambiguous"
    if _hedged(_own_text(rest, m.group(1), options), valid):  # "A (or B)", "A, also C"
        return None, "ambiguous"
    return m.group(1), "ok"


def extract_choice(
    response: str, valid: str = LETTERS, options: list | None = None
) -> tuple[str | None, str, str | None]:
    """(letter, reason, raw span) from the answer region of a response (`options`: see `letter_of`)."""
    region = answer_region(response)
    spans: list[str] = []
    for got in (last_boxed(region), answer_tag(region)):
        if got:
            # a box or tag holding only a lower-case letter ("\\boxed{c}", "(c)") names that option;
            # outside such containers a lone "a" is an article, not a choice
            lone = re.fullmatch(r"\(?\s*(?:\\text\s*\{\s*)?([a-j])(?:\s*\})?\s*\)?\.?", got.strip())
            spans.append(lone.group(1).upper() if lone else got)
    if not spans:
        spans.extend(reversed(_ANSWER_LINE.findall(region)))
    if not spans:
        stripped = region.strip()
        lines = stripped.splitlines()
        if len(stripped) <= 4:  # a bare "C" / "(C)" response
            spans.append(stripped)
        elif re.fullmatch(r"\*{1,3}\s*\(?[A-J]\)?\s*\*{1,3}\.?", lines[-1].strip()):
            spans.append(lines[-1])  # a last line that is only the letter in bold: "**C**"
    for span in spans:
        letter, reason = letter_of(span, valid, options)
        if letter or reason == "ambiguous":
            return letter, reason, span
    return None, "no_answer", spans[0] if spans else None


def _gold_letter(gt: Any) -> str:
    gt = single(gt)
    if isinstance(gt, int) and 0 <= gt < len(LETTERS):
        return LETTERS[gt]
    letter, _ = letter_of(str(gt))
    if letter is None:
        raise ValueError(f"choice: ground truth {gt!r} is not an option letter")
    return letter


def _gold_and_letters(problem: Problem) -> tuple[str, str]:
    gold, valid = _gold_letter(problem.ground_truth), _valid_letters(problem)
    if gold not in valid:
        raise ValueError(f"choice: ground truth {gold!r} is not one of the {len(valid)} listed options")
    return gold, valid


@VERIFIERS.register("choice")
def choice(response: str, problem: Problem) -> RewardResult:
    """1 if the single chosen option letter equals the gold letter."""
    gold, valid = _gold_and_letters(problem)
    letter, reason, span = extract_choice(response, valid, _options(problem))
    if letter is None:
        return result(False, span if reason == "ambiguous" else None, reason=reason)
    return result(letter == gold, letter)


checks_ground_truth(choice, _gold_and_letters)


def chosen_letter(response: str, problem: Problem) -> str | None:
    """The option letter a response picks among the problem's options (None: none, or several)."""
    return extract_choice(response, _valid_letters(problem), _options(problem))[0]
