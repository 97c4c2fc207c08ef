"""Gemma 4's tool calls (`rollout.tools.format: gemma4`, vLLM's parser of that name) and its thinking, as its chat
template writes them: a call is `call:NAME{...}` between `<|tool_call>` and `<tool_call|>`, its arguments an
object with bare keys whose strings stand between `<|"|>` marks (numbers, booleans, null, lists and objects as
JSON writes them); the model then writes `<|tool_response>` (a stop token of Gemma 4) and each call's answer
follows in the same model turn, one block per call, the output a string value of the called function's response:

    <|tool_call>call:multiply{a:6,b:7}<tool_call|><|tool_call>call:lookup{city:<|"|>Paris<|"|>}<tool_call|>
    <|tool_response>response:multiply{value:<|"|>42<|"|>}<tool_response|><|tool_response>response:lookup{...

and the model goes on writing (no new turn; where the template opens a thought there, thinking on, `reopening`
says so and the tool loop writes it too). Its thinking is a `<|channel>thought\n ... <channel|>` block
(`reading`: what the verifiers read, the thought a think block). A call the model cannot have meant (no name,
an unterminated string, a value JSON cannot read) is an error the model reads.

Owns: the call's pattern, reading it (`parse`), the block that answers it (`results`), what the template writes
after the blocks (`reopening`), `reading`. Does not own:
the tool loop (`rollout.tools`), the think-block policy itself (`rewards.extract.answer_region`).
"""

from __future__ import annotations

import json
import re

QUOTE = '<|"|>'  # (a special token of Gemma 4's: its strings' delimiter)
# a call's body, `call:NAME{...}`, between its markers (found in the text decoded with the special tokens)
CALL = re.compile(r"<\|tool_call>(.*?)<tool_call\|>", re.S)
_BODY = re.compile(r"\s*call:([^\s{]+)\s*(\{.*\})\s*\Z", re.S)
_NAME = re.compile(r"\s*call:([^\s{]+)")
# a bare key: after `{` or `,` (outside the strings), up to its colon
_KEY = re.compile(r"([{,]\s*)([^\s\"{}\[\],:]+)\s*:")


def _json(text: str) -> str:
    """Gemma 4's object syntax as JSON: its `<|"|>` strings as JSON strings, its bare keys quoted."""
    parts = text.split(QUOTE)
    if len(parts) % 2 == 0:
        raise ValueError(
            f"error: the tool call's arguments hold an unterminated string (a {QUOTE} without its end)"
        )
    return "".join(json.dumps(p) if i % 2 else _KEY.sub(r'\1"\2":', p) for i, p in enumerate(parts))


def parse(body: str) -> tuple[str, dict]:
    """(tool name, arguments) of a call's body; ValueError the model reads."""
    found = _BODY.match(body)
    if found is None:
        raise ValueError("error: the tool call is not call:NAME{...}")
    try:
        args = json.loads(_json(found.group(2)))
    except json.JSONDecodeError as e:
        raise ValueError(f"error: the tool call's arguments cannot be read ({e.msg}; strings stand between "
                         f"{QUOTE} marks)") from None  # fmt: skip
    if not isinstance(args, dict):
        raise ValueError("error: the tool call's arguments are not an object")
    return found.group(1), args


def results(body: str, output: str) -> tuple[str, str, str]:
    """(the block's opening, the output, its end) answering `body`: a string value of the called function's
    response, as the template writes a tool message's text (a call without a name: `unknown`, as it has it)."""
    name = _NAME.match(body)
    return (
        f"<|tool_response>response:{name.group(1) if name else 'unknown'}{{value:{QUOTE}",
        output,
        f"{QUOTE}}}<tool_response|>",
    )


def reopening(tokenizer, template_kwargs: dict | None) -> str:
    """What the model's chat template writes after a message's answers when the model is to go on (its generation
    prompt there: the latest Gemma 4 revision opens a thought, `<|channel>thought\n`, with thinking on), or ""
    where it writes nothing or renders no such exchange."""
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": "reasonrl-output-7f3a"}]  # fmt: skip
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **dict(template_kwargs or {}))  # fmt: skip
    except (
        Exception
    ):  # (no template, or one that refuses the exchange: the format's own blocks are all there is)
        return ""
    answered = "".join(results("call:f{}", "reasonrl-output-7f3a"))
    return text.split(answered, 1)[1] if text.count(answered) == 1 else ""


OPEN, CLOSE = "<|channel>", "<channel|>"  # a thought's markers, special tokens of Gemma 4's


def reading(tokenizer, ids: list[int]) -> str:
    """What a Gemma 4 completion reads as: its text without the special tokens, each `<|channel>thought ...
    <channel|>` block a think block (left open where the thought never ended; a `<channel|>` with no opening
    before it closes a thought the prompt opened, as the template's generation prompt does after tool answers
    with thinking on), so the verifiers' one think-block policy scores the answer and never the thought."""
    opened, closed = tokenizer.convert_tokens_to_ids([OPEN, CLOSE])
    out, piece, inside = [], [], False

    def flush() -> None:
        text = tokenizer.decode(piece, skip_special_tokens=True)
        out.append(re.sub(r"\Athought\n?", "", text) if inside else text)
        piece.clear()

    for t in ids:
        if t == opened and not inside:
            flush()
            out.append("<think>")
            inside = True
        elif t == closed and inside:
            flush()
            out.append("</think>")
            inside = False
        elif t == closed and not out and not inside:  # (the first block: the prompt opened the thought)
            inside = True
            flush()
            out[:] = ["<think>", *out, "</think>"]
            inside = False
        else:
            piece.append(t)
    flush()
    return "".join(out)
