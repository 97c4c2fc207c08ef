"""LiveCodeBench (`livecodebench/code_generation_lite`, any release): `question_title`,
`question_content`, `platform`, `question_id`, `contest_date`, `starter_code`, `difficulty`,
`public_test_cases` (JSON text: [{input, output, testtype: stdin | functional}]),
`private_test_cases` (JSON text, or base64 -> zlib -> pickle -> JSON text, as released), `metadata`
(JSON text with `func_name`). Options `since` / `until` keep the problems whose `contest_date` lies in
[since, until) (ISO dates), the window a model is scored on. data_source `codegen__livecodebench`; gold = stdin/stdout tests, or
call-based tests of `Solution().<func_name>` whose inputs are one JSON value per line.

The pickled private tests are opened with an unpickler that admits only plain strings (no classes,
no callables), so a crafted file cannot run code here."""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from typing import Any

from reasonrl.data.prepare import RowError, prompts, register, text
from reasonrl.types import Problem


class _StringsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ARG002 - refuse every global
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def decode_tests(value: Any, field: str) -> list[dict]:
    """The test cases of `field`: a list of {input, output} texts (plus `testtype`)."""
    cases = _decoded(value, field)
    if not isinstance(cases, list) or not all(
        isinstance(c, dict) and isinstance(c.get("input"), str) and isinstance(c.get("output"), str)
        for c in cases
    ):
        raise RowError(field, "must be a list of test cases with input and output texts")
    return cases


def _decoded(value: Any, field: str) -> Any:
    if value is None or isinstance(value, list):
        return value or []
    if not isinstance(value, str):
        return value  # not a list: the caller names the field
    if not value.strip():
        return []
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        raw = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        return json.loads(raw)
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError, TypeError) as e:
        raise RowError(field, f"is neither JSON nor base64(zlib(pickle(JSON))) ({e})") from None


def _args(line_block: str, field: str) -> list:
    try:
        return [json.loads(line) for line in line_block.split("\n") if line.strip()]
    except json.JSONDecodeError as e:
        raise RowError(field, f"functional test input is not one JSON value per line ({e.msg})") from None


def tests_to_ground_truth(cases: list[dict], func_name: str | None, field: str) -> dict[str, Any]:
    kinds = {c.get("testtype", "stdin") for c in cases}
    if kinds == {"functional"}:
        if not func_name:
            raise RowError("metadata", "functional tests need metadata.func_name")
        try:
            outputs = [json.loads(c["output"]) for c in cases]
        except (KeyError, json.JSONDecodeError) as e:
            raise RowError(field, f"functional test output is not JSON ({e})") from None
        return {"inputs": [_args(c["input"], field) for c in cases], "outputs": outputs, "fn_name": func_name}
    if kinds <= {"stdin"}:
        return {"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases]}
    raise RowError(field, f"mixes test types {sorted(kinds)}")


def in_window(date: str, since: str | None, until: str | None) -> bool:
    """Whether an ISO `contest_date` lies in [since, until) (dates compared as ISO text: "2024-08-01")."""
    day = date[:10]
    return (not since or day >= since) and (not until or day < until)


@register("livecodebench", "livecodebench/code_generation_lite: question_content, starter_code, "
          "public_test_cases, private_test_cases, metadata, contest_date", since=None, until=None)  # fmt: skip
def livecodebench(row: dict, ctx) -> Problem | None:
    content = text(row, "question_content")
    since, until = ctx.options["since"], ctx.options["until"]
    if since or until:  # a contest-date window (problems after a model's cutoff): the others are dropped
        date = str(row.get("contest_date") or "")
        if len(date) < 10:
            raise RowError("contest_date", f"must be an ISO date to filter by --since/--until, got {date!r}")
        if not in_window(date, since, until):
            return None
    cases = decode_tests(row.get("public_test_cases"), "public_test_cases")
    cases += decode_tests(row.get("private_test_cases"), "private_test_cases")
    if not cases:
        raise RowError("public_test_cases", "no tests (public or private)")
    meta = row.get("metadata") or {}
    if isinstance(meta, str):
        try:
            meta = json.loads(meta) if meta.strip() else {}
        except json.JSONDecodeError as e:
            raise RowError("metadata", f"is not JSON ({e.msg})") from None
    if not isinstance(meta, dict):
        raise RowError("metadata", f"must be a mapping (holding func_name), got {type(meta).__name__}")
    starter = str(row.get("starter_code") or "")
    gold = tests_to_ground_truth(cases, meta.get("func_name"), "private_test_cases")
    fmt = f"{prompts.LCB_STARTER}\n{prompts.code_fence(starter)}" if starter.strip() else \
        f"{prompts.LCB_STDIO}\n```python\n# YOUR CODE HERE\n```"  # fmt: skip
    body = f"{prompts.LCB_SYSTEM}\n\n### Question:\n{content}\n\n### Format: {fmt}\n\n### Answer: (use the provided format with backticks)"
    qid = str(row.get("question_id") or ctx.index)
    extra = {"index": ctx.index, "question_id": qid, "platform": str(row.get("platform") or ""),
             "difficulty": str(row.get("difficulty") or ""), "contest_date": str(row.get("contest_date") or "")}  # fmt: skip
    return Problem(prompts.user(body), gold, "codegen__livecodebench", "codegen", extra, uid=f"lcb/{qid}")
