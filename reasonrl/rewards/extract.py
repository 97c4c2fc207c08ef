"""Answer extraction shared by all domains. Extraction is separate from comparison.

Owns: finding the answer span in a response (`<answer>` tags, `\\boxed{}`, `####`, "Answer:",
last number), and dropping a `<think>` block first. Does not own: deciding whether the answer is
right (each domain's verifier does that).
"""

from __future__ import annotations

import re

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def after_think(text: str) -> str:
    """The part after the last `</think>` if a think block is present, else the whole text."""
    idx = text.rfind("</think>")
    return text[idx + len("</think>") :] if idx >= 0 else text


def answer_tag(text: str) -> str | None:
    """Content of the last `<answer>...</answer>` pair, stripped; None if there is none."""
    found = _ANSWER_TAG.findall(text)
    return found[-1].strip() if found else None


def last_number(text: str) -> str | None:
    """The last number in `text` (thousands separators removed); None if there is none."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None
