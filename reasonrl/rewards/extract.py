"""Answer extraction shared by all domains. Extraction is separate from comparison.

Owns: finding the answer span in a response (`\\boxed{}` / `\\fbox{}` with brace matching,
`<answer>` tags, GSM8K `#### x`, "Answer: x" / "the answer is x", last number), dropping a
`<think>` block first, and `extract(text, modes)` which tries a configurable list of modes in order.
Does not own: deciding whether the answer is right (each domain's verifier does that).

Policy: when a response contains a think block, only the text after the last `</think>` counts; a
`<think>` that is never closed means the model never left its reasoning, so there is no answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_BOX_CMD = re.compile(r"\\(?:boxed|fbox)\s*")
_GSM8K = re.compile(r"####\s*([^\n]*)")
# "Answer: x", "Final Answer: x", "the answer is x", "the final answer is: x" (rest of the line)
_ANSWER_COLON = re.compile(r"(?:\banswer\s*(?:is)?\s*[:：]|\banswer\s+is\b)\s*([^\n]*)", re.IGNORECASE)

DEFAULT_MODES: tuple[str, ...] = ("boxed", "answer_tag", "gsm8k", "answer_colon", "last_number")


def answer_region(text: str) -> str:
    """Where an answer may appear: after the last `</think>`; "" if a `<think>` is never closed.
    The one think-block policy of every verifier (answers, code blocks, tags alike): reasoning is
    never scored, and a response that never closes its think block has no answer."""
    idx = text.rfind("</think>")
    if idx >= 0:
        return text[idx + len("</think>") :]
    if "<think>" in text:
        return ""
    return text


def answer_tag(text: str) -> str | None:
    """Content of the last `<answer>...</answer>` pair, stripped; None if there is none."""
    found = _ANSWER_TAG.findall(text)
    return found[-1].strip() if found else None


def final_answer_tag(text: str) -> tuple[str | None, str]:
    """(content of the last `<answer>...</answer>` pair or None, the text after that pair)."""
    matches = list(_ANSWER_TAG.finditer(text))
    if not matches:
        return None, ""
    last = matches[-1]
    return last.group(1).strip(), text[last.end() :]


def last_number(text: str) -> str | None:
    """The last number in `text` (thousands separators removed); None if there is none."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """Content of the balanced `{...}` group opening at `text[start]`, and the index after it."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\\":  # skip escaped characters such as \{ and \}
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
        i += 1
    return None


def boxed_all(text: str) -> list[str]:
    """Contents of every complete `\\boxed{...}` / `\\fbox{...}` (and `\\boxed x`), in order."""
    out: list[str] = []
    pos = 0
    while True:
        m = _BOX_CMD.search(text, pos)
        if m is None:
            return out
        j = m.end()
        if j < len(text) and text[j] == "{":
            got = _braced(text, j)
            if got is None:  # unbalanced: nothing complete from here on
                return out
            content, pos = got
            out.append(content.strip())
        else:  # "\boxed 5": a single token
            tok = re.match(r"[^\s$\\]+", text[j:]) if m.group(0)[-1:].isspace() else None
            if tok:
                out.append(tok.group(0))
                pos = j + tok.end()
            else:
                pos = j


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{}` / `\\fbox{}`; None if there is none."""
    found = boxed_all(text)
    return found[-1] if found else None


def _unemphasised(s: str) -> str:
    """Markdown emphasis around an answer dropped: `**18**`, `*18*`, `__18__`, `** 18`."""
    return s.strip().strip("*_").strip()


def gsm8k_answer(text: str) -> str | None:
    """What follows the last GSM8K `####` marker on its line, stripped; None if absent or empty."""
    found = [_unemphasised(s) for s in _GSM8K.findall(text)]
    return found[-1] if found and found[-1] else None


def answer_colon(text: str) -> str | None:
    """Rest of the line after the last "Answer:" / "answer is" (markdown emphasis around either
    dropped: `**Answer:** 18`, `**Answer: 18**`); trailing period dropped."""
    found = [_unemphasised(s) for s in _ANSWER_COLON.findall(text)]
    if not found or not found[-1]:
        return None
    return _unemphasised(found[-1].rstrip(".")) or None


EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "boxed": last_boxed,
    "answer_tag": answer_tag,
    "gsm8k": gsm8k_answer,
    "answer_colon": answer_colon,
    "last_number": last_number,
}


@dataclass(frozen=True)
class Extraction:
    """An extracted answer and the mode that found it."""

    answer: str
    mode: str


def extract(text: str, modes: Sequence[str] = DEFAULT_MODES, think: bool = True) -> Extraction | None:
    """First answer found by trying `modes` in order (names from `EXTRACTORS`); None if none.

    With `think=True` only the answer region (`answer_region`) is searched.
    """
    unknown = [m for m in modes if m not in EXTRACTORS]
    if unknown:
        raise ValueError(f"unknown extraction mode(s) {unknown}; known: {sorted(EXTRACTORS)}")
    region = answer_region(text) if think else text
    for mode in modes:
        got = EXTRACTORS[mode](region)
        if got is not None and got != "":
            return Extraction(got, mode)
    return None
