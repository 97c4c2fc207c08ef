"""The turns a completion gets that are not the model's: a tool's answer to the calls of one message, and
`rollout.interaction`'s feedback. Their text, as the model's own chat template renders a `tool` (or `user`)
message after an assistant one (`template_turn`), and their tokens (`answer_tokens`): the turn's markers as
the template's tokens, what a program printed or a message says with its special tokens split, so it cannot
forge an end of turn or a role marker.

Owns: `template_turn`, `answer_tokens` / `turn_tokens`, `warn_unlike_template`. Does not own: the tool loop
(`rollout.tools`), the formats' own turns (`rollout.tool_formats`), the feedback loop (`rollout.interaction`).
"""

from __future__ import annotations

_CALL, _OUTPUT = "reasonrl-tool-call-7f3a", "reasonrl-tool-output-7f3a"


def answer_tokens(tokenizer, pieces: list[str], texts: list[str]) -> list[int]:
    """The tokens of a turn that is not the model's, `pieces[0] texts[0] pieces[1] ... texts[-1] pieces[-1]`
    (len(pieces) == len(texts) + 1): the turn's own markers (`pieces`) as the template's tokens, each text with
    its special tokens split, so a program or a message cannot print an end-of-turn or a role marker."""

    def tokens(t: str, split: bool) -> list[int]:
        return tokenizer(t, add_special_tokens=False, split_special_tokens=split)["input_ids"] if t else []

    ids = tokens(pieces[0], False)
    for text, after in zip(texts, pieces[1:]):
        ids += tokens(text, True) + tokens(after, False)
    return ids


def turn_tokens(tokenizer, before: str, text: str, after: str) -> list[int]:
    """`answer_tokens` of a turn holding one text (one tool output, `rollout.interaction`'s feedback)."""
    return answer_tokens(tokenizer, [before, after], [text])


def template_turn(tokenizer, template_kwargs: dict | None = None, ends_message: bool = False, role: str = "tool",
                  where: str = "rollout.tools.turn=chat_template", instead: str = "turn: format",
                  count: int = 1) -> str:  # fmt: skip
    """What follows a tool call in the tokenizer's chat template, `{output}` standing for the program's
    output: the end of the assistant's turn, a `tool` message (or a `role` one: the user's feedback of
    `rollout.interaction`; `count` of them in a row, each its `{output}`: the answers to one message's calls,
    `rollout.tools.parallel_calls`), and the assistant's turn opening again (the generation prompt, with the
    prompts' template arguments, e.g. Qwen3's enable_thinking); without the end of the assistant's message
    where the call has closed it already (`ends_message`: Llama's <|eom_id|>, which the template's
    <|eot_id|> would close a second time). ConfigError naming `where` (and what to use `instead`) when the
    template cannot render such messages after an assistant one."""
    from reasonrl.config import ConfigError

    outputs = [_OUTPUT] if count == 1 else [f"reasonrl-tool-output-{i}-7f3a" for i in range(count)]
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _CALL},
                *({"role": role, "content": o} for o in outputs)]  # fmt: skip
    several, whose = (f"{count} {role} messages", "'") if count > 1 else (f"a {role} message", "'s")
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **dict(template_kwargs or {}))  # fmt: skip
    except Exception as e:  # no template, or one that refuses the tool role (jinja raises its own errors)
        raise ConfigError(f"{where}: the tokenizer's chat template cannot render {several} after an "
                          f"assistant one ({type(e).__name__}: {e}); use {instead}") from None  # fmt: skip
    at = [text.index(o) if text.count(o) == 1 else -1 for o in [_CALL, *outputs]]
    if text.count(_CALL) != 1 or min(at) < 0 or at != sorted(at):
        raise ConfigError(f"{where}: the tokenizer's chat template does not show an assistant message and then "
                          f"{several}{whose} content, once each; use {instead}")  # fmt: skip
    turn = text[text.index(_CALL) + len(_CALL) :]
    for o in outputs:
        turn = turn.replace(o, "{output}")
    if ends_message:  # the template's end of an assistant message, as it renders one alone
        alone = tokenizer.apply_chat_template(messages[:2], tokenize=False, **dict(template_kwargs or {}))
        closing = alone[alone.index(_CALL) + len(_CALL) :] if alone.count(_CALL) == 1 else ""
        if closing and turn.startswith(closing):
            turn = turn[len(closing) :]
    return turn


def warn_unlike_template(
    tokenizer, template_kwargs, name: str, output: str, ends_message: bool = False
) -> None:
    """Log a warning where the model's chat template, which teaches it `name`'s calls, answers them with another
    turn than the format's own `output` (Qwen3.5's opens the next assistant turn with `<think>`); `ends_message`:
    the call closes the assistant's message itself (`template_turn`)."""
    import logging

    from reasonrl.config import ConfigError
    from reasonrl.rollout.tool_formats import template_format

    if template_format(tokenizer) is None:
        return
    try:
        turn = template_turn(tokenizer, template_kwargs, ends_message)
    except ConfigError:  # (a template that renders no tool turn: the format's own is all there is)
        return
    if turn != output:
        logging.getLogger(__name__).warning(
            "rollout.tools.format=%s answers a call with %r, but the model's chat template with %r: set "
            "rollout.tools.turn=chat_template to train on the turn the model knows",
            name,
            output,
            turn,
        )
