"""Verifier "code": run the response's Python program against the problem's tests in the sandbox.

Owns: extracting the program (the last fenced code block after any `</think>`), reading the test
specification from `ground_truth` (Reasoning360 / verl / HumanEval / MBPP / APPS shapes, below),
building the programs to execute, tolerant stdout comparison, and the all-pass or pass-fraction
score. Does not own: executing anything (`rewards.sandbox` locally, `rewards.sandbox.fusion`
remotely) or routing (`rewards.routing`: data_source `codegen*` -> "code").

ground_truth (a dict, or a JSON string of one):
  {"inputs": [stdin...], "outputs": [stdout...]}       stdin/stdout tests (Guru codegen__taco,
                                                        primeintellect, livecodebench; verl prime)
  {"inputs": [[args]...], "outputs": [...], "fn_name"}  call-based (APPS/TACO): result == output
                                                        (or == output[0] when output is [value])
  {"functional": "test code"}                           appended to the program; passes iff it exits
                                                        0 (Guru leetcode2k, mbpp, taco call-based)
  {"test": "def check(candidate): ...", "entry_point"}  HumanEval: + `check(entry_point)`
  {"test_list": ["assert ..."], "test_setup_code"}      MBPP asserts (also "assert_list")
`extra_info["prefix"]` (Guru leetcode2k: imports such as `from typing import *`) is put before the
program. Reasoning360 means to do the same but misspells the key ("predfx"), so its leetcode rows run
without it; we prepend it deliberately.

Verdicts the program cannot forge (`rewards.sandbox.harness`): stdin/stdout tests compare the output
on the host; call-based, HumanEval, MBPP and functional tests run in a trusted driver process inside
the sandbox, which calls the program's functions through RPC and sees their results only as plain
data. Exiting early, printing markers, patching builtins / `check` / `math.isclose`, tracing,
`atexit`, objects with a lying `__eq__`: none of it reaches the tests (tests/security/
test_reward_hacking.py). `extra_info["prefix"]` and MBPP's setup code are trusted: they run in both.
Known limit (as in HumanEval's own harness): a helper the tests call that the *program* defines (e.g.
`poly` in HumanEval/32, part of the prompt) is the program's to redefine.

Score: score_mode="all_pass" (1 iff every test passes, stops at the first failure) or "fraction"
(passed / total). info: reason ("correct", "wrong", "no_code", "timeout", "runtime_error",
"error: sandbox_error" (the sandbox or SandboxFusion failed, not the program: a verifier error),
"bad_ground_truth: ..."), passed, total, first failure details.
"""

from __future__ import annotations

import functools
import math
import re
import textwrap
import time
from collections.abc import Callable
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.rewards.extract import answer_region
from reasonrl.rewards.ground_truth import json_value
from reasonrl.rewards.sandbox.server import run_job, run_one_shot
from reasonrl.types import Problem

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n`]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
_PY_LANGS = {"python", "py", "python3", "py3"}
_YES_NO = {"yes", "no"}
_INT = re.compile(r"[+-]?\d+")
SCORE_MODES = ("all_pass", "fraction")
BACKENDS = ("local", "sandbox_fusion")
_MAX_INFO_CHARS = 500

JobRunner = Callable[[dict[str, Any]], dict[str, Any]]


def extract_code(response: str) -> str | None:
    """The last ```python block (else the last untagged block) after any </think>; None if none."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(answer_region(response))]
    tagged = [b for lang, b in blocks if lang in _PY_LANGS]
    plain = [b for lang, b in blocks if not lang]
    chosen = tagged[-1] if tagged else (plain[-1] if plain else None)
    if chosen is None:
        return None
    chosen = textwrap.dedent(chosen).strip("\n")
    return chosen if chosen.strip() else None


def outputs_match(actual: str, expected: str, float_tol: float = 1e-6) -> bool:
    """Tolerant stdout comparison: line endings, trailing spaces and blank edge lines ignored; lines
    compared token by token; yes/no case-insensitive; decimals within `float_tol` (absolute or
    relative). Integers compare exactly (no float rounding of large numbers)."""
    a_lines = [ln.rstrip() for ln in actual.replace("\r\n", "\n").strip().split("\n")]
    e_lines = [ln.rstrip() for ln in expected.replace("\r\n", "\n").strip().split("\n")]
    if a_lines == e_lines:
        return True
    if len(a_lines) != len(e_lines):
        return False
    for a_line, e_line in zip(a_lines, e_lines):
        a_tok, e_tok = a_line.split(), e_line.split()
        if len(a_tok) != len(e_tok):
            return False
        if not all(_tokens_match(a, e, float_tol) for a, e in zip(a_tok, e_tok)):
            return False
    return True


def _tokens_match(a: str, e: str, tol: float) -> bool:
    if a == e:
        return True
    if a.lower() in _YES_NO and e.lower() in _YES_NO:
        return a.lower() == e.lower()
    if _INT.fullmatch(a) and _INT.fullmatch(e):
        return int(a) == int(e)
    try:
        x, y = float(a), float(e)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return False
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def parse_tests(ground_truth: Any) -> dict[str, Any]:
    """Normalise a ground truth into {"kind": "stdio"|"call"|"program"|"asserts", ...}.

    Raises ValueError naming what is wrong."""
    gt = json_value(ground_truth)  # Reasoning360 stores code tests as JSON strings
    if not isinstance(gt, dict):
        raise ValueError(f"ground_truth must be a dict, got {type(gt).__name__}")
    if "inputs" in gt and "outputs" in gt:
        inputs, outputs = gt["inputs"], gt["outputs"]
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise ValueError("inputs and outputs must be lists")
        if len(inputs) != len(outputs) or not inputs:
            raise ValueError(f"{len(inputs)} inputs vs {len(outputs)} outputs")
        if gt.get("fn_name"):
            return {"kind": "call", "fn_name": str(gt["fn_name"]), "inputs": inputs, "outputs": outputs}
        return {"kind": "stdio", "inputs": [_text(x) for x in inputs], "outputs": [_text(x) for x in outputs]}
    if isinstance(gt.get("functional"), str):
        return {"kind": "program", "tests": gt["functional"]}
    if isinstance(gt.get("test"), str) and gt.get("entry_point"):
        return {"kind": "program", "tests": f"{gt['test']}\n\ncheck({gt['entry_point']})"}
    asserts = gt.get("test_list") or gt.get("assert_list")
    if isinstance(asserts, list) and asserts:
        imports, code = gt.get("test_imports") or [], gt.get("test_setup_code") or ""
        if (
            not isinstance(imports, list)
            or not all(isinstance(x, str) for x in imports)
            or not isinstance(code, str)
        ):
            raise ValueError("test_imports must be a list of lines and test_setup_code a text")
        setup = "\n".join(filter(None, [*imports, code]))
        return {"kind": "asserts", "setup": setup, "asserts": [str(a) for a in asserts]}
    keys = ", ".join(sorted(gt)) or "(none)"
    raise ValueError(f"unsupported test format with keys {keys}")


def _text(x: Any) -> str:
    return "\n".join(map(str, x)) if isinstance(x, list) else str(x)


def _fn_expr(fn_name: str, program: str) -> str:
    if fn_name.startswith("Solution()."):
        return fn_name
    if re.search(r"^class Solution\b", program, re.MULTILINE) and not re.search(
        rf"^def {re.escape(fn_name)}\b", program, re.MULTILINE
    ):
        return f"Solution().{fn_name}"
    return fn_name


@functools.lru_cache(maxsize=16)
def _fusion_client(urls: str | tuple[str, ...] | None):
    """One client per server list, so round-robin spreads calls across verifier invocations."""
    from reasonrl.rewards.sandbox.fusion import SandboxFusionClient

    return SandboxFusionClient(urls)


def job_runner(backend: str, sandbox_fusion_urls: Any, isolation: str | None) -> JobRunner:
    """A function running one harness job: the local sandbox's server pool, or one-shot remote."""
    if backend == "local":
        return functools.partial(run_job, isolation=isolation)
    if backend == "sandbox_fusion":
        urls = sandbox_fusion_urls
        client = _fusion_client(urls if urls is None or isinstance(urls, str) else tuple(urls))
        return functools.partial(_remote_job, execute=client.run_python)
    raise ValueError(f"unknown code backend {backend!r}; choose one of {BACKENDS}")


def _remote_job(job: dict[str, Any], execute) -> dict[str, Any]:
    """stdin/stdout tests run the program itself remotely (the expected output stays here); every
    other kind runs the trusted harness remotely, one job per request."""
    if job["kind"] != "stdio":
        return run_one_shot(job, execute)
    program = f"{job['prefix']}\n{job['program']}" if job.get("prefix") else job["program"]
    res = execute(program, job["stdin"], job["timeout_s"], job["memory_mb"])
    return {"status": res.status, "stdout": res.stdout, "stderr": res.stderr, "exit_code": res.exit_code}


def _failure_reason(reply: dict[str, Any], error: str = "") -> str:
    """Why a job failed: its status, else the first failed test's `error` (an assertion: "wrong")."""
    if reply["status"] == "sandbox_error":  # the sandbox (or its remote service) failed, not the program:
        return "error: sandbox_error"  # counted with the verifier errors, scored again by a rerun
    if reply["status"] in ("timeout", "output_limit"):
        return reply["status"]
    if reply["status"] == "failed":
        return "exited_before_tests" if reply.get("program_failed") == "exit" else "runtime_error"
    return "wrong" if not error or error.startswith("AssertionError") else "runtime_error"


def clip_text(s: str) -> str:
    return s if len(s) <= _MAX_INFO_CHARS else s[:_MAX_INFO_CHARS] + "...[truncated]"


@VERIFIERS.register("code")
def code(
    response: str,
    problem: Problem,
    score_mode: str = "all_pass",
    timeout_s: float = 6.0,
    memory_mb: int = 1024,
    total_timeout_s: float = 120.0,
    max_tests: int | None = None,
    float_tol: float = 1e-6,
    backend: str = "local",
    sandbox_fusion_urls: Any = None,
    isolation: str | None = None,
) -> RewardResult:
    """Score a code response by running its tests (see the module docstring for formats)."""
    if score_mode not in SCORE_MODES:
        raise ValueError(f"unknown score_mode {score_mode!r}; choose one of {SCORE_MODES}")
    program = extract_code(response)
    if program is None:
        return RewardResult(0.0, {"extracted": None, "reason": "no_code", "passed": 0, "total": 0})
    try:
        spec = parse_tests(problem.ground_truth)
    except (ValueError, TypeError) as e:
        return RewardResult(0.0, {"extracted": program, "reason": f"bad_ground_truth: {e}"})
    extracted = program
    prefix = (problem.extra_info or {}).get("prefix")
    prefix = prefix if isinstance(prefix, str) else ""
    run = job_runner(backend, sandbox_fusion_urls, isolation)
    outcomes, total, failure = run_spec(
        spec, program, run, prefix=prefix, timeout_s=timeout_s, memory_mb=memory_mb, max_tests=max_tests,
        tol=float_tol, stop_early=score_mode == "all_pass", total_timeout_s=total_timeout_s,
    )  # fmt: skip
    passed = sum(outcomes)
    if score_mode == "all_pass":
        score = float(total > 0 and passed == total)
    else:
        score = passed / total if total else 0.0
    info: dict[str, Any] = {"extracted": extracted, "passed": passed, "total": total}
    info["reason"] = "correct" if passed == total and total else (failure or {}).get("reason", "wrong")
    if failure:
        info["failure"] = failure
    return RewardResult(score, info)


code.run_mode = "thread"  # waits on sandbox subprocesses and bounds its own time (total_timeout_s)


def check_backend(options: dict[str, Any], problem: Problem | None = None) -> None:
    """Load-time check of the execution options shared by "code" and "cruxeval"."""
    from reasonrl.rewards.sandbox import ISOLATIONS
    from reasonrl.rewards.sandbox.fusion import ENV_URLS, parse_urls

    backend = options.get("backend", "local")
    if backend not in BACKENDS:
        raise ValueError(f"unknown code backend {backend!r}; choose one of {BACKENDS}")
    if backend == "sandbox_fusion" and not parse_urls(options.get("sandbox_fusion_urls")):
        raise ValueError(f"backend=sandbox_fusion needs sandbox_fusion_urls (or env {ENV_URLS})")
    isolation = options.get("isolation")
    if isolation is not None and isolation not in ISOLATIONS:
        raise ValueError(f"unknown sandbox isolation {isolation!r}; choose one of {ISOLATIONS}")
    for key in ("timeout_s", "memory_mb", "total_timeout_s"):
        if key in options and not float(options[key]) > 0:
            raise ValueError(f"{key} must be > 0, got {options[key]!r}")


def _check_code_setup(options: dict[str, Any], problem: Problem | None = None) -> None:
    check_backend(options, problem)
    mode = options.get("score_mode", "all_pass")
    if mode not in SCORE_MODES:
        raise ValueError(f"unknown score_mode {mode!r}; choose one of {SCORE_MODES}")
    max_tests = options.get("max_tests")
    if max_tests is not None and (type(max_tests) is not int or max_tests < 1):
        raise ValueError(f"max_tests must be a whole number >= 1 or null, got {max_tests!r}")
    if problem is not None:  # tests the verifier cannot run fail at load, naming the row
        try:
            parse_tests(problem.ground_truth)
        except (ValueError, TypeError) as e:
            raise ValueError(f"code: ground truth: {e}") from None


code.check_setup = _check_code_setup


def backend_services(options: dict[str, Any], problems=()) -> dict[str, str]:  # noqa: ARG001 - per options
    """The SandboxFusion servers a sandbox_fusion backend sends programs to ({url: where it is set});
    none for the local sandbox. Shared by "code" and "cruxeval" (`rewards.services`)."""
    from reasonrl.rewards.sandbox.fusion import ENV_URLS, parse_urls

    if options.get("backend", "local") != "sandbox_fusion":
        return {}
    where = "its sandbox_fusion_urls option" if options.get("sandbox_fusion_urls") else ENV_URLS
    return {
        url: f"the SandboxFusion server ({where})" for url in parse_urls(options.get("sandbox_fusion_urls"))
    }


code.services = backend_services

# the probe's test programs: one stdin/stdout program and one called through the harness
_PROBES = (("print(sum(map(int, input().split())))", {"inputs": ["2 3\n"], "outputs": ["5\n"]}),
           ("def add(a, b):\n    return a + b", {"fn_name": "add", "inputs": [[2, 3]], "outputs": [5]}))  # fmt: skip


def backend_probe(options: dict[str, Any], problems=()) -> list[str]:  # noqa: ARG001 - per options
    """Run two right programs (stdin/stdout, and a function called through the harness) where this
    backend runs programs: the local sandbox, or each SandboxFusion server; one line each, or ValueError
    naming it and what it answered (a sandbox that cannot run them, e.g. bwrap missing or blocked in a
    container, fails every program as a verifier error). Shared by "code" and "cruxeval"
    (`rewards.services`)."""
    from reasonrl.rewards.sandbox import ENV_VAR, SandboxUnavailable
    from reasonrl.rewards.sandbox.process import isolation_mode

    if options.get("backend", "local") == "local":
        mode = isolation_mode(options.get("isolation"))
        where = {f"the local code sandbox ({mode})": job_runner("local", None, options.get("isolation"))}
    else:
        where = {f"the SandboxFusion server at {url}": job_runner("sandbox_fusion", [url], None)
                 for url in backend_services(options)}  # fmt: skip
    lines = []
    for what, run in where.items():
        t0 = time.monotonic()
        for program, tests in _PROBES:
            try:
                passed, _, failure = run_spec(parse_tests(tests), program, run, timeout_s=10.0, memory_mb=256)
            except SandboxUnavailable as e:
                raise ValueError(f"{what} cannot run programs: {e}; install it (Debian/Ubuntu: `apt-get install "
                                 f"bubblewrap`) or run model code WITHOUT isolation: {ENV_VAR}=unisolated") from None  # fmt: skip
            if not all(passed):
                failure = failure or {}
                detail = str(failure.get("reason")) + "".join(
                    f", {k} {failure[k]!r}" for k in ("stdout", "stderr", "error") if failure.get(k)
                )
                raise ValueError(f"{what} failed a test program that should pass "
                                 f"({program.splitlines()[0]!r}): {detail}")  # fmt: skip
        lines.append(f"{what} ran two test programs ({time.monotonic() - t0:.1f} s)")
    return lines


code.probe = backend_probe


def run_spec(spec, program, run: JobRunner, *, prefix="", timeout_s, memory_mb, max_tests=None, tol=1e-6,
             stop_early=True, total_timeout_s=120.0):  # fmt: skip
    """Run parsed tests (`parse_tests`) against `program` with the job runner `run`.

    Returns (per-test pass list, number of tests planned, first failure info or None)."""
    deadline = time.monotonic() + total_timeout_s
    base = {"program": program, "prefix": prefix, "memory_mb": memory_mb, "stop_early": stop_early}
    kind = spec["kind"]
    if kind == "stdio":
        return _run_stdio(spec, base, run, timeout_s, max_tests, tol, stop_early, deadline)
    if kind == "call":
        tests = [list(t) for t in zip(spec["inputs"], spec["outputs"])][: max_tests or None]
        job = {**base, "kind": "call", "fn": _fn_expr(spec["fn_name"], program), "tests": tests, "tol": tol}
    elif kind == "program":
        tests = [spec["tests"]]
        job = {**base, "kind": "script", "tests": tests}
    else:  # asserts: one test each, so the fraction counts each assert
        tests = spec["asserts"][: max_tests or None]
        job = {**base, "kind": "script", "setup": spec["setup"], "tests": tests}
    budget = min(timeout_s * max(1, len(tests)), deadline - time.monotonic())
    if budget <= 0:
        return [False] * len(tests), len(tests), {"reason": "time_budget", "test": 0}
    reply = run({**job, "timeout_s": budget})
    outcomes = [bool(x) for x in reply.get("passed", [])][: len(tests)]
    outcomes += [False] * (len(tests) - len(outcomes))
    failure = None
    if not all(outcomes):
        # the harness's errors: one per failed test in order, then the job's own, if it broke off; so
        # the first failed test's when the job ran through (matching "test"), the job's when it did not
        errors = reply.get("errors") or [""]
        error = errors[0] if reply["status"] == "success" else errors[-1]
        failure = {
            "reason": _failure_reason(reply, error),
            "test": outcomes.index(False),
            "error": clip_text(error),
        }
    return outcomes, len(tests), failure


def _run_stdio(spec, base, run, timeout_s, max_tests, tol, stop_early, deadline):
    pairs = list(zip(spec["inputs"], spec["outputs"]))[: max_tests or None]
    outcomes: list[bool] = []
    failure: dict[str, Any] | None = None
    for i, (stdin, want) in enumerate(pairs):
        budget = min(timeout_s, deadline - time.monotonic())
        if budget <= 0:
            failure = failure or {"reason": "time_budget", "test": i}
            outcomes += [False] * (len(pairs) - i)
            break
        reply = run({**base, "kind": "stdio", "stdin": stdin, "timeout_s": budget})
        ok = reply["status"] == "success" and outputs_match(reply["stdout"], want, tol)
        outcomes.append(ok)
        if not ok and failure is None:
            failure = {"reason": _failure_reason(reply) if reply["status"] != "success" else "wrong", "test": i,
                       "stdin": clip_text(stdin), "expected": clip_text(want), "stdout": clip_text(reply["stdout"]),
                       "stderr": clip_text(reply["stderr"])}  # fmt: skip
        if not ok and stop_early:
            break
    return outcomes, len(pairs), failure
