"""Containment: CPU, memory, processes, signals, output floods. Every hostile run must end within its
limits, leave no process behind, and leave the host (this test process, its children) untouched."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from _hostile import assert_no_survivors, outcome_program

from reasonrl.rewards.sandbox import process as sandbox
from reasonrl.rewards.sandbox import run_python


def _sleeper_argv(marker: str, seconds: int = 60) -> str:
    """Python source for an argv list that sleeps and carries `marker` (so the host can find it)."""
    return f"[sys.executable, '-c', 'import time; time.sleep({seconds})', {marker!r}]"


@pytest.mark.parametrize(
    "name, program",
    [
        ("fork_bomb", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"),
        (  # the marker becomes the shell's $0, so every copy of the bomb carries it
            "shell_fork_bomb",
            "import subprocess, sys\nwhile True:\n"
            "    subprocess.run(['sh', '-c', 'f() { f | f & }; f', sys.argv[1]])",
        ),
        (
            "thread_bomb",
            "import threading, time\nwhile True:\n"
            "    try: threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "    except RuntimeError: pass",
        ),
        ("busy_loop", "while True: pass"),
        ("sleep_forever", "import time; time.sleep(3600)"),
        (
            "ignores_signals",
            "import signal\nfor s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):\n"
            "    signal.signal(s, signal.SIG_IGN)\nwhile True: pass",
        ),
        ("closes_stdout_then_spins", "import os; os.close(1); os.close(2)\nwhile True: pass"),
    ],
)
def test_runaway_programs_are_stopped(name, program, marker):
    # the marker is main.py's argv[1]: every fork of the program carries it in its command line
    start = time.monotonic()
    res = run_python(program, timeout_s=1.5, nproc=32, argv=[marker])
    elapsed = time.monotonic() - start
    assert res.status in ("timeout", "failed"), res
    assert res.exit_code != 0
    assert elapsed < 15, elapsed  # generous bound for a loaded CI machine; the point is "no hang"
    assert_no_survivors(marker)


@pytest.mark.parametrize(
    "name, program",
    [
        ("alloc_50gb", "x = bytearray(50 * 2**30)"),
        ("alloc_list_growth", "chunks = []\nwhile True: chunks.append(bytearray(16 * 2**20))"),
        ("mmap_huge", "import mmap; m = mmap.mmap(-1, 40 * 2**30)"),
        ("numpy_style_big_string", "s = 'x' * (8 * 2**30)"),
    ],
)
def test_memory_hogs_get_memory_error(name, program):
    res = run_python(program, timeout_s=10, memory_mb=256)
    assert res.status == "failed" and not res.timed_out, res
    assert "MemoryError" in res.stderr or "OSError" in res.stderr or "Cannot allocate" in res.stderr


def test_daemons_do_not_outlive_the_run(marker):
    program = f"""
import os, sys, subprocess, time
# 1) classic double fork + setsid daemon
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, {_sleeper_argv(marker)})
    os._exit(0)
# 2) a detached subprocess in its own session, stdio closed
subprocess.Popen({_sleeper_argv(marker)}, start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# 3) nohup-style shell background job
subprocess.run(['sh', '-c', 'nohup sleep 60 {marker} >/dev/null 2>&1 &'])
time.sleep(0.3)
print('spawned')
"""
    res = run_python(program, timeout_s=10)
    assert res.status == "success", res.stderr
    assert res.stdout == "spawned\n"
    assert_no_survivors(marker)


def test_unisolated_daemons_are_killed_by_their_uid(marker, monkeypatch, python_every_uid_reaches):
    # no pid namespace here: the setsid daemon leaves the process group, and only the per-run uid
    # (every process of which is killed after the run) finds it
    monkeypatch.setenv(sandbox.ENV_VAR, "unisolated")
    program = f"import os, sys, time\nif os.fork() == 0:\n    os.setsid(); os.execv(sys.executable, {_sleeper_argv(marker)})\ntime.sleep(0.3); print('spawned')"  # fmt: skip
    res = run_python(program, timeout_s=10, python=python_every_uid_reaches)
    assert (res.status, res.stdout, res.isolation) == ("success", "spawned\n", "unisolated"), res.stderr
    assert_no_survivors(marker)


def test_daemons_killed_on_timeout_too(marker):
    program = f"import os, sys\nif os.fork() == 0:\n    os.setsid(); os.execv(sys.executable, {_sleeper_argv(marker)})\nwhile True: pass"
    res = run_python(program, timeout_s=1.0)
    assert res.timed_out
    assert_no_survivors(marker)


@pytest.mark.parametrize(
    "name, program",
    [
        ("kill_parent", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"),
        ("kill_pid1", "import os, signal; os.kill(1, signal.SIGKILL)"),
        ("kill_everything", "import os, signal; os.kill(-1, signal.SIGKILL)"),
        ("kill_process_group", "import os, signal; os.killpg(0, signal.SIGKILL)"),
    ],
)
def test_killing_parents_does_not_hurt_the_host(name, program):
    host_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        res = run_python(program + "\nprint('after')", timeout_s=5)
        assert res.status in ("success", "failed") and not res.timed_out, res
        assert host_child.poll() is None  # the host's own child is alive
        assert os.getppid() > 1  # and so is our parent (we were not re-parented)
    finally:
        host_child.kill()
        host_child.wait()


def test_kill_all_in_one_run_cannot_touch_a_concurrent_run():
    results = {}

    def victim():
        results["victim"] = run_python("import time; time.sleep(1.5); print('survived')", timeout_s=10)

    t = threading.Thread(target=victim)
    t.start()
    time.sleep(0.3)
    attacker = run_python("import os, signal\nfor _ in range(20): os.kill(-1, signal.SIGKILL)", timeout_s=5)
    t.join(timeout=30)
    assert attacker.status in ("success", "failed")
    assert results["victim"].status == "success" and results["victim"].stdout == "survived\n"


@pytest.mark.parametrize(
    "name, program, stream",
    [
        ("stdout_flood", "import sys\nwhile True: sys.stdout.write('A' * 65536)", "stdout"),
        ("stderr_flood", "import sys\nwhile True: sys.stderr.write('B' * 65536)", "stderr"),
        ("one_giant_line", "import os\nos.write(1, b'C' * (64 << 20))", "stdout"),
        ("print_loop", "i = 0\nwhile True:\n    print(i); i += 1", "stdout"),
    ],
)
def test_output_floods_are_capped(name, program, stream):
    res = run_python(program, timeout_s=10, max_output_bytes=256 * 1024)
    assert res.status == "output_limit" and res.truncated, res.status
    assert len(getattr(res, stream)) <= 256 * 1024
    assert res.duration_s < 10


def test_program_ignoring_a_huge_stdin_does_not_deadlock():
    res = run_python("import time; time.sleep(0.2); print('done')", stdin="z" * (8 << 20), timeout_s=10)
    assert res.status == "success" and res.stdout == "done\n"


@pytest.mark.parametrize(
    "name, program, expected",
    [
        ("fd_exhaustion", "fs = []\nwhile True: fs.append(open('/dev/null'))", "OSError"),
        ("deep_recursion", "import sys; sys.setrecursionlimit(10**6)\ndef f(n): return f(n + 1)\nf(0)", None),
        ("segfault", "import ctypes; ctypes.string_at(0)", None),
        ("abort", "import os; os.abort()", None),
    ],
)
def test_crashes_are_reported_not_hung(name, program, expected):
    if expected:
        res = run_python(outcome_program(program), timeout_s=10)
        assert res.stdout.strip() == expected
    else:
        res = run_python(program, timeout_s=10)
        assert res.status == "failed" and res.exit_code != 0 and not res.timed_out


def test_sethostname_and_mount_are_denied():
    res = run_python(
        outcome_program("import socket; socket.sethostname('pwned'); print('SET')") + "import subprocess\n"
        "r = subprocess.run(['mount', '-t', 'tmpfs', 'none', '/usr'], capture_output=True)\n"
        "print(r.returncode != 0)\n"
    )
    assert res.stdout.split() == ["PermissionError", "True"]
