"""rewards.sandbox.run_python: the API contract (status, exit code, streams, limits, isolation modes).

Hostile programs live in tests/security/; this file checks ordinary behaviour and error paths.
"""

from __future__ import annotations

import ast
import math
import os
import re
import sys

import pytest

from reasonrl.rewards.sandbox import SandboxResult, SandboxUnavailable, launch, run_python
from reasonrl.rewards.sandbox import process as sandbox

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.bwrap,
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
        "import sys, helper; open('data/out.txt', 'w').write('w')\n"
        "print(helper.X, open('data/in.txt').read(), sys.argv[1:], open('data/out.txt').read())",
        files={"helper.py": "X = 41 + 1", "data/in.txt": b"bytes-ok"},
        argv=["a", "b"],
    )
    assert res.status == "success", res.stderr
    assert res.stdout == "42 bytes-ok ['a', 'b'] w\n"  # the program may write beside its files


@pytest.mark.parametrize("name", ["/etc/x", "../x", "a/../../x", "main.py", ""])
def test_bad_file_names_are_rejected(name):
    with pytest.raises(ValueError):
        run_python("pass", files={name: "x"})


@pytest.mark.parametrize(
    "kwargs", [{"timeout_s": 0}, {"memory_mb": 0}, {"memory_mb": -1}, {"isolation": "docker"}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_python("pass", **kwargs)
    assert run_python("print(1)", timeout_s=0.9).status == "success"  # any positive limit is one


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


_RLIMITS = "CPU AS NPROC NOFILE FSIZE CORE".split()
_SHOW_LIMITS = ("import os, resource\n"
                f"print([resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in {_RLIMITS!r}])\n"
                "st = os.statvfs('/tmp'); print(st.f_blocks * st.f_frsize >> 20)")  # fmt: skip


def _limits_seen(**kwargs) -> tuple[list, int]:
    res = run_python(_SHOW_LIMITS, **kwargs)
    assert res.status == "success", res.stderr
    limits, tmp_mb = res.stdout.splitlines()
    return [tuple(x) for x in ast.literal_eval(limits)], int(tmp_mb)


@pytest.mark.parametrize("isolation", ["bwrap", "unisolated"])
def test_the_program_runs_under_the_limits_asked_for(isolation):
    limits, tmp_mb = _limits_seen(timeout_s=2.5, memory_mb=300, nproc=9, nofile=33, fsize_mb=5, tmp_mb=7,
                                  isolation=isolation)  # fmt: skip
    # CPU seconds: ceil(timeout) + 1 soft, one more hard (a busy child is killed by the kernel even
    # where the wall clock is late); address space, processes, open files, file size; no core dumps
    assert limits == [(4, 5), (300 << 20, 300 << 20), (9, 9), (33, 33), (5 << 20, 5 << 20), (0, 0)]
    if isolation == "bwrap":
        assert tmp_mb == 7  # the private /tmp is a tmpfs of that size


def test_the_defaults_are_the_documented_limits():
    limits, tmp_mb = _limits_seen()
    cpu = math.ceil(sandbox.DEFAULT_TIMEOUT_S) + 1
    mem, fsize = sandbox.DEFAULT_MEMORY_MB << 20, sandbox.DEFAULT_FSIZE_MB << 20
    assert limits == [(cpu, cpu + 1), (mem, mem), (sandbox.DEFAULT_NPROC, sandbox.DEFAULT_NPROC),
                      (sandbox.DEFAULT_NOFILE, sandbox.DEFAULT_NOFILE), (fsize, fsize), (0, 0)]  # fmt: skip
    assert tmp_mb == sandbox.DEFAULT_TMP_MB


def test_stdin_may_be_bytes():
    res = run_python("import sys; print(sys.stdin.buffer.read()[::-1])", stdin=b"\x01ab")
    assert res.stdout == "b'ba\\x01'\n"


@pytest.mark.parametrize(
    "python, problem",
    [
        ("/bin/false", "a test run failed (failed: no output)"),
        # runs, but says something else than the probe's "ok": the last line of what it said
        ("/bin/echo", "a test run failed (success: -s -B /tmp/main.py)"),
    ],
)
def test_an_interpreter_that_cannot_run_the_probe_is_refused_before_any_code(python, problem):
    assert sandbox.bwrap_problem(python) == problem
    with pytest.raises(SandboxUnavailable, match=re.escape(problem)):
        run_python("print(1)", python=python)


@pytest.mark.parametrize(
    "platform, missing, problem",
    [
        ("darwin", None, "bubblewrap needs Linux (this is darwin)"),
        ("linux", "bwrap", "the `bwrap` executable is not on PATH"),
        ("linux", "prlimit", "`prlimit` (util-linux) is not installed"),
        pytest.param("linux", "setpriv", "`setpriv` (util-linux) is not installed",
                     marks=pytest.mark.skipif(os.geteuid() != 0, reason="setpriv is needed as root only")),
    ],
)  # fmt: skip
def test_the_probe_names_what_is_missing(monkeypatch, platform, missing, problem):
    real_which = sandbox.shutil.which
    monkeypatch.setattr(
        sandbox.shutil, "which", lambda name, **kw: None if name == missing else real_which(name, **kw)
    )
    monkeypatch.setattr(sandbox.sys, "platform", platform)
    assert sandbox._probe(sandbox.interpreter()) == problem


def test_extra_read_only_paths_are_visible_and_read_only(tmp_path):
    shared = tmp_path / "deep" / "shared"  # under the host's /tmp, which the sandbox's own /tmp hides
    shared.mkdir(parents=True)
    (shared / "helper_mod.py").write_text("X = 42\n")
    program = (f"import sys; sys.path.insert(0, {str(shared)!r}); import helper_mod; print(helper_mod.X)\n"
               f"try:\n    open({str(shared / 'new.txt')!r}, 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n"
               "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())")  # fmt: skip
    res = run_python(program, extra_ro_paths=[str(shared)])
    assert res.stdout == "42\nOSError\nok\n", res.stderr
    assert not (shared / "new.txt").exists()
    with pytest.raises(ValueError, match="no-such-dir' does not exist"):
        run_python("pass", extra_ro_paths=[str(tmp_path / "no-such-dir")])
    for own in ("/", "/tmp", "/proc"):
        with pytest.raises(ValueError, match=f"replace the sandbox's own {own}$"):
            run_python("pass", extra_ro_paths=[own])


def test_an_interpreter_whose_prefix_is_the_root_is_refused(tmp_path):
    # /opt/python would need / bound for its stdlib (/lib/python3.x): the whole host, read-only
    assert sandbox.bwrap_problem("/nonexistent") == "the interpreter /nonexistent has / as its prefix (binding it would show the whole host)"  # fmt: skip
    with pytest.raises(SandboxUnavailable, match="has / as its prefix"):
        run_python("print(1)", python="/nonexistent")
    with pytest.raises(ValueError, match="whole host filesystem"):
        sandbox.bwrap_command(
            "/nonexistent", {"main.py": b""}, (), sandbox.Limits(5.0, 256, 16, 64, 1, 1, 1 << 16), (), []
        )


def test_sandbox_errors_are_told_apart_from_program_failures():
    limits = sandbox.Limits(5.0, 256, 16, 64, 1, 1, 1 << 16)
    res = sandbox._run_bwrap("/nonexistent/bin/python", {"main.py": b"pass"}, b"", (), limits, ())
    assert (res.status, res.exit_code) == ("sandbox_error", 127)
    assert res.stderr.startswith("prlimit: failed to execute /nonexistent/bin/python")
    res = launch.execute(
        ["/nonexistent-launcher"], b"", 5.0, 1 << 16, pass_fds=(), cwd="/", isolation="bwrap"
    )
    assert (res.status, res.exit_code, res.isolation) == ("sandbox_error", None, "bwrap")
    assert res.stderr.startswith("could not start sandbox: ")


def test_a_launcher_that_cannot_exec_the_next_program_is_a_sandbox_error(tmp_path):
    target = tmp_path / "not_executable"
    target.write_text("x")
    target.chmod(0o644)  # no exec bit: EACCES even for root, prlimit exits 126
    res = launch.execute(["prlimit", "--nofile=64", "--", str(target)], b"", 5.0, 1 << 16, pass_fds=(), cwd="/",
                         isolation="bwrap")  # fmt: skip
    assert (res.status, res.exit_code) == ("sandbox_error", 126)
    assert res.stderr.startswith(f"prlimit: failed to execute {target}")
    # the same exit status from a program that printed first is the program's failure
    res = launch.execute(["sh", "-c", "echo out; echo 'prlimit: x' >&2; exit 126"], b"", 5.0, 1 << 16,
                         pass_fds=(), cwd="/", isolation="bwrap")  # fmt: skip
    assert (res.status, res.exit_code) == ("failed", 126)
    # a program that only pretends is still a failure: its own exit code is not the launcher's
    fake = run_python("import sys; sys.stderr.write('bwrap: oops'); sys.exit(2)")
    assert (fake.status, fake.exit_code) == ("failed", 2)


def test_each_run_gets_its_own_uid():
    assert len({sandbox._next_uid() for _ in range(100)}) == 100


def test_an_interpreter_under_a_private_directory_is_not_world_traversable():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # pytest's tmp_path lies under a 0700 directory
        root = Path(d)
        (root / "home" / "bin").mkdir(parents=True)
        (root / "home" / "bin" / "python").write_text("")
        root.chmod(0o755)
        assert sandbox._world_traversable(str(root / "home" / "bin" / "python")) is True
        (root / "home").chmod(0o700)  # like /root, where a pyenv lives
        assert sandbox._world_traversable(str(root / "home" / "bin" / "python")) is False


def test_unisolated_as_root_runs_as_its_own_uid_in_a_writable_dir(monkeypatch, python_every_uid_reaches):
    monkeypatch.setenv(sandbox.ENV_VAR, "unisolated")
    res = run_python("import os; open('out.txt', 'w').write('x'); print(os.getuid(), open('out.txt').read())",
                     python=python_every_uid_reaches)  # fmt: skip
    assert res.status == "success", res.stderr
    uid, text = res.stdout.split()
    assert int(uid) >= sandbox._UID_BASE and text == "x"  # a per-run uid owns the run's directory


def test_unisolated_as_root_with_an_interpreter_no_uid_reaches_warns_that_it_runs_as_root(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("only as root")
    monkeypatch.setenv(sandbox.ENV_VAR, "unisolated")
    monkeypatch.setattr(sandbox, "_world_traversable", lambda path: False)
    with pytest.warns(RuntimeWarning, match="AS ROOT: an unprivileged uid cannot reach"):
        res = run_python("import os; print(os.getuid())")
    assert (res.status, res.stdout) == ("success", "0\n")


def test_a_background_process_holding_the_pipes_does_not_hold_the_run(monkeypatch):
    # unisolated, nothing kills the leftover when the program exits; the run ends half a second after
    # the program does, not at the deadline
    monkeypatch.setenv(sandbox.ENV_VAR, "unisolated")
    res = run_python("import subprocess; subprocess.Popen(['sleep', '8']); print('done')", timeout_s=6)
    assert (res.status, res.stdout, res.timed_out) == ("success", "done\n", False)
