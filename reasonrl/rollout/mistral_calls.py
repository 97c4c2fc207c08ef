"""Mistral's tool calls (`rollout.tools.format: mistral` and `mistral_v7`), as Mistral's own tokenizers
(`mistral-common`) write them: the call is `[TOOL_CALLS]` ... `</s>` (control tokens: the call ends the
assistant's message), answered by a `[TOOL_RESULTS]` ... `[/TOOL_RESULTS]` turn after which the assistant's
text goes on. What is between depends on the tokenizer's version:

  v3 (Mistral 7B v0.3, Nemo, Large 2407)   [TOOL_CALLS][{"name": N, "arguments": {...}, "id": ID}]</s>
                                           [TOOL_RESULTS]{"content": OUT, "call_id": ID}[/TOOL_RESULTS]
  v7 (Small 3 / 3.1, Large 2411)           the same call; [TOOL_RESULTS]ID[TOOL_CONTENT]OUT[/TOOL_RESULTS]
  v11 (Small 3.2)                          [TOOL_CALLS]N[CALL_ID]ID[ARGS]{...}</s>
                                           [TOOL_RESULTS]ID[TOOL_CONTENT]OUT[/TOOL_RESULTS]
  v13 (Magistral, Devstral, Ministral 3)   [TOOL_CALLS]N[ARGS]{...}</s>  [TOOL_RESULTS]OUT[/TOOL_RESULTS]

The current syntax (`[ARGS]`) says which turn answers it (an id: v11's; none: v13's); a JSON list of calls
does not (v3 and v7 tokenizers hold the same control tokens), so `mistral` answers it as v3 does and
`mistral_v7` as v7 does. In v3's turn the output is JSON content, as mistral-common writes it (an output
that is itself valid JSON is kept as that value, any other text as a string). A message's several calls
(`split`) run in turn with `rollout.tools.parallel_calls` > 1, each answered by a turn of its own, as
mistral-common writes consecutive tool messages; a message with more calls than that is answered with an
error the model reads. An id must be 9 letters or digits, as Mistral's are.

Owns: the two formats' call pattern, reading a call (`parse`), the calls of one message (`split`) and the
turn that answers each (`results`).
Does not own: the tool loop, which finds, runs and answers calls (`rollout.tools`).
"""

from __future__ import annotations

import json
import re

from reasonrl.rollout.call_arguments import json_arguments

CALL = re.compile(r"\[TOOL_CALLS\](.*?)</s>", re.S)  # (found in the text decoded with the special tokens)
_ID = re.compile(r"[A-Za-z0-9]{9}")


def _read(body: str) -> tuple[str, dict, str, bool]:
    """(name, arguments, call id or "", written as a JSON list) of a call's body; ValueError the model reads."""
    body = body.strip()
    listed = body.startswith("[")
    try:
        if listed:  # v2-v7: a JSON list of calls
            calls = json.loads(body)
            if not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
                raise ValueError("error: give one tool call at a time, as a list of one call")
            name, args, cid = calls[0].get("name", ""), calls[0].get("arguments", {}), calls[0].get("id", "")
        else:  # v11+: NAME[CALL_ID]ID[ARGS]{...} or NAME[ARGS]{...}
            if "[TOOL_CALLS]" in body:
                raise ValueError("error: give one tool call at a time")
            head, sep, text = body.partition("[ARGS]")
            if not sep:
                raise ValueError("error: the tool call has no [ARGS]")
            name, _, cid = head.partition("[CALL_ID]")
            args = text
    except json.JSONDecodeError as e:
        raise ValueError(f"error: the tool call is not valid JSON ({e.msg})") from None
    args = json_arguments(args)
    cid = str(cid or "")
    if cid and not _ID.fullmatch(cid):
        raise ValueError(f"error: the call id {cid[:20]!r} is not 9 letters or digits")
    return str(name or "").strip(), args, cid, listed


def parse(body: str) -> tuple[str, dict]:
    """(tool name, arguments) of a call's body; ValueError the model reads."""
    name, args, _, _ = _read(body)
    return name, args


def split(body: str) -> list[str]:
    """The bodies of the calls one message's `body` holds, each one `parse` reads (a JSON list's calls: each a list
    of one); a body that does not read as several calls comes back whole (`parse` says what is wrong with it)."""
    text = body.strip()
    if not text.startswith("["):  # v11+: [TOOL_CALLS] before each call
        return body.split("[TOOL_CALLS]")
    try:
        calls = json.loads(text)
    except json.JSONDecodeError:
        return [body]
    if not isinstance(calls, list) or len(calls) < 2:
        return [body]
    return [json.dumps([c], ensure_ascii=False) for c in calls]


def _content(output: str):
    """What v3's JSON turn holds: the output's own JSON value where it is one, else the text."""
    try:
        return json.loads(output)
    except ValueError:
        return output


def results(body: str, output: str, v7: bool = False) -> tuple[str, str, str]:
    """(the turn's markers before the output, the output's text, the markers after) answering the call
    `body` with `output` (`v7`: a JSON list of calls is answered as v7 tokenizers do). A call that could not
    be read (its output is the error) is answered without an id."""
    try:
        _, _, cid, listed = _read(body)
    except ValueError:
        cid, listed = "", False
    if listed and not v7:
        shown = {"content": _content(output), **({"call_id": cid} if cid else {})}
        return "[TOOL_RESULTS]", json.dumps(shown, ensure_ascii=False), "[/TOOL_RESULTS]"
    if cid or (listed and v7):
        return f"[TOOL_RESULTS]{cid}[TOOL_CONTENT]", output, "[/TOOL_RESULTS]"
    return "[TOOL_RESULTS]", output, "[/TOOL_RESULTS]"


def results_v7(body: str, output: str) -> tuple[str, str, str]:
    return results(body, output, v7=True)
