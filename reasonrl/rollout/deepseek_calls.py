"""DeepSeek-V3's tool calls (`rollout.tools.format: deepseek_v3`, vLLM's parser of that name; V3, V3-0324 and
R1-0528 write them so), as its chat template writes them: a message's calls stand in one block, each call its
type, the function's name and its arguments as a fenced JSON block,

  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
  ```json
  {...}
  ```<｜tool▁call▁end｜>
  <｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>

and the outputs follow in one block, `<｜tool▁outputs▁begin｜>` then `<｜tool▁output▁begin｜>OUTPUT<｜tool▁output▁end｜>`
per call and `<｜tool▁outputs▁end｜>`, after which the assistant's text goes on (no new turn). The template closes
the calls' block as part of the assistant's message that holds them, so the tool turn it renders after a plain
assistant message is not this one: `turn: chat_template` is refused for the format. A call whose type is not
`function`, without a fenced block, or whose arguments are not a JSON object is an error the model reads.

Owns: the call's pattern and reading it (`parse`). Does not own: the tool loop (`rollout.tools`), the format's
turn (`rollout.tool_formats`).
"""

from __future__ import annotations

import re

from reasonrl.rollout.call_arguments import json_arguments

SEP = "<｜tool▁sep｜>"
CALL = re.compile(r"<｜tool▁call▁begin｜>(.*?)<｜tool▁call▁end｜>", re.S)
_BODY = re.compile(rf"\s*([^\s<]*){SEP}([^\n]*)\n```(?:json)?[ \t]*\n(.*)\n```\s*\Z", re.S)
BEFORE = "<｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
BETWEEN = "<｜tool▁output▁end｜><｜tool▁output▁begin｜>"
AFTER = "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"


def parse(body: str) -> tuple[str, dict]:
    """(tool name, arguments) of a call's body; ValueError the model reads."""
    found = _BODY.match(body)
    if found is None:
        raise ValueError(
            f"error: the tool call is not function{SEP}NAME then its arguments in a ```json block"
        )
    kind, name, args = found.groups()
    if kind != "function":
        raise ValueError(f"error: the tool call's type is {kind[:20]!r}, not function")
    return name.strip(), json_arguments(args)
