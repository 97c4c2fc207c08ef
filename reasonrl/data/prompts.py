"""Prompt formatting: chat messages -> token ids through the tokenizer's chat template.

Owns: `encode_prompt(s)`. Models without a chat template get the last user message as plain text.
Does not own: the prompt wording of a dataset (stored in each row's `prompt`) or generation.
"""

from __future__ import annotations

from reasonrl.types import Problem


def encode_prompt(tokenizer, problem: Problem) -> list[int]:
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(problem.prompt, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers >= 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)
    return list(tokenizer(problem.user_text, add_special_tokens=True)["input_ids"])


def encode_prompts(tokenizer, problems: list[Problem], max_tokens: int | None = None) -> list[list[int]]:
    out = []
    for i, p in enumerate(problems):
        ids = encode_prompt(tokenizer, p)
        if max_tokens is not None and len(ids) > max_tokens:
            raise ValueError(
                f"prompt of problem {i} (uid {p.uid!r}) has {len(ids)} tokens > data.max_prompt_tokens={max_tokens}"
            )
        out.append(ids)
    return out
