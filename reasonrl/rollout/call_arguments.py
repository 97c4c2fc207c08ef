"""A tool call's arguments as a JSON object however a model writes them: the object itself, or the JSON text of
one (some models quote their arguments once more). Hermes, Llama, Mistral and harmony calls alike.

Owns: `json_arguments`. Does not own: finding and reading the calls (`rollout.tool_formats` and the modules of
each family it names).
"""

from __future__ import annotations

import json


def json_arguments(value, what: str = "arguments") -> dict:
    """`value` (an object, or its JSON text, itself quoted once at most) as a dict; ValueError the model reads,
    naming `what` the call calls them."""
    try:
        for _ in range(2):  # (a JSON text, then a JSON string of an object)
            value = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as e:
        raise ValueError(f"error: the tool call's {what} are not valid JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"error: the tool call's {what} are not an object")
    return value
