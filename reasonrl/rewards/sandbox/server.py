"""Host side of the trusted test harness: `run_job(job)` runs one job and returns the driver's reply.

Owns: a pool of long-lived sandboxed drivers (`harness.py` under bubblewrap, one job at a time
each), starting them, handing them jobs, and replacing any that die, hang or misbehave; the one-shot
path (a fresh sandbox per job) for the unisolated fallback and for remote executors. Does not own:
the isolation (`process.py`), what happens inside the sandbox (`harness.py`), or what a job's tests
mean (`rewards.verifiers.code`).

A job is a JSON-able dict (see `harness.py`): kind "stdio" | "call" | "script", program, prefix,
setup, tests, stdin, fn, tol, stop_early, timeout_s, memory_mb. The reply: status ("success",
"failed", "timeout", "output_limit", "sandbox_error"), passed (list of bools, call/script), errors,
stdout / stderr / exit_code (stdio), duration_s.

Servers are started from one long-lived thread: bubblewrap's --die-with-parent follows the thread
that started it, so a server started from a short-lived worker thread would die with that thread.
Every server also dies with this process, SIGKILL included.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import functools
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from reasonrl.rewards.sandbox import launch, process
from reasonrl.rewards.sandbox.child import recv_msg, send_msg

START_TIMEOUT_S = 30.0
REPLY_GRACE_S = 5.0
MAX_JOBS_PER_SERVER = 2000
SERVER_MEMORY_MB = 4096  # address-space cap of a server; each job's child sets its own, lower one
_spawner = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reasonrl-sandbox-spawner")
_lock = threading.Lock()
_idle: dict[tuple, list[_Server]] = {}
_all: set[_Server] = set()


@functools.cache
def harness_program() -> bytes:
    """The harness as one self-contained program: child.py, then harness.py without its import of
    child.py (the lines between `# ship: begin` and `# ship: end`)."""
    here = Path(__file__).parent
    driver = (here / "harness.py").read_text().splitlines(keepends=True)
    begin = next(i for i, ln in enumerate(driver) if ln.startswith("# ship: begin"))
    end = next(i for i, ln in enumerate(driver) if ln.startswith("# ship: end"))
    return ((here / "child.py").read_text() + "".join(driver[:begin] + driver[end + 1 :])).encode("utf-8")


class _Server:
    def __init__(self, interp: str, memory_mb: int):
        limits = process.Limits(1.0, memory_mb, process.DEFAULT_NPROC, process.DEFAULT_NOFILE,
                                process.DEFAULT_FSIZE_MB, process.DEFAULT_TMP_MB, 8 << 20)  # fmt: skip
        fds: list[int] = []
        try:
            cmd = process.bwrap_command(interp, {"main.py": harness_program()}, ["--serve", "--sweep"], limits,
                                        (), fds, cpu=False)  # fmt: skip
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=launch.LAUNCH_ENV, cwd="/",
                                         pass_fds=fds, process_group=0)  # fmt: skip
        finally:
            for fd in fds:
                os.close(fd)
        self.jobs = 0
        try:
            ready = json.loads(recv_msg(self.proc.stdout.fileno(), time.monotonic() + START_TIMEOUT_S))
        except (TimeoutError, EOFError, OSError, ValueError) as e:  # ValueError: not JSON
            self.kill()
            raise process.SandboxUnavailable(f"the sandboxed test harness did not start: {e}") from None
        if ready != {"ready": True}:
            self.kill()
            raise process.SandboxUnavailable("the sandboxed test harness did not start")

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        self.jobs += 1
        send_msg(self.proc.stdin.fileno(), json.dumps(job).encode("utf-8"))
        deadline = time.monotonic() + float(job["timeout_s"]) + REPLY_GRACE_S
        return json.loads(recv_msg(self.proc.stdout.fileno(), deadline))

    def kill(self) -> None:
        launch.kill_group(self.proc)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.proc.wait()


def _checkout(key: tuple) -> _Server:
    with _lock:
        pool = _idle.setdefault(key, [])
        while pool:
            server = pool.pop()
            if server.proc.poll() is None:
                return server
            _all.discard(server)
    server = _spawner.submit(_Server, *key).result()
    with _lock:
        _all.add(server)
    return server


def _checkin(key: tuple, server: _Server, healthy: bool) -> None:
    if healthy and server.jobs < MAX_JOBS_PER_SERVER and server.proc.poll() is None:
        with _lock:
            _idle.setdefault(key, []).append(server)
        return
    with _lock:
        _all.discard(server)
    server.kill()


def run_job(job: dict[str, Any], isolation: str | None = None, python: str | None = None) -> dict[str, Any]:
    """Run one harness job in the sandbox and return the driver's reply (never raises for the
    program's behaviour; raises SandboxUnavailable if no sandbox can be used)."""
    interp, mode = process.interpreter(python), process.isolation_mode(isolation)
    if mode == "unisolated":
        return run_one_shot(job, lambda prog, stdin, t, m: process.run_python(
            prog, stdin, t, m, isolation="unisolated", python=interp))  # fmt: skip
    problem = process.bwrap_problem(interp)
    if problem is not None:
        raise process.SandboxUnavailable(f"bubblewrap sandbox unavailable: {problem}")
    job = {**job, "memory_mb": min(int(job["memory_mb"]), SERVER_MEMORY_MB)}
    key = (interp, SERVER_MEMORY_MB)
    server = _checkout(key)
    try:
        reply = server.run(job)
    except (TimeoutError, EOFError, OSError, ValueError) as e:
        _checkin(key, server, healthy=False)
        status = "timeout" if isinstance(e, TimeoutError) else "sandbox_error"
        return {"status": status, "passed": [], "errors": [f"harness: {type(e).__name__}: {e}"],
                "stdout": "", "stderr": "", "exit_code": None}  # fmt: skip
    _checkin(key, server, healthy=True)
    return reply


def run_one_shot(job: dict[str, Any], execute) -> dict[str, Any]:
    """Run `job` in a fresh sandbox through `execute(program, stdin, timeout_s, memory_mb) ->
    SandboxResult` (the local unisolated fallback, or a remote SandboxFusion server)."""
    res = execute(harness_program().decode("utf-8"), json.dumps(job), float(job["timeout_s"]) + REPLY_GRACE_S,
                  int(job["memory_mb"]) + 256)  # fmt: skip
    lines = res.stdout.strip().splitlines()
    try:
        reply = json.loads(lines[-1])
        if not isinstance(reply, dict) or "status" not in reply:
            raise ValueError
    except (IndexError, ValueError):
        status = "timeout" if res.status == "timeout" else "sandbox_error"
        return {"status": status, "passed": [], "errors": [f"harness: {res.stderr.strip()[-500:]}"],
                "stdout": "", "stderr": res.stderr, "exit_code": None}  # fmt: skip
    return reply


@atexit.register
def shutdown() -> None:
    """Stop every server (they would also die with this process)."""
    with _lock:
        servers = list(_all)
        _all.clear()
        _idle.clear()
    for server in servers:
        server.kill()
