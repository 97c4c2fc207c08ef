"""Qwen3-Coder's and Qwen3.5's tool calls (`rollout.tools.format: qwen3_coder`, vLLM's parser of that name):
the Hermes markers around an XML body instead of JSON,

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

answered, as Hermes calls are, in a ChatML tool turn (`<tool_response>` in a user turn; `turn: chat_template`
takes the model's own, with the `<think>` Qwen3.5's template opens the next assistant turn with).

A value is text, one newline on each side being the template's markup; it is read by the tool's schema, as
vLLM and the model's serving stacks read it: `integer`, `number`, `boolean`, `null`, `object` and `array`
parameters from their text (a value that does not read as its type stays text, for the tool to refuse),
`string` ones and parameters the schema does not name as written (a program's code keeps its quotes and
its newlines). A body without `<function=...>`, or a parameter named twice, is an error the model reads.

Owns: the format's call body (`parse`) and reading values by a schema (`typed`). Does not own: the tool loop
(`rollout.tools`), the schemas (each tool's: functions, MCP tools, environments, the built-in ones).
"""

from __future__ import annotations

import json
import math
import re

_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|$)", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)


def _unwrapped(value: str) -> str:
    """The value without the one newline the template puts on each side of it."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def parse(body: str) -> tuple[str, dict]:
    """(tool name, {parameter: its text}) of a call's body; ValueError the model reads."""
    found = _FUNCTION.search(body)
    if found is None:
        raise ValueError("error: the tool call has no <function=NAME> ... </function>")
    args: dict = {}
    for key, value in _PARAMETER.findall(found.group(2)):
        key = key.strip()
        if key in args:
            raise ValueError(f"error: the tool call gives parameter {key!r} twice")
        args[key] = _unwrapped(value)
    return found.group(1).strip(), args


def _types(schema) -> list[str]:
    """The JSON types a parameter's schema allows (`type`, a list of them, anyOf / oneOf, nullable)."""
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    out = [declared] if isinstance(declared, str) else [t for t in declared or () if isinstance(t, str)]
    for key in ("anyOf", "oneOf"):
        for choice in schema.get(key) or ():
            out += _types(choice)
    return out + (["null"] if schema.get("nullable") else [])


def _read(text: str, kind: str):
    """`text` as a value of JSON type `kind`; ValueError where it is none."""
    word = text.strip()
    if kind == "integer":
        return int(word)
    if kind == "number":
        number = float(word)
        if not math.isfinite(number):
            raise ValueError(word)
        return int(number) if number.is_integer() and "." not in word and "e" not in word.lower() else number
    if kind == "boolean" and word.lower() in ("true", "false"):
        return word.lower() == "true"
    if kind == "null" and word in ("null", "None"):
        return None
    if kind in ("object", "array"):
        value = json.loads(word)
        if isinstance(value, dict if kind == "object" else list):
            return value
    raise ValueError(word)


def typed(args: dict, parameters: dict | None) -> dict:
    """`args` (texts) read by the tool's parameter schemas `parameters` ({name: schema}; None: unknown)."""
    out = {}
    for key, text in args.items():
        value = text
        for kind in _types((parameters or {}).get(key)):
            if kind == "string":
                break
            try:
                value = _read(text, kind)
                break
            except ValueError:
                continue
        out[key] = value
    return out
