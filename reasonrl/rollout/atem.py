"""Muse Glimmer's messages and tool calls (`rollout.tools.format: muse_glimmer`, vLLM's parser of that name), in Meta's
ATEM protocol: each message of the assistant's turn is addressed, `to=self` its reasoning, `to=user` its answer,
`to=NAME` a call, whose message holds one `<atem:function_calls>` block invoking NAME; the tool answers in a
message of its own, then the assistant's turn opens again:

  <|start|>assistant to=self<|message|>REASONING<|eom|><|start|>assistant to=NAME<|message|><atem:function_calls>
  <atem:invoke name="NAME">
  <atem:parameter name="KEY">VALUE</atem:parameter>
  </atem:invoke>
  </atem:function_calls><|eot|><|start|>tool NAME<|message|><tool_output name="NAME">
  OUTPUT
  </tool_output><|eot|><|start|>assistant

The template writes a string value as it is and any other as JSON, so a value is read by the called tool's schema
(`rollout.qwen_calls.typed`; vLLM reads a value as JSON where it parses). One call per message, as the template
writes them, and one call answered at a time (a message's calls are messages of their own, each closed by
`<|eom|>`, answered together only after the last: `parallel_calls` is refused). An invoke inside a reasoning or
answer message is no call.

Also what an ATEM completion reads as (`reading`, through `rollout.base.completion_text`, every engine's text): its
messages to the user as they are, every other message as a think block, so the verifiers never score the reasoning.

Owns: the call's pattern, reading it (`parse`), the message that answers it (`results`), `reading`. Does not own:
the tool loop (`rollout.tools`), the think-block policy itself (`rewards.extract.answer_region`), the messages'
framing it shares with harmony (`rollout.harmony.messages`).
"""

from __future__ import annotations

import re

from reasonrl.rollout.harmony import messages

_INSIDE = r"(?:(?!<\|eom\|>|<\|eot\|>|<\|start\|>).)"  # (within one message)
# a message to a tool (not to self or the user) whose body is a function-calls block (found in the text decoded with
# the special tokens)
CALL = re.compile(
    rf"(to=(?!(?:self|user)[^\S\n]*<)[A-Za-z0-9_.\-]+[^\S\n]*<\|message\|>\s*<atem:function_calls>{_INSIDE}*?</atem:function_calls>)",
    re.S,
)
_RECIPIENT = re.compile(r"to=([A-Za-z0-9_.\-]+)")
_INVOKE = re.compile(r'<atem:invoke\b[^>]*?\bname="([^"]*)"[^>]*>(.*?)</atem:invoke>', re.S)
_PARAMETER = re.compile(r'<atem:parameter\b[^>]*?\bname="([^"]+)"[^>]*>(.*?)</atem:parameter>', re.S)


def parse(body: str) -> tuple[str, dict]:
    """(tool name, {key: value as written}) of a call's body; ValueError the model reads."""
    recipient = _RECIPIENT.match(body).group(1)
    block = body[
        body.index("<atem:function_calls>") + len("<atem:function_calls>") : -len("</atem:function_calls>")
    ]
    invokes = _INVOKE.findall(block)
    if len(invokes) != 1:
        raise ValueError(f"error: a call's message invokes one function, not {len(invokes)}")
    name, inner = invokes[0]
    if name != recipient:
        raise ValueError(f"error: the message is addressed to {recipient[:40]!r} but invokes {name[:40]!r}")
    args = {}
    for key, value in _PARAMETER.findall(inner):
        if key in args:
            raise ValueError(f"error: the tool call gives parameter {key!r} twice")
        args[key] = value
    if _PARAMETER.sub("", inner).strip():
        raise ValueError("error: the tool call holds text outside its <atem:parameter> elements")
    return name, args


def results(body: str, output: str) -> tuple[str, str, str]:
    """(the end of the call's message and the tool's header, the output, its end and the assistant's turn opening
    again) answering `body`."""
    name = _RECIPIENT.match(body).group(1)
    return (
        f'<|eot|><|start|>tool {name}<|message|><tool_output name="{name}">\n',
        output,
        "\n</tool_output><|eot|><|start|>assistant",
    )


_END = re.compile(r"<\|eo[mt]\|>")
_ROLE = re.compile(r"\s*(\w+)")


def reading(raw: str) -> str:
    """What an ATEM completion reads as, `raw` being its text decoded with the special tokens: each message to the
    user as it is; every other (reasoning, a call, a tool's answer, a message addressed to no one) as a think block,
    `<think>...</think>`, left open where the message never ended (a call's ends with its block). So the
    verifiers' one think-block policy reads the answer and never the reasoning, and a completion cut before its
    answer has none."""
    out = []
    for header, body, end in messages(raw, _END):
        to = _RECIPIENT.search(header)
        role = _ROLE.match(header)
        if to is not None and to.group(1) == "user":
            out.append(body)
            continue
        if role is not None and role.group(1) == "tool":
            body = f"{header.strip()}: {body}"  # a tool's answer
        elif to is not None and to.group(1) != "self":
            # a call: complete at its block's end (the tool loop cuts the message there, its end the tool turn's)
            end = end or body.rstrip().endswith("</atem:function_calls>")
            body = f"to={to.group(1)} {body}"
        out.append(f"<think>{body}" + ("</think>" if end else ""))
    return "".join(out)
