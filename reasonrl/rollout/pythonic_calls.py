"""Tool calls written as a Python list of calls, `[get_weather(city='Paris', days=3), ping()]`: LiquidAI's LFM2 and
LFM2.5 (`rollout.tools.format: lfm2`, vLLM's parser of that name) write one such list between
`<|tool_call_start|>` and `<|tool_call_end|>`, and the answers follow in a ChatML `tool` message per call. Their
chat template writes a string argument in single quotes, a mapping as JSON and any other value as Python writes it,
so a call is read as a Python expression (as vLLM reads it): keyword arguments only, each value a literal (JSON's
`true` / `false` / `null` inside a mapping read as such), an argument's string as written, line breaks and
backslashes included, as the template writes it (vLLM's reader takes Python's escapes in it, so `'a\\nb'` would be
a line break there; transformers' cuts it at its first `)`), and a string inside a list or a mapping with its
escapes, as Python and JSON write them. Anything else (a positional argument, a call inside
an argument, a quote of the string's own kind inside it, text that is no list of calls) is an error the model
reads; vLLM also recovers such a nested quote where only one reading parses, a guess this reader does not make.

Owns: reading such a list (`parse`, one call; `split`, a list's calls one by one). Does not own: the tool loop
(`rollout.tools`), the format's pattern and turn (`rollout.tool_formats`).
"""

from __future__ import annotations

import ast

_JSON_NAMES = {"true": True, "false": False, "null": None}
_VERBATIM = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _verbatim(text: str) -> tuple[str, list[int]]:
    """`text` with each argument's string made to read as written (the template writes it as it is, in quotes):
    a line break, a tab or a backslash inside one escaped, so `'a\\nb'` holds a backslash and an n; a string inside
    a list or a mapping keeps its escapes (the template writes those as Python or JSON does). And where each of its
    characters stands in `text`."""
    out, at, quote, raw, i, before = [], [], None, False, 0, ""  # (before: the last mark outside the strings)
    while i < len(text):
        c = text[i]
        if quote is None and c in "'\"":
            quote, raw = c, before == "="
        elif quote is None and not c.isspace():
            before = c
        elif (
            quote is not None and not raw and c == "\\" and i + 1 < len(text)
        ):  # (an escape: kept, whatever follows)
            out.append(text[i : i + 2])
            at += [i, i + 1]
            i += 2
            continue
        elif c == quote:
            quote = None
        piece = _VERBATIM.get(c, c) if quote is not None and raw else c
        out.append(piece)
        at += [i] * len(piece)
        i += 1
    return "".join(out), at


def _calls(body: str) -> list[ast.Call]:
    """The calls of a list `body`; ValueError the model reads."""
    try:
        tree = ast.parse(_verbatim(body.strip())[0], mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"error: the tool call is not a Python list of calls ({e.msg})") from None
    if not isinstance(tree, ast.List) or not all(isinstance(c, ast.Call) for c in tree.elts):
        raise ValueError("error: the tool call is not a Python list of calls, [name(key=value, ...)]")
    return tree.elts


def _value(node: ast.expr):
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:  # (a mapping written as JSON)
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.List):
        return [_value(n) for n in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(
            f"error: the tool call's argument {ast.unparse(node)[:40]!r} is not a literal"
        ) from None


def _read(call: ast.Call) -> tuple[str, dict]:
    if call.args or any(k.arg is None for k in call.keywords):
        raise ValueError("error: the tool call gives an argument without its name (name(key=value, ...))")
    return ast.unparse(call.func), {k.arg: _value(k.value) for k in call.keywords}


def parse(body: str) -> tuple[str, dict]:
    """(tool name, arguments) of a list holding one call; ValueError the model reads."""
    calls = _calls(body)
    if len(calls) != 1:
        raise ValueError(f"error: give one tool call at a time (the list holds {len(calls)})")
    return _read(calls[0])


def split(body: str) -> list[str]:
    """The calls of a list, each a list of one that `parse` reads; a body that does not read as several calls
    comes back whole (`parse` says what is wrong with it)."""
    try:
        calls = _calls(body)
    except ValueError:
        return [body]
    if len(calls) < 2:
        return [body]
    text = body.strip()
    read, at = _verbatim(text)
    out, start = [], 0
    for c in calls:  # (each call's text, found in the escaped text, taken from the text as written)
        segment = ast.get_source_segment(read, c)
        start = read.index(segment, start)
        out.append(f"[{text[at[start] : at[start + len(segment) - 1] + 1]}]")
        start += len(segment)
    return out
