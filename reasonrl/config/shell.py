"""Reading a launch script without running it: what the verl and OpenRLHF readers share.

Owns: `script_commands` (each command of a shell script as its words, with the script's NAME=value
assignments, its arrays NAME=( ... ) and the environment filled in: $VAR, ${VAR}, ${VAR:-default},
${VAR:+alternative}, ${NAME[@]}, $((integer arithmetic)); continuation lines joined, a quoted string or
an array over several lines kept whole; a command substitution $(...) is not run, it stays as written).
Control flow is not followed: both branches of an `if` are read, in order. Does not own: what a
trainer's words mean (`config.from_verl`, `config.from_openrlhf`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator


def script_commands(text: str, unbalanced: Callable[[str], list[str]] = str.split) -> Iterator[list[str]]:
    """The words of each command of `text` (assignments are read, not yielded); `unbalanced(line)` splits a
    line whose quotes still do not balance after expansion."""
    env: dict[str, str] = {}
    for line in _logical_lines(text):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assign = re.fullmatch(r"(?:export\s+)?([A-Za-z_]\w*)=(.*)", line, re.S)
        plain = re.sub(r"\$\(\(.*?\)\)|\$\([^)]*\)", "0", line)  # $((...)), $(...): one word each
        try:
            words = shlex.split(plain, comments=True)[1 + line.startswith("export") :]
        except ValueError:
            words = []
        if assign and words and re.fullmatch(r"[A-Za-z_./][\w./-]*", words[0]):
            assign = None  # `NAME=value command ...`: a command run with that variable set
        if assign and assign.group(2).startswith("("):  # an array: NAME=( words, over lines, # comments )
            name, value = assign.group(1), _expand(assign.group(2), env)
            try:
                words = _split(value[1 : value.rindex(")")])
            except ValueError:
                words = value.strip("()").split()
            env[name] = " ".join(shlex.quote(w) for w in words)  # "${NAME[@]}": the words, each kept whole
            continue
        if assign:  # X="$X more" appends to X's value so far (unset: empty), as the shell does
            name, value = assign.groups()
            env.setdefault(name, os.environ.get(name, ""))
            expanded = _expand(value, env)
            try:
                env[name] = " ".join(_split(expanded))
            except ValueError:
                env[name] = expanded.strip("\"'")
            continue
        expanded = _expand(line, env)
        try:
            yield _split(expanded)
        except ValueError:
            yield unbalanced(expanded)


def _split(text: str) -> list[str]:
    """shlex's words of `text`, a command substitution $(...) (not run) kept whole inside its word, as
    written; ValueError for quotes that do not balance."""
    kept: list[str] = []

    def keep(m) -> str:
        kept.append(m.group(0))
        return f"\x00{len(kept) - 1}\x00"

    prev = None
    while prev != text:  # the innermost first: $(a "$(b)") is kept whole
        prev, text = text, re.sub(r"\$\([^()]*\)", keep, text)
    words = shlex.split(text, comments=True)
    for _ in range(len(kept) + 1):  # restored from the outermost in, as many levels as were kept
        words = [re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], w) for w in words]
    return words


def _expand(text: str, env: dict[str, str]) -> str:
    """$VAR, ${VAR}, ${VAR:-default}, ${VAR:+alternative} and $((integer arithmetic)) with the script's own
    variables, then the environment's (as the shell would); the innermost first, so a default may hold
    variables. An unknown variable is left as written (it shows in the recipe)."""

    def var(name: str, default: str | None = None) -> str | None:
        value = env.get(name, os.environ.get(name))
        return default if default is not None and not value else value  # ${X:-d}: d when X is unset or empty

    def arith(m):
        expr = re.sub(r"\$?\{?([A-Za-z_]\w*)\}?", lambda v: var(v.group(1)) or v.group(0), m.group(1))
        if re.fullmatch(r"[\d\s+\-*/()]+", expr) and "**" not in expr:  # no powers: bounded work
            return str(int(eval(expr.replace("/", "//"), {"__builtins__": {}})))  # noqa: S307 - digits only
        return m.group(0)

    prev = None
    for _ in range(64):  # each pass fills one level of nesting; a value naming itself cannot loop forever
        if prev == text or len(text) > 1_000_000:
            break
        prev = text
        text = re.sub(r"\$\(\(([^()]*(?:\([^()]*\)[^()]*)*)\)\)", arith, text)
        # (${1:-d}: a positional parameter, which a converted script never has: d)
        text = re.sub(r"\$\{([A-Za-z_]\w*|\d+):-([^${}]*)\}", lambda m: var(m.group(1), m.group(2)), text)
        text = re.sub(
            r"\$\{([A-Za-z_]\w*|\d+):\+([^${}]*)\}", lambda m: m.group(2) if var(m.group(1)) else "", text
        )  # ${X:+a}: a when X is set and not empty, else nothing
        # "${NAME[@]}": an array's words, outside the quotes so that each stays a word of its own
        text = re.sub(r'"?\$\{([A-Za-z_]\w*)\[[@*]\]\}"?', lambda m: var(m.group(1)) or m.group(0), text)
        text = re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)",
                      lambda m: var(m.group(1) or m.group(2)) or m.group(0), text)  # fmt: skip
    return text


def _logical_lines(text: str):
    """The script's commands: continuation lines joined, and a quoted string or an array assignment that
    spans lines kept whole."""
    buf = ""
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        buf = f"{buf}\n{raw}" if buf else raw
        try:
            words = shlex.split(buf, comments=True)
        except ValueError:  # an open quote: the string goes on in the next line
            continue
        if re.match(r"\s*(?:export\s+)?[A-Za-z_]\w*=\(", buf) and not (words and words[-1].endswith(")")):
            continue  # an array assignment goes on to its closing parenthesis

        yield buf
        buf = ""
    if buf:
        yield buf
