"""gpt-oss's tool calls (`rollout.tools.format: harmony`), in OpenAI's harmony format: a call is an assistant
message addressed to its tool, ended by `<|call|>` (a stop token of gpt-oss), and the tool answers in a message
of its own, addressed back to the assistant, on the call's channel; then the assistant's turn opens again:

  <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
  <|start|>functions.NAME to=assistant<|channel|>commentary<|message|>OUTPUT<|end|><|start|>assistant

(the recipient may also stand in the role's header, `<|start|>assistant to=functions.NAME<|channel|>commentary
json<|message|>`, as the Hugging Face template writes it). Functions (`functions.NAME`: the recipe's
functions, MCP tools, environments) take JSON arguments; gpt-oss's built-in `python` tool (`to=python`, on the
analysis channel) takes the message as its code and runs in the sandbox. The output is written as it is, as
OpenAI's harmony renderer and vLLM's gpt-oss serving write a tool message; gpt-oss's Hugging Face template
writes it as a JSON string (`"42"`), a deliberate difference (tests/unit/test_harmony_tools.py). One call per
message, as harmony has it.

Also what a harmony completion reads as (`reading`, through `rollout.base.completion_text`, every engine's text):
its final message as it is, its other messages as think blocks, so the verifiers never score the analysis.

Owns: the call's pattern, reading it (`parse`), the message that answers it (`results`), `reading`, the framing
of messages (`messages`, shared with Muse Glimmer's ATEM). Does not
own: the tool loop (`rollout.tools`), the think-block policy itself (`rewards.extract.answer_region`).
"""

from __future__ import annotations

import re

from reasonrl.rollout.call_arguments import json_arguments

_STOP = r"(?!<\|end\|>|<\|start\|>|<\|call\|>)"
# the channel where it comes first, `to=` a recipient, the rest of the header, the message, `<|call|>`: all inside
# one message (found in the text decoded with the special tokens; an analysis message that only mentions
# `to=functions.x` ends at its <|end|>)
CALL = re.compile(
    rf"((?:<\|channel\|>\w+\s*)?to=(?:{_STOP}(?!<\|message\|>).)*<\|message\|>(?:{_STOP}.)*)<\|call\|>", re.S
)
_LEAD = re.compile(r"(?:<\|channel\|>(\w+)\s*)?to=")
_RECIPIENT = re.compile(r"[^\s<]+")
_CHANNEL = re.compile(r"<\|channel\|>(\w+)")


def _read(body: str) -> tuple[str, str, str]:
    """(recipient, channel, message) of a call's body: its channel where it comes first, `to=`, up to
    `<|call|>`. Without a channel, a function's call is on commentary and python's on analysis, as harmony has
    them."""
    lead = _LEAD.match(body)
    header, _, message = body[lead.end() if lead else 0 :].partition("<|message|>")
    found = _RECIPIENT.match(header)
    recipient = found.group(0) if found else ""
    after = _CHANNEL.search(header)  # (the channel after the recipient: the Hugging Face template's order)
    channel = (lead.group(1) if lead else None) or (after.group(1) if after else None)
    return recipient, channel or ("analysis" if recipient == "python" else "commentary"), message


def parse(body: str) -> tuple[str, dict]:
    """(tool name, arguments) of a call; ValueError the model reads."""
    recipient, _, message = _read(body)
    if recipient == "python":  # gpt-oss's built-in tool: the message is the program
        return "python", {"code": message}
    if not recipient.startswith("functions.") or recipient == "functions.":
        raise ValueError(f"error: no tool {recipient[:40]!r} (call functions.NAME or python)")
    return recipient[len("functions.") :], json_arguments(message)


def results(body: str, output: str) -> tuple[str, str, str]:
    """(the message's header, the output, its end and the assistant's turn opening again) answering `body`."""
    recipient, channel, _ = _read(body)
    return (
        f"<|start|>{recipient} to=assistant<|channel|>{channel}<|message|>",
        output,
        "<|end|><|start|>assistant",
    )


_END = re.compile(r"<\|(?:end|call|return)\|>")
_TO = re.compile(r"to=([^\s<]+)")


def messages(raw: str, end: re.Pattern):
    """(header, body, ended) of each message of `raw`, text that opens them with `<|start|>` and their bodies with
    `<|message|>` (harmony's and ATEM's framing), a body up to its first `end` mark or the text's end; a part with
    no `<|message|>` (a header cut short, the role of a turn that never began) is left out."""
    for part in raw.split("<|start|>"):
        header, sep, content = part.partition("<|message|>")
        if sep:
            found = end.search(content)
            yield header, content[: found.start()] if found else content, found is not None


def reading(raw: str) -> str:
    """What a harmony completion reads as, `raw` being its text decoded with the special tokens: a final-channel
    message's text as it is; every other message (analysis, commentary, a call, a tool's answer) as a think block,
    `<think>...</think>` (a call's with its recipient, a tool's answer with its author), left open where the
    message never ended. So the verifiers' one think-block policy (`rewards.extract.answer_region`) reads the
    final answer and never the reasoning, and a completion cut before its final message has no answer."""
    out = []
    for header, body, end in messages(raw, _END):
        channel = _CHANNEL.search(header)
        if channel is not None and channel.group(1) == "final":
            out.append(body)
            continue
        role = _RECIPIENT.match(header)
        to = _TO.search(header)
        if role is not None and role.group(0) != "assistant" and not role.group(0).startswith("to="):
            body = f"{role.group(0)}: {body}"  # a tool's answer
        elif to is not None and to.group(1) != "assistant":
            body = f"to={to.group(1)} {body}"  # a call
        out.append(f"<think>{body}" + ("</think>" if end else ""))
    return "".join(out)
