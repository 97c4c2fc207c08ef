"""rewards.sandbox.run_python: the API contract (status, exit code, streams, limits, isolation modes).

Hostile programs live in tests/security/; this file checks ordinary behaviour and error paths.
"""

from __future__ import annotations

import os
import sys

import pytest

from reasonrl.rewards.sandbox import SandboxResult, SandboxUnavailable, run_python
from reasonrl.rewards.sandbox import process as sandbox

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        sandbox.bwrap_problem() is not None, reason=f"bwrap sandbox unavailable: {sandbox.bwrap_problem()}"
    ),
]


@pytest.mark.parametrize(
    "code, stdin, status, exit_code, stdout, stderr_has",
    [
        ("print(input()[::-1])", "hello\n", "success", 0, "olleh\n", ""),
        ("import sys; print(sum(map(int, sys.stdin.read().split())))", "1 2\n3\n", "success", 0, "6\n", ""),
        ("print('no stdin', input.__name__)", "", "success", 0, "no stdin input\n", ""),
        ("import sys; sys.exit(3)", "", "failed", 3, "", ""),
        ("raise ValueError('boom')", "", "failed", 1, "", "ValueError: boom"),
        ("print('partial'); 1/0", "", "failed", 1, "partial\n", "ZeroDivisionError"),
        ("import sys; sys.stderr.write('err only')", "", "success", 0, "", "err only"),
        ("def f(:\n  pass", "", "failed", 1, "", "SyntaxError"),
        ("print('é✓')", "", "success", 0, "é✓\n", ""),  # utf-8 both ways
        ("import sys; sys.stdout.buffer.write(b'\\xff\\xfeok')", "", "success", 0, "\ufffd\ufffdok", ""),
        ("input()", "", "failed", 1, "", "EOFError"),  # stdin is closed, not inherited
        ("import os; os.kill(os.getpid(), 9)", "", "failed", None, "", ""),  # killed by a signal
    ],
)
def test_run_python_table(code, stdin, status, exit_code, stdout, stderr_has):
    res = run_python(code, stdin=stdin, timeout_s=10)
    assert isinstance(res, SandboxResult)
    assert res.status == status, res
    if exit_code is None:
        assert res.exit_code not in (0, None)
    else:
        assert res.exit_code == exit_code
    assert res.stdout == stdout
    assert stderr_has in res.stderr
    assert res.timed_out is False and res.truncated is False
    assert res.isolation == "bwrap"
    assert res.ok is (status == "success")


def test_large_stdin_and_stdout_round_trip():
    data = "".join(f"{i}\n" for i in range(200_000))  # ~1.3 MB, far beyond a pipe buffer
    res = run_python("import sys; sys.stdout.write(sys.stdin.read())", stdin=data, timeout_s=20)
    assert res.status == "success"
    assert res.stdout == data


def test_timeout_sets_timed_out_and_kills():
    res = run_python("import time; print('start', flush=True); time.sleep(60)", timeout_s=1.0)
    assert res.status == "timeout" and res.timed_out is True
    assert res.stdout == "start\n"  # output before the kill is kept
    assert res.duration_s < 10


def test_cpu_rlimit_applies():
    # a busy loop with a generous wall clock is stopped by RLIMIT_CPU (ceil(timeout)+1 s) or the clock
    res = run_python("while True: pass", timeout_s=1.0)
    assert res.status == "timeout" and res.exit_code != 0


def test_memory_limit_gives_memory_error():
    res = run_python("x = bytearray(600 * 2**20)\nprint('allocated')", memory_mb=256)
    assert res.status == "failed"
    assert "MemoryError" in res.stderr
    res_ok = run_python("x = bytearray(100 * 2**20)\nprint('allocated')", memory_mb=512)
    assert res_ok.stdout == "allocated\n"


def test_output_cap_truncates_and_stops():
    res = run_python("import sys\nwhile True: sys.stdout.write('y' * 65536)", max_output_bytes=100_000)
    assert res.status == "output_limit" and res.truncated is True
    assert len(res.stdout) == 100_000 and set(res.stdout) == {"y"}


def test_extra_files_and_argv():
    res = run_python(
        "import sys, helper; print(helper.X, open('data/in.txt').read(), sys.argv[1:])",
        files={"helper.py": "X = 41 + 1", "data/in.txt": b"bytes-ok"},
        argv=["a", "b"],
    )
    assert res.status == "success", res.stderr
    assert res.stdout == "42 bytes-ok ['a', 'b']\n"


@pytest.mark.parametrize("name", ["/etc/x", "../x", "a/../../x", "main.py", ""])
def test_bad_file_names_are_rejected(name):
    with pytest.raises(ValueError):
        run_python("pass", files={name: "x"})


@pytest.mark.parametrize("kwargs", [{"timeout_s": 0}, {"memory_mb": -1}, {"isolation": "docker"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_python("pass", **kwargs)


def test_multiprocessing_works_inside():
    res = run_python("from multiprocessing import Pool\nif __name__ == '__main__':\n"
                     "    with Pool(2) as p: print(p.map(abs, [-1, -2, -3]))")  # fmt: skip
    assert res.status == "success", res.stderr
    assert res.stdout == "[1, 2, 3]\n"


def test_concurrent_runs_from_threads():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: run_python(f"print({i} * {i})", timeout_s=30), range(16)))
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(16)]
    assert all(r.status == "success" for r in results)


def test_runs_are_independent():
    first = run_python("open('state.txt', 'w').write('secret'); print('wrote')")
    second = run_python("import os; print(os.path.exists('state.txt'))")
    assert first.stdout == "wrote\n" and second.stdout == "False\n"


def test_missing_bwrap_is_a_clear_error_unless_opted_in(monkeypatch):
    monkeypatch.setattr(sandbox, "_probed", {})
    real_which = sandbox.shutil.which
    monkeypatch.setattr(
        sandbox.shutil, "which", lambda name, **kw: None if name == "bwrap" else real_which(name, **kw)
    )
    monkeypatch.delenv(sandbox.ENV_VAR, raising=False)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run_python("print(1)")
    with pytest.warns(RuntimeWarning, match="WITHOUT"):
        res = run_python("print(6 * 7)", allow_unisolated=True)
    assert (res.status, res.stdout, res.isolation) == ("success", "42\n", "unisolated")


def test_unisolated_mode_by_env_keeps_rlimits_and_clears_env(monkeypatch):
    monkeypatch.setenv(sandbox.ENV_VAR, "unisolated")
    monkeypatch.setenv("REASONRL_TEST_SECRET_UNISO", "leak-me")
    res = run_python("import os; print(os.environ.get('REASONRL_TEST_SECRET_UNISO'), os.getcwd())")
    assert res.isolation == "unisolated" and res.status == "success"
    assert res.stdout.split()[0] == "None"
    assert "reasonrl-sandbox-" in res.stdout  # a fresh temp dir as cwd
    assert not os.path.exists(res.stdout.split()[1])  # removed afterwards
    mem = run_python("x = bytearray(800 * 2**20)", memory_mb=256)
    assert mem.status == "failed" and "MemoryError" in mem.stderr
    slow = run_python("while True: pass", timeout_s=1.0)
    assert slow.timed_out is True


@pytest.mark.skipif(os.geteuid() != 0, reason="uid drop applies when the caller is root")
def test_root_caller_runs_code_as_unprivileged_uid():
    res = run_python("import os; print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())")
    uid, euid, gid, groups = res.stdout.split(maxsplit=3)
    assert int(uid) >= sandbox._UID_BASE and uid == euid == gid
    assert groups.strip() == "[]"


def test_default_interpreter_is_base_python_without_venv_packages():
    res = run_python("import sys; print(sys.version_info[:2]); import reasonrl")
    assert res.stdout.strip() == str(tuple(sys.version_info[:2]))
    assert "ModuleNotFoundError" in res.stderr
