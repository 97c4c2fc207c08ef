"""Shaping verifiers, kept apart from correctness so correctness stays in [0, 1].

Owns: "format_think_answer" (1 if the response is one reasoning block followed by a final answer)
and "overlong" (DAPO's soft overlong punishment, 0 down to -1). Does not own: how shaping terms are
weighted and added to correctness (the trainer combines them from a recipe).

- format_think_answer: `<think>...</think>` exactly once (the opening tag may be in the prompt, as
  chat templates that pre-fill `<think>` do), non-empty reasoning, then a non-empty answer that is
  either one `<answer>...</answer>` (`require="answer_tag"`), one `\\boxed{}` (`require="boxed"`),
  or either (`require="any"`), with nothing but whitespace after a closing `</answer>`.
- overlong (Yu et al., 2025, DAPO, eq. 13): with L the response length, L_max = `max_len`,
  L_cache = `cache_len`: 0 if L <= L_max - L_cache; (L_max - L_cache - L) / L_cache if
  L_max - L_cache < L <= L_max; -1 beyond. The verifier only sees text, so L is counted in
  characters (`unit="chars"`) or whitespace-separated words (`unit="words"`); a trainer that wants
  tokens applies the same formula to token counts.
"""

from __future__ import annotations

import re

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.rewards.extract import boxed_all
from reasonrl.types import Problem

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def _fail(reason: str) -> RewardResult:
    return RewardResult(0.0, {"extracted": None, "reason": reason})


def _check_format_options(options: dict) -> None:
    require = options.get("require", "any")
    if require not in ("any", "answer_tag", "boxed"):
        raise ValueError(f"format_think_answer: require must be any|answer_tag|boxed, not {require!r}")


def _check_overlong_options(options: dict) -> None:
    unit, max_len, cache_len = (
        options.get(k, d) for k, d in (("unit", "chars"), ("max_len", 16384), ("cache_len", 4096))
    )
    if unit not in ("chars", "words"):
        raise ValueError(f"overlong: unit must be chars or words, not {unit!r}")
    if not 0 < cache_len <= max_len:
        raise ValueError(
            f"overlong: need 0 < cache_len <= max_len, got cache_len={cache_len!r}, max_len={max_len!r}"
        )


@VERIFIERS.register("format_think_answer")
def format_think_answer(response: str, problem: Problem, require: str = "any") -> RewardResult:
    """1 if the response is `<think>reasoning</think>` then one final answer, else 0."""
    _check_format_options({"require": require})
    text = response.strip()
    if text.startswith("<think>"):
        text = text[len("<think>") :]
    if text.count("</think>") != 1 or "<think>" in text:
        return _fail("think_tags")
    reasoning, answer = text.split("</think>")
    if not reasoning.strip():
        return _fail("empty_think")
    answer = answer.strip()
    tags = _ANSWER.findall(answer)
    n_open = len(re.findall(r"<answer>", answer, re.IGNORECASE))
    # one non-empty tag, nothing after its closing tag
    has_tag = (
        len(tags) == 1 and n_open == 1 and tags[0].strip() != "" and answer.lower().endswith("</answer>")
    )
    boxes = boxed_all(answer)
    has_box = len(boxes) == 1 and boxes[0] != ""
    ok = {"any": has_tag or has_box, "answer_tag": has_tag, "boxed": has_box}[require]
    if not ok:
        return _fail("no_answer" if n_open == 0 and not boxes else "answer_format")
    return RewardResult(1.0, {"extracted": answer[:200], "reason": "correct"})


@VERIFIERS.register("overlong")
def overlong(
    response: str, problem: Problem, max_len: int = 16384, cache_len: int = 4096, unit: str = "chars"
) -> RewardResult:
    """DAPO soft overlong punishment in [-1, 0] (0 for responses shorter than max_len - cache_len)."""
    _check_overlong_options({"unit": unit, "max_len": max_len, "cache_len": cache_len})
    length = len(response) if unit == "chars" else len(response.split())
    score = min(0.0, max(-1.0, (max_len - cache_len - length) / cache_len))  # 0, the ramp, -1
    return RewardResult(score, {"extracted": length, "reason": "ok" if score == 0 else "overlong"})


format_think_answer.check_options = _check_format_options
overlong.check_options = _check_overlong_options
