"""Verifier "cruxeval": CRUXEval input / output prediction, checked by running the function.

Owns: reading a Reasoning360 `simulation__cruxeval-{i,o}` row (which task it is, the function, the
trusted side of the assertion), pulling the model's prediction out of its answer as a Python *literal*
(parsed with `ast`, never evaluated here), and building the check program from trusted text plus the
re-serialised literal. Does not own: running anything (`rewards.verifiers.code.run_spec`, which runs the check in
the sandbox's trusted harness locally or on SandboxFusion), or routing (`rewards.routing`:
data_source `simulation__cruxeval*` -> "cruxeval"; `simulation__codeio*` stays with "codeio").

Row format (Reasoning360 data_preprocess/simulation/cruxeval-{i,o}.py):
  ground_truth  JSON `{"functional": "<source of def f(...)>"}` (the function under test)
  extra_info    {"reference": "<gold output, a Python literal>", "dataset": "cruxeval-i"|"cruxeval-o"}
  prompt        ends with "assert f(??) == <output>" (input prediction) or
                "assert f(<input>) == ??" (output prediction); the model must answer with the full
                assertion inside a ```python block.
Task: from extra_info["dataset"], else the data_source, else the prompt's `??` position.
Trusted side: extra_info["reference"] (the gold output); without it, the prompt's output (input
prediction) or the prompt's `f(<input>)` call (output prediction).

Check program (as CRUXEval's `assert <gold> == <generation>`):
  input prediction:   <function>\\n\\nassert (<gold>) == f(<predicted args>)
  output prediction:  <function>\\n\\nassert (<gold>) == (<predicted literal>)
The prediction is the last `assert` (else bare expression) of the last ```python block after the
think block (else the last `assert ...` line of the answer). Only literals are accepted (constants,
tuples, lists, sets, dicts, signed numbers, complex `a+bj`, `set()`): no names, calls (other than
`f(...)` itself in input prediction), operators or attribute access, so a prediction can neither
run code of its own nor change the shape of the assertion (`1) or True or (1` does not parse as
one literal). The verifier re-serialises the parsed literal with `ast.unparse`; the model's text is
never pasted into the program.

Deliberate differences from Reasoning360 (which execs the model's whole code block after the
function, so a block of `pass` or `assert True` scores 1): only the prediction is taken from the
model; the other side of the assertion comes from the row; the output side may not call `f`
(as in CRUXEval's own scorer).

info: reason ("correct", "wrong", "no_answer", "bad_form", "not_literal", "answer_too_long",
"runtime_error", "timeout", "error: sandbox_error", "bad_ground_truth: ..."), extracted, task.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.rewards.extract import answer_region
from reasonrl.rewards.ground_truth import json_value
from reasonrl.rewards.verifiers.code import (
    backend_probe,
    backend_services,
    check_backend,
    clip_text,
    extract_code,
    job_runner,
    run_spec,
)
from reasonrl.types import Problem

MAX_PREDICTION_CHARS = 20_000
_TASKS = {"cruxeval-i": "input", "cruxeval-o": "output"}
_PROMPT_INPUT_TASK = re.compile(r"^[ \t]*assert[ \t]+f\(\?\?\)[ \t]*==[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_PROMPT_OUTPUT_TASK = re.compile(r"^[ \t]*assert[ \t]+(f\(.*\))[ \t]*==[ \t]*\?\?[ \t]*$", re.MULTILINE)
_ASSERT_LINE = re.compile(r"^[ \t]*(assert\b.*)$", re.MULTILINE)
_EMPTY_CONTAINERS = {"set", "frozenset"}


def is_literal(node: ast.AST) -> bool:
    """True iff `node` is a plain literal: constants, containers of literals, signed numbers,
    complex `a+bj` / `a-bj`, and `set()` / `frozenset()` (how Python prints empty sets)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and is_literal(k) for k in node.keys) and all(map(is_literal, node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        right = node.right
        return _is_number(node.left) and isinstance(right, ast.Constant) and isinstance(right.value, complex)
    if isinstance(node, ast.Call):
        func = node.func
        bare = not node.args and not node.keywords
        return bare and isinstance(func, ast.Name) and func.id in _EMPTY_CONTAINERS
    return False


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_number(node.operand)
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float, complex))
        and not isinstance(node.value, bool)
    )


def _is_f_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "f"


def _literal_call(call: ast.Call) -> bool:
    """`f(...)` whose arguments (positional, `*literal`, `name=literal`) are all literals."""
    for arg in call.args:
        if not is_literal(arg.value if isinstance(arg, ast.Starred) else arg):
            return False
    return all(kw.arg is not None and is_literal(kw.value) for kw in call.keywords)


def _statements(text: str) -> list[ast.stmt]:
    """Top-level statements of `text`; if it does not parse, its `assert` lines that do."""
    try:
        return ast.parse(text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    found: list[ast.stmt] = []
    for line in _ASSERT_LINE.findall(text):
        try:
            found += ast.parse(line.strip()).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return found


def extract_prediction(response: str, task: str) -> tuple[str | None, str]:
    """(re-serialised prediction, reason). Input task: the `f(...)` call; output task: the literal.
    reason is "ok", "no_answer", "bad_form", "not_literal" or "answer_too_long"."""
    region = answer_region(response)
    text = extract_code(region) or "\n".join(_ASSERT_LINE.findall(region))
    if not text.strip():
        return None, "no_answer"
    if len(text) > MAX_PREDICTION_CHARS:
        return None, "answer_too_long"
    stmts = _statements(text)
    asserts = [s.test for s in stmts if isinstance(s, ast.Assert)]
    exprs = [s.value for s in stmts if isinstance(s, ast.Expr)]
    if asserts:
        test = asserts[-1]
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
            return None, "bad_form"
        sides = [test.left, test.comparators[0]]
    elif exprs:
        sides = [exprs[-1]]
    else:
        return None, "no_answer"
    calls = [s for s in sides if _is_f_call(s)]
    try:
        if task == "input":
            if len(calls) != 1:
                return None, "bad_form"
            return (ast.unparse(calls[0]), "ok") if _literal_call(calls[0]) else (None, "not_literal")
        others = [s for s in sides if not _is_f_call(s)]
        if len(others) != 1:
            return None, "bad_form"
        return (ast.unparse(others[0]), "ok") if is_literal(others[0]) else (None, "not_literal")
    except RecursionError:
        return None, "not_literal"


def _function(ground_truth: Any) -> str:
    gt = json_value(ground_truth)
    if not isinstance(gt, dict) or not isinstance(gt.get("functional"), str) or not gt["functional"].strip():
        raise ValueError('ground_truth must be {"functional": "<function source>"}')
    return gt["functional"]


def task_of(problem: Problem) -> str:
    """ "input" or "output" prediction, from extra_info.dataset, the data_source, or the prompt."""
    extra = problem.extra_info or {}
    for name in (str(extra.get("dataset", "")), problem.data_source):
        for key, task in _TASKS.items():
            if key in name:
                return task
    if _PROMPT_INPUT_TASK.search(problem.user_text):
        return "input"
    if _PROMPT_OUTPUT_TASK.search(problem.user_text):
        return "output"
    raise ValueError(
        "cannot tell input from output prediction (no extra_info.dataset, data_source or prompt ??)"
    )


def trusted_side(problem: Problem, task: str) -> str:
    """The row's side of the assertion: the gold output, else what the prompt states."""
    ref = (problem.extra_info or {}).get("reference")
    if isinstance(ref, str) and ref.strip():
        side = ref.strip()
    else:
        found = (_PROMPT_INPUT_TASK if task == "input" else _PROMPT_OUTPUT_TASK).findall(problem.user_text)
        if not found:
            raise ValueError("no extra_info.reference and no `assert f(...) == ...` line in the prompt")
        side = found[-1]
    try:
        ast.parse(side, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ValueError(f"trusted side {clip_text(side)!r} is not a Python expression") from None
    return side


def _row(problem: Problem) -> tuple[str, str, str]:
    """(function, task, trusted side) of a row; ValueError naming what is missing."""
    task = task_of(problem)
    return _function(problem.ground_truth), task, trusted_side(problem, task)


@VERIFIERS.register("cruxeval")
def cruxeval(
    response: str,
    problem: Problem,
    timeout_s: float = 6.0,
    memory_mb: int = 1024,
    backend: str = "local",
    sandbox_fusion_urls: Any = None,
    isolation: str | None = None,
) -> RewardResult:
    """1 iff the predicted input / output makes the row's assertion pass in the sandbox."""
    try:
        function, task, gold = _row(problem)
    except ValueError as e:
        return RewardResult(0.0, {"extracted": None, "reason": f"bad_ground_truth: {e}"})
    prediction, why = extract_prediction(response, task)
    info: dict[str, Any] = {"extracted": prediction, "task": task}
    if prediction is None:
        return RewardResult(0.0, {**info, "reason": why})
    check = f"assert ({gold}) == " + (prediction if task == "input" else f"({prediction})")
    run = job_runner(backend, sandbox_fusion_urls, isolation)
    outcomes, _, failure = run_spec({"kind": "program", "tests": check}, function, run, timeout_s=timeout_s,
                                    memory_mb=memory_mb, tol=0.0, total_timeout_s=timeout_s)  # fmt: skip
    if outcomes and outcomes[0]:
        return RewardResult(1.0, {**info, "reason": "correct"})
    failure = failure or {}
    return RewardResult(
        0.0, {**info, "reason": failure.get("reason", "wrong"), "error": failure.get("error", "")}
    )


cruxeval.run_mode = "thread"  # waits on a sandbox subprocess and bounds its own time (timeout_s)


def _check(options: dict[str, Any], problem: Problem | None = None) -> None:
    check_backend(options, problem)
    if problem is not None:  # a row the verifier cannot build a check from fails at load, naming it
        try:
            _row(problem)
        except ValueError as e:
            raise ValueError(f"cruxeval: {e}") from None


cruxeval.check_setup = _check
cruxeval.services = backend_services
cruxeval.probe = backend_probe
