"""Running one launched sandbox command to its end (`execute` -> `SandboxResult`): stdin fed
without blocking, stdout / stderr read under a byte cap, a wall-clock deadline, and the command's
whole process group SIGKILLed afterwards, whatever happened (`kill_group`). Does not own: the
command line (`process.bwrap_command` and the unisolated launcher) or the limits it sets.

A run whose launcher itself failed (bwrap, setpriv or prlimit wrote the only output and exited 1, or
126 / 127 when it could not exec the next program) is a "sandbox_error", not a program failure.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

# Environment of the bwrap / prlimit processes themselves (visible in /proc/<pid>/environ).
LAUNCH_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
_SETUP_PREFIXES = ("bwrap: ", "setpriv: ", "prlimit: ")
_SETUP_EXIT_CODES = (1, 126, 127)  # a launcher's own error; 126 / 127: it could not exec the next one


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one run.

    status:     "success" (exit 0), "failed" (non-zero exit or killed by a signal), "timeout"
                (wall-clock deadline hit), "output_limit" (stdout/stderr over the cap; killed),
                "sandbox_error" (the sandbox itself could not start the program)
    exit_code:  process exit status (negative = killed by that signal; None if never collected)
    stdout, stderr: decoded UTF-8 (invalid bytes replaced), each at most `max_output_bytes`
    """

    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    isolation: str = "bwrap"

    @property
    def ok(self) -> bool:
        return self.status == "success"


def execute(cmd, stdin_bytes: bytes, timeout_s: float, max_output_bytes: int, *, pass_fds, cwd, isolation,
            env=None) -> SandboxResult:  # fmt: skip
    """Run the launcher `cmd` to its end: feed `stdin_bytes`, read stdout / stderr up to
    `max_output_bytes` each, SIGKILL its process group at the deadline; never raises."""
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env or LAUNCH_ENV,
            cwd=cwd,
            pass_fds=tuple(pass_fds),
            process_group=0,
        )
    except OSError as e:
        return SandboxResult("sandbox_error", None, "", f"could not start sandbox: {e}", isolation=isolation)
    out, err, timed_out, truncated = _communicate(proc, stdin_bytes, deadline, max_output_bytes)
    code = proc.returncode
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    if timed_out:
        status = "timeout"
    elif truncated:
        status = "output_limit"
    elif code == 0:
        status = "success"
    elif code in _SETUP_EXIT_CODES and not stdout and stderr.startswith(_SETUP_PREFIXES):
        status = "sandbox_error"
    else:
        status = "failed"
    return SandboxResult(
        status, code, stdout, stderr, timed_out, truncated, time.monotonic() - start, isolation
    )


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _communicate(proc, stdin_bytes: bytes, deadline: float, cap: int):
    """Feed stdin and read stdout/stderr until exit, the deadline, or the output cap.

    Returns (stdout, stderr, timed_out, truncated). Always reaps the process."""
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    timed_out = truncated = False
    sel = selectors.DefaultSelector()
    for f in (proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)
        sel.register(f.fileno(), selectors.EVENT_READ)
    pending = memoryview(stdin_bytes)
    if pending:
        os.set_blocking(in_fd, False)
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    exited_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:
                break  # main process is gone; something it left behind still holds the pipes
            wait = min(deadline - now, 0.05 if exited_at is not None else 0.25)
            for key, _ in sel.select(wait):
                fd = key.fd
                if fd == in_fd:
                    try:
                        n = os.write(fd, pending[:65536])
                        pending = pending[n:]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf = bufs[fd]
                room = cap - len(buf)
                buf += chunk[: max(room, 0)]
                if len(chunk) > room:
                    truncated = True
            if truncated:
                break
    finally:
        sel.close()
        kill_group(proc)  # also after a normal exit: nothing of its process group may linger
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        proc.wait()
    return bytes(bufs[out_fd]), bytes(bufs[err_fd]), timed_out, truncated
