"""GLM-4.5's, 4.6's and 4.7's tool calls (`rollout.tools.format: glm4_moe`, vLLM's parser of that name), as
their chat template writes them: the name after `<tool_call>`, then each argument as a key and a value,

    <tool_call>NAME
    <arg_key>KEY</arg_key>
    <arg_value>VALUE</arg_value>
    </tool_call>

answered in an observation turn, `<|observation|>` then a `<tool_response>` per call, then the assistant's turn
again (`<|assistant|>`; with `enable_thinking: false` the template also writes an empty think block there:
`turn: chat_template` takes it). The template writes a string value as it is and any other as JSON, so a value
is read by the called tool's schema (`rollout.qwen_calls.typed`, as transformers' `parse_response` and vLLM read
it). A call without a name, an argument given twice or text outside the key / value pairs is an error the
model reads.

Owns: reading the format's call body (`parse`). Does not own: the tool loop (`rollout.tools`), the turn
(`rollout.tool_formats`), the schemas.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"\s*([^\s<]+)")
_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def parse(body: str) -> tuple[str, dict]:
    """(tool name, {key: value as written}) of a call's body; ValueError the model reads."""
    name = _NAME.match(body)
    if name is None:
        raise ValueError("error: the tool call has no function name (<tool_call>NAME)")
    rest, args = body[name.end() :], {}
    for key, value in _ARG.findall(rest):
        key = key.strip()
        if key in args:
            raise ValueError(f"error: the tool call gives argument {key!r} twice")
        args[key] = value
    if _ARG.sub("", rest).strip():
        raise ValueError("error: the tool call holds text outside its <arg_key> / <arg_value> pairs")
    return name.group(1), args
