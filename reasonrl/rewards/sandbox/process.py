"""One Python program in a throw-away sandbox (`run_python` -> `SandboxResult`: status, exit code,
capped stdout/stderr, timed_out), and the isolation itself (`bwrap_command`, also how `server.py`
starts its long-lived test drivers). Does not own: what the program or its output means
(`rewards.verifiers.code`), remote execution (`rewards.sandbox.fusion`), per-verifier time limits (`rewards.runner`).

Isolation (default, "bwrap"): bubblewrap namespaces, so the program
- sees only read-only binds of /usr, /bin, /lib* and the interpreter's prefix, a fresh /proc of its
  own pid namespace, a minimal /dev and a size-capped private tmpfs /tmp (its cwd; the code is copied
  there from a memfd, so nothing on the host disk is writable); no host /etc, home or repository;
- has no network (own net namespace, loopback only), own IPC/UTS/pid namespaces, a new session (no
  terminal injection), an empty environment plus a few fixed variables, and dies with its parent;
- runs as an unprivileged uid (as root: bwrap keeps only CAP_SETUID/SETGID/SETPCAP and `setpriv`
  switches to a per-run uid with no capabilities, no groups and no_new_privs; otherwise bwrap's user
  namespace maps our own uid), under `prlimit` rlimits: CPU seconds, address space, processes, file
  size, open files, no core dumps.
A wall-clock deadline SIGKILLs bwrap's process group; bwrap's pid-1 dies with it and the kernel kills
everything left in the pid namespace (daemons, fork bombs). Output past `max_output_bytes` kills the run.

Fallback ("unisolated"): only on explicit opt-in (`isolation="unisolated"`, `allow_unisolated=True`
when bwrap is missing, or env `REASONRL_SANDBOX=unisolated`). Same rlimits, empty environment, fresh
temp dir and, as root, a per-run uid whose processes are all killed afterwards (if that uid cannot
reach the interpreter, e.g. a pyenv under /root, the code runs as root, with a RuntimeWarning saying
so); but the program can read the host filesystem and use the network. Never use it for untrusted code
on a shared host.
Needs: `bwrap` (Debian: bubblewrap) and `prlimit`/`setpriv` (util-linux) on Linux.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reasonrl.rewards.sandbox.launch import LAUNCH_ENV, SandboxResult, execute

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 1024
DEFAULT_MAX_OUTPUT_BYTES = 8 << 20
DEFAULT_TMP_MB = 64
DEFAULT_FSIZE_MB = 32
DEFAULT_NPROC = 64
DEFAULT_NOFILE = 256
ISOLATIONS = ("bwrap", "unisolated")
ENV_VAR = "REASONRL_SANDBOX"

# Fixed environment of the sandboxed program (nothing is copied from the host).
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
_UID_BASE, _UID_SPAN = 2_000_000_000, 1_000_000  # per-run uids when we start as root


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be used here (bwrap missing or not working)."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int
    nproc: int
    nofile: int
    fsize_mb: int
    tmp_mb: int
    max_output_bytes: int


_uid_counter = itertools.count()
_uid_lock = threading.Lock()
_probe_lock = threading.Lock()
_probed: dict[tuple, str | None] = {}  # (interpreter, euid) -> None (works) or the error text


def run_python(
    code: str,
    stdin: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    *,
    files: Mapping[str, str | bytes] | None = None,
    argv: Sequence[str] = (),
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    nproc: int = DEFAULT_NPROC,
    nofile: int = DEFAULT_NOFILE,
    fsize_mb: int = DEFAULT_FSIZE_MB,
    tmp_mb: int = DEFAULT_TMP_MB,
    isolation: str | None = None,
    allow_unisolated: bool = False,
    python: str | None = None,
    extra_ro_paths: Sequence[str] = (),
) -> SandboxResult:
    """Run `code` as `main.py` with `stdin`, under the limits given; never raises for program errors.

    files:          extra files written beside main.py (relative names, no "..")
    isolation:      "bwrap" or "unisolated"; None reads env REASONRL_SANDBOX (default "bwrap")
    allow_unisolated: fall back to "unisolated" (with a warning) when bwrap is unavailable
    python:         interpreter to run (default: this interpreter's base installation, no venv)
    extra_ro_paths: existing host paths bound read-only at the same place (e.g. a site-packages dir)
    Raises SandboxUnavailable if the isolation cannot be used, ValueError on bad arguments."""
    if timeout_s <= 0 or memory_mb <= 0:
        raise ValueError("timeout_s and memory_mb must be positive")
    limits = Limits(
        float(timeout_s), int(memory_mb), int(nproc), int(nofile), int(fsize_mb), int(tmp_mb),
        int(max_output_bytes),
    )  # fmt: skip
    for path in extra_ro_paths:
        if not os.path.exists(path):
            raise ValueError(f"extra_ro_paths: {path!r} does not exist")
        if os.path.realpath(path) in ("/", "/tmp", "/dev", "/dev/shm", "/proc"):
            raise ValueError(
                f"extra_ro_paths: {path!r} would replace the sandbox's own {os.path.realpath(path)}"
            )
    payload = {"main.py": code.encode("utf-8")}
    for name, content in (files or {}).items():
        if not name or name.startswith("/") or ".." in name.split("/") or name == "main.py":
            raise ValueError(f"bad sandbox file name {name!r}")
        payload[name] = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    interp, mode = interpreter(python), isolation_mode(isolation)
    if mode == "bwrap":
        problem = bwrap_problem(interp)
        if problem is not None:
            if not allow_unisolated:
                raise SandboxUnavailable(
                    f"bubblewrap sandbox unavailable: {problem}. Install it (Debian/Ubuntu: "
                    f"`apt-get install bubblewrap`), or opt in to running code WITHOUT isolation with "
                    f"allow_unisolated=True or {ENV_VAR}=unisolated."
                )
            msg = f"running model code WITHOUT filesystem/network isolation ({problem}); rlimits still apply"
            warnings.warn(msg, RuntimeWarning, stacklevel=2)  # the default filter shows it once per call site
            mode = "unisolated"
    stdin_bytes = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin or b"")
    if mode == "bwrap":
        return _run_bwrap(interp, payload, stdin_bytes, argv, limits, extra_ro_paths)
    return _run_unisolated(interp, payload, stdin_bytes, argv, limits)


def interpreter(python: str | None = None) -> str:
    """The interpreter sandboxed code runs with: `python`, else this one's base installation (no venv)."""
    return os.path.realpath(python or getattr(sys, "_base_executable", "") or sys.executable)


def isolation_mode(isolation: str | None = None) -> str:
    """ "bwrap" or "unisolated": `isolation`, else env REASONRL_SANDBOX, else "bwrap"."""
    mode = isolation or os.environ.get(ENV_VAR, "").strip().lower() or "bwrap"
    if mode not in ISOLATIONS:
        raise ValueError(f"unknown sandbox isolation {mode!r}; choose one of {ISOLATIONS}")
    return mode


def bwrap_problem(python: str | None = None) -> str | None:
    """None if the bwrap sandbox works here for `python`, else why not (checked once, cached)."""
    interp = interpreter(python)
    key = (interp, os.geteuid())
    with _probe_lock:
        if key not in _probed:
            _probed[key] = _probe(interp)
        return _probed[key]


def _probe(interp: str) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    if shutil.which("bwrap") is None:
        return "the `bwrap` executable is not on PATH"
    for tool in ("prlimit",) + (("setpriv",) if os.geteuid() == 0 else ()):
        if shutil.which(tool, path="/usr/bin:/bin") is None:
            return f"`{tool}` (util-linux) is not installed"
    if _interp_prefix(interp) == "/":
        return f"the interpreter {interp} has / as its prefix (binding it would show the whole host)"
    limits = Limits(20.0, 512, 16, 64, 1, 1, 1 << 16)
    res = _run_bwrap(interp, {"main.py": b"print('ok')"}, b"", (), limits, ())
    if res.status != "success" or res.stdout.strip() != "ok":
        detail = ((res.stderr or res.stdout).strip().splitlines() or ["no output"])[-1]
        return f"a test run failed ({res.status}: {detail})"
    return None


def _next_uid() -> int:
    with _uid_lock:
        n = next(_uid_counter)
    return _UID_BASE + (os.getpid() * 7919 + n) % _UID_SPAN


def _prlimit_argv(limits: Limits, cpu: bool = True) -> list[str]:
    secs = max(1, math.ceil(limits.timeout_s)) + 1
    mem = limits.memory_mb << 20
    fsize = limits.fsize_mb << 20
    return [
        shutil.which("prlimit", path="/usr/bin:/bin") or "/usr/bin/prlimit",
        *([f"--cpu={secs}:{secs + 1}"] if cpu else []),
        f"--as={mem}:{mem}",
        f"--nproc={limits.nproc}:{limits.nproc}",
        f"--nofile={limits.nofile}:{limits.nofile}",
        f"--fsize={fsize}:{fsize}",
        "--core=0:0",
        "--",
    ]


def _setpriv_argv(uid: int) -> list[str]:
    return [
        shutil.which("setpriv", path="/usr/bin:/bin") or "/usr/bin/setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def _python_argv(interp: str, script: str, argv: Sequence[str]) -> list[str]:
    return [interp, "-E", "-s", "-B", script, *map(str, argv)]  # no PYTHON* env, user site, .pyc


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    if os.path.exists("/etc/ld.so.cache"):
        args += ["--perms", "0755", "--dir", "/etc", "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def _ro_bind_with_parents(path: str, made: set[str]) -> list[str]:
    """Bind `path` read-only at the same place; its parents are created 0755 (not copied from the
    host, where e.g. /root is 0700 and would hide the interpreter from an unprivileged uid)."""
    path = os.path.realpath(path)
    if path == "/usr" or path.startswith("/usr/") or not os.path.exists(path):
        return []
    if path == "/":
        raise ValueError("refusing to bind / into the sandbox: it would see the whole host filesystem")
    args: list[str] = []
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        parent = "/" + "/".join(parts[:i])
        if parent not in made and parent not in ("/tmp", "/proc", "/dev"):
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args + ["--ro-bind", path, path]


def _interp_prefix(interp: str) -> str:
    if interp == interpreter():
        return os.path.realpath(sys.base_prefix)
    return os.path.dirname(os.path.dirname(interp))


def _run_bwrap(interp, payload, stdin_bytes, argv, limits, extra_ro_paths) -> SandboxResult:
    fds: list[int] = []
    try:
        cmd = bwrap_command(interp, payload, argv, limits, extra_ro_paths, fds)
        return execute(cmd, stdin_bytes, limits.timeout_s, limits.max_output_bytes, pass_fds=fds, cwd="/",
                       isolation="bwrap")  # fmt: skip
    finally:
        for fd in fds:
            os.close(fd)


def bwrap_command(interp, payload, argv, limits, extra_ro_paths, fds: list[int], *, cpu: bool = True):
    """The bwrap + setpriv + prlimit command line running `payload["main.py"]` with `argv`.

    Files are passed as memfds appended to `fds` (the caller passes them to the child and closes
    them). `cpu=False` leaves out the CPU-seconds rlimit (for long-lived servers that set it per job).
    """
    as_root = os.geteuid() == 0
    cmd = [
        shutil.which("bwrap") or "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
    ]
    if as_root:  # privileged bwrap: keep only what setpriv needs to drop to an unprivileged uid
        cmd += ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"):
            cmd += ["--cap-add", cap]
    else:  # unprivileged bwrap runs in a user namespace mapping our own uid
        cmd += ["--unshare-user", "--disable-userns"]
    cmd += _system_binds()
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for tmp in ("/tmp", "/dev/shm"):  # the only writable places, each a size-capped tmpfs
        cmd += ["--perms", "1777", "--size", str(limits.tmp_mb << 20), "--tmpfs", tmp]
    made: set[str] = set()  # bound after the tmpfs mounts, so a host path under /tmp stays visible
    for path in (_interp_prefix(interp), *extra_ro_paths):
        cmd += _ro_bind_with_parents(path, made)
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for name, content in payload.items():
        fd = os.memfd_create("reasonrl-sandbox", 0)
        fds.append(fd)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        parent = os.path.dirname(name)
        if parent:
            cmd += ["--perms", "1777", "--dir", f"/tmp/{parent}"]
        cmd += ["--perms", "0644", "--file", str(fd), f"/tmp/{name}"]
    cmd += ["--chdir", "/tmp", "--clearenv"]
    for key, value in {**SANDBOX_ENV, "HOME": "/tmp", "TMPDIR": "/tmp"}.items():
        cmd += ["--setenv", key, value]
    cmd.append("--")
    if as_root:
        cmd += _setpriv_argv(_next_uid())
    cmd += _prlimit_argv(limits, cpu=cpu) + _python_argv(interp, "/tmp/main.py", argv)
    return cmd


def _run_unisolated(interp, payload, stdin_bytes, argv, limits) -> SandboxResult:
    # as root, drop to a per-run uid, unless that uid could not even reach the interpreter
    # (e.g. a pyenv under /root, mode 0700): then the code runs as root, which the opt-in accepted (warned)
    uid = None
    if os.geteuid() == 0:
        if _world_traversable(interp):
            uid = _next_uid()
        else:
            warnings.warn(f"running model code unisolated AS ROOT: an unprivileged uid cannot reach {interp} (a "
                          "directory above it is not world-executable), so the program can kill any process and "
                          "write anywhere; give an interpreter under /usr (python=...)", RuntimeWarning,
                          stacklevel=3)  # fmt: skip
    workdir = tempfile.mkdtemp(prefix="reasonrl-sandbox-")
    try:
        for name, content in payload.items():
            path = os.path.join(workdir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content)
        if uid is not None:
            for root, dirs, names in os.walk(workdir):
                for entry in [root, *(os.path.join(root, n) for n in dirs + names)]:
                    os.chown(entry, uid, uid)
        cmd = (_setpriv_argv(uid) if uid is not None else []) + _prlimit_argv(limits)
        cmd += _python_argv(interp, os.path.join(workdir, "main.py"), argv)
        env = {**SANDBOX_ENV, "HOME": workdir, "TMPDIR": workdir}
        res = execute(cmd, stdin_bytes, limits.timeout_s, limits.max_output_bytes, pass_fds=(), cwd=workdir,
                      isolation="unisolated", env=env)  # fmt: skip
        if uid is not None:  # kill whatever escaped the process group (same per-run uid)
            _kill_uid(uid)
        return res
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _world_traversable(path: str) -> bool:
    parts = os.path.realpath(path).split("/")
    dirs = ["/".join(parts[:i]) or "/" for i in range(1, len(parts))]
    return all(os.stat(d).st_mode & 0o001 for d in dirs)


def _kill_uid(uid: int) -> None:  # SIGKILL every process of `uid` (a helper running as it signals -1)
    code = "import os, signal\ntry: os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError: pass"
    killer = _setpriv_argv(uid) + [os.path.realpath(sys.executable), "-S", "-c", code]
    subprocess.run(killer, env=LAUNCH_ENV, cwd="/", timeout=30, capture_output=True, check=False)
