"""Trusted test driver, run INSIDE the sandbox (stdlib only; inside the sandbox it is one program
with `child.py`, see `server.harness_program()`).

Owns: running one job (a candidate program plus its tests) so that the verdict comes from code the
candidate cannot reach. Does not own: isolation from the host (`process.py` starts this file under
bubblewrap), the pool of long-lived drivers (`server.py`), or what the tests are (`rewards.verifiers.code`).

Three processes, all inside one sandbox:
  driver  (this file's main) reads jobs from the host, runs the TESTS, writes verdicts to the host.
          It marks itself non-dumpable, so a same-uid process can neither ptrace it nor open its
          /proc/<pid>/{mem,fd,environ}.
  zygote  forked by the driver before any job arrives, so its memory never held a test; keeps common
          modules imported and forks one child per job. It closes the host channel (fds 0/1/2).
  child   runs the candidate's program as `__main__` (compiled from memory: there is no source file
          to re-read), with only the fds the driver handed it: stdin/stdout/stderr pipes and two
          RPC pipes. Its own rlimits (address space, CPU) are set before the program runs.

Job kinds:
  stdio   the child runs the program on `stdin`; the reply carries its stdout/stderr/exit status and
          the HOST compares stdout with the expected output, which never enters the sandbox.
  call    (APPS/TACO fn_name rows) the driver calls the candidate's function through RPC and compares
          each result with the expected value, expected on the left, after decoding it to plain data.
  script  (HumanEval check(), MBPP asserts, Guru functional tests, CRUXEval assertions) the trusted
          test code runs in the DRIVER; the names it needs from the program (the entry point,
          `Solution`...) are bound to RPC proxies. A test passes iff its code raises nothing.
Values cross the RPC pipes as pickles. Child -> driver pickles are read by an unpickler that can build
only plain data (None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset) and
opaque `Remote` handles for anything else, so no object of the candidate's (with a lying `__eq__`,
`__hash__`, `__len__`...) ever exists in the driver. A Remote supports attribute access and calls
(both answered by the child) and compares equal only to itself. Stdlib modules that the program
imported (e.g. `math` used by HumanEval tests) are bound to the driver's own copies.

After every job the driver SIGKILLs every other process in the sandbox's pid namespace except the
zygote (forked grandchildren included) and empties the job's working directory.

Wire format (host <-> driver, driver <-> child): 4-byte big-endian length + payload; host messages are
JSON. `--serve [--sweep]`: jobs in a loop; otherwise one shot: one job read from stdin (after the zygote
has forked), the reply printed as one JSON line.
"""

import ast
import builtins
import contextlib
import importlib
import io
import json
import os
import pickle
import select
import signal
import socket
import sys
import time

# ship: begin (server.harness_program() drops these lines: inside the sandbox both files are one program)
from reasonrl.rewards.sandbox.child import JobError, _prctl, _rebuild, _zygote_main, recv_msg, send_msg

# ship: end
_SAFE_GLOBALS = {
    ("builtins", t.__name__) for t in (int, float, complex, str, bytes, list, tuple, dict, set, frozenset)
}
TRUSTED_MODULE = "__reasonrl_tests__"
# stdlib modules a program may have imported that tests use by the program's name for them (HumanEval
# tests call `math.fabs` on the prompt's `import math`): bound to the driver's own copies
_TEST_MODULES = frozenset(
    "math cmath re string collections itertools functools heapq bisect typing fractions decimal statistics "
    "random json copy operator datetime numbers array hashlib".split()
)


# ----------------------------------------------------------------------------- driver side (trusted)


class RemoteError(Exception):
    """The candidate's code raised an exception of a non-builtin type."""


class Remote:
    """Opaque handle to an object living in the child. Attribute access and calls are answered by
    the child (decoded to plain data or new handles); equal only to itself; truthy like any object."""

    __slots__ = ("_rpc", "_id")

    def __init__(self, rpc, hid):
        object.__setattr__(self, "_rpc", rpc)
        object.__setattr__(self, "_id", hid)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._rpc.request(("getattr", self._id, name))

    def __call__(self, *args, **kwargs):
        return self._rpc.request(("call", self._id, args, kwargs))

    def __repr__(self):
        return f"<solution object #{self._id}>"


class _DriverUnpickler(pickle.Unpickler):
    def __init__(self, f, rpc):
        super().__init__(f)
        self.rpc = rpc

    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"forbidden global {module}.{name}")

    def persistent_load(self, pid):
        if type(pid) is not int or pid < 0:
            raise pickle.UnpicklingError("bad handle")
        return Remote(self.rpc, pid)


class _DriverPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj._id if type(obj) is Remote else None

    def reducer_override(self, obj):
        cls = type(obj)
        if getattr(cls, "__module__", None) == TRUSTED_MODULE and hasattr(obj, "__dict__"):
            return (_rebuild, (cls.__qualname__,), dict(obj.__dict__))
        return NotImplemented


class _Rpc:
    def __init__(self, to_child, from_child, deadline):
        self.to_child, self.from_child, self.deadline = to_child, from_child, deadline

    def request(self, req):
        buf = io.BytesIO()
        _DriverPickler(buf, protocol=5).dump(req)
        send_msg(self.to_child, buf.getvalue())
        return self._decode(recv_msg(self.from_child, self.deadline))

    def _decode(self, data):
        try:
            reply = _DriverUnpickler(io.BytesIO(data), self).load()
        except Exception as e:  # noqa: BLE001 - malformed reply from the candidate
            raise JobError(f"bad reply from the program: {type(e).__name__}") from None
        if type(reply) is not tuple or not reply or reply[0] not in ("ok", "err"):
            raise JobError("bad reply from the program")
        if reply[0] == "ok" and len(reply) == 2:
            return reply[1]
        name, text = (reply[1], reply[2]) if len(reply) == 3 else ("Exception", "")
        exc = getattr(builtins, str(name), None)
        if not (isinstance(exc, type) and issubclass(exc, Exception)):
            exc = RemoteError
        raise exc(f"{name}: {text}" if exc is RemoteError else str(text))


def _free_names(code):
    tree = ast.parse(code)
    loads, stores = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores.add(node.name)
        elif isinstance(node, ast.arg):
            stores.add(node.arg)
        elif isinstance(node, ast.alias):
            stores.add((node.asname or node.name).split(".")[0])
    return loads - stores - set(dir(builtins))


def _bind_remote_names(code, ns, rpc):
    for name in sorted(_free_names(code) - ns.keys()):
        try:
            kind, value = rpc.request(("get", name))
        except NameError:
            continue
        if kind == "module":
            if value not in _TEST_MODULES:
                continue  # any other module (or a lie about one): leave the name unbound
            value = importlib.import_module(value)
        ns[name] = value


def _matches(want, got, tol):
    """Expected value drives the comparison; `got` is already plain data (or a Remote)."""
    if isinstance(want, float) or (isinstance(got, float) and type(want) is int):
        if type(got) not in (int, float) or type(want) not in (int, float):
            return False
        return got == want or abs(got - want) <= max(tol, tol * abs(want))
    if isinstance(want, list):
        return (
            type(got) in (list, tuple)
            and len(got) == len(want)
            and all(_matches(w, g, tol) for w, g in zip(want, got))
        )
    if isinstance(want, dict):
        return (
            type(got) is dict
            and got.keys() == want.keys()
            and all(_matches(want[k], got[k], tol) for k in want)
        )
    if type(got) is Remote:
        return False
    return want == got


def _run_call(job, rpc, results):
    fn = job["fn"]
    if fn.startswith("Solution()."):
        kind, solution = rpc.request(("get", "Solution"))
        target = solution().__getattr__(fn.split(".", 1)[1])
    else:
        kind, target = rpc.request(("get", fn))
    for args, want in job["tests"]:
        try:
            got = target(*args)
            ok = _matches(want, got, job["tol"]) or (
                isinstance(want, list) and len(want) == 1 and _matches(want[0], got, job["tol"])
            )
            error = "" if ok else "AssertionError: the call returned another value than the test expects"
        except (JobError, TimeoutError, EOFError, OSError):
            raise
        except Exception as e:  # noqa: BLE001 - the candidate raised: this test fails
            error, ok = f"{type(e).__name__}: {e}"[:500], False
        if not ok:  # one error per failed test, as in _run_script
            results["errors"].append(error)
        results["passed"].append(bool(ok))
        if not ok and job.get("stop_early"):
            break


def _run_script(job, rpc, results):
    ns = {"__name__": TRUSTED_MODULE, "__builtins__": builtins}
    for part in (job.get("prefix") or "", job.get("setup") or ""):
        exec(compile(part, "<trusted setup>", "exec"), ns)
    for chunk in job["tests"]:
        try:
            _bind_remote_names(chunk, ns, rpc)
            exec(compile(chunk, "<tests>", "exec"), ns)
            ok = True
        except (JobError, TimeoutError, EOFError, OSError):
            raise
        except Exception as e:  # noqa: BLE001 - a failing assertion or an error: this test fails
            results["errors"].append(f"{type(e).__name__}: {e}"[:500])
            ok = False
        results["passed"].append(ok)
        if not ok and job.get("stop_early"):
            break


class Driver:
    def __init__(self, sweep):
        self.sweep_enabled = sweep
        self.jobs = 0
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.zygote = os.fork()
        if self.zygote == 0:
            parent_sock.close()
            try:
                _zygote_main(child_sock)
            finally:
                os._exit(1)
        child_sock.close()
        self.sock = parent_sock
        self.keep = {1, os.getpid(), self.zygote}

    def run(self, job):
        """Run one job; whatever the tests print goes nowhere (stdout is the host's verdict channel)."""
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return self._run(job)

    def _run(self, job):
        start = time.monotonic()
        deadline = start + float(job["timeout_s"])
        self.jobs += 1
        cwd = f"/tmp/job{os.getpid()}_{self.jobs}"
        os.mkdir(cwd, 0o700)
        pipes = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, rpc to child, rpc from child
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][0], pipes[4][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][1], pipes[4][0]]
        rpc_mode = job["kind"] != "stdio"
        req = {"memory_mb": job["memory_mb"], "cpu_s": int(job["timeout_s"]) + 2, "cwd": cwd,
               "mode": "rpc" if rpc_mode else "stdio"}  # fmt: skip
        self.status = None
        socket.send_fds(self.sock, [json.dumps(req).encode()], child_ends)
        for fd in child_ends:
            os.close(fd)
        reply = {"status": "success", "passed": [], "errors": [], "stdout": "", "stderr": ""}
        child = None
        try:
            child = json.loads(self.sock.recv(1 << 16))["pid"]
            send_msg(ours[3], json.dumps({"program": job["program"], "prefix": job.get("prefix")}).encode())
            if rpc_mode:
                self._rpc_job(job, ours, deadline, reply)
            else:
                self._stdio_job(job, ours, deadline, reply)
        except TimeoutError:
            reply["status"] = "timeout"
        except Exception as e:  # noqa: BLE001 - whatever a reply made of the program's data breaks, the
            reply["status"] = "failed"  # job fails; the driver itself keeps serving
            reply["errors"].append(f"{type(e).__name__}: {e}"[:500])
        finally:
            for fd in ours:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if child is not None:
                self._reap(child)
                reply["exit_code"] = None if rpc_mode else self.status
                if self.status == -signal.SIGXCPU:  # out of CPU seconds: a timeout, however it surfaced
                    reply["status"] = "timeout"
            self._cleanup(cwd)
        reply["duration_s"] = time.monotonic() - start
        return reply

    def _rpc_job(self, job, ours, deadline, reply):
        for fd in (ours[0], ours[1], ours[2]):
            os.close(fd)  # the program's own stdio is discarded in RPC mode
        rpc = _Rpc(ours[3], ours[4], deadline)
        try:  # written by the child's side of this file once the program is defined
            first = _DriverUnpickler(io.BytesIO(recv_msg(ours[4], deadline)), None).load()
        except (EOFError, pickle.UnpicklingError):
            first = ("dead", "exit", "the program exited")
        if first != ("ready",):
            ok = type(first) is tuple and len(first) == 3 and first[1] in ("exit", "error")
            reply["status"] = "failed"
            reply["program_failed"] = first[1] if ok else "exit"
            reply["errors"].append(
                f"the program failed before any test ran: {first[2] if ok else ''}"[-2000:]
            )
            return
        (_run_call if job["kind"] == "call" else _run_script)(job, rpc, reply)

    def _stdio_job(self, job, ours, deadline, reply):
        data = job.get("stdin", "").encode("utf-8")
        cap = int(job.get("max_output_bytes", 8 << 20))
        os.close(ours[3])
        os.close(ours[4])
        bufs = {ours[1]: bytearray(), ours[2]: bytearray()}
        pending = memoryview(data)
        writers = [ours[0]] if pending else []
        if not pending:
            os.close(ours[0])
        readers = [ours[1], ours[2], self.sock]
        exited_at = None
        while ours[1] in readers or ours[2] in readers:
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError
            if exited_at is not None and now - exited_at > 0.5:
                break  # the program is gone; something it left behind still holds the pipes
            r, w, _ = select.select(readers, writers, [], min(deadline - now, 0.1))
            if self.sock in r:
                self.status = json.loads(self.sock.recv(1 << 16))["status"]
                readers.remove(self.sock)
                exited_at = time.monotonic()
                r.remove(self.sock)
            for fd in w:
                try:
                    pending = pending[os.write(fd, pending[:65536]) :]
                except OSError:
                    pending = pending[:0]
                if not pending:
                    writers = []
                    os.close(fd)
            for fd in r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    readers.remove(fd)
                    continue
                bufs[fd] += chunk
                if len(bufs[fd]) > cap:
                    reply["status"] = "output_limit"
                    bufs[fd] = bufs[fd][:cap]
                    readers = [x for x in readers if x is self.sock]
        reply["stdout"] = bufs[ours[1]].decode("utf-8", "replace")
        reply["stderr"] = bufs[ours[2]].decode("utf-8", "replace")[-4000:]

    def _reap(self, child):
        if self.status is not None:
            return
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
        self.status = json.loads(self.sock.recv(1 << 16))["status"]

    def _cleanup(self, cwd):
        if self.sweep_enabled:
            for _ in range(200):
                victims = [p for p in _live_pids() if p not in self.keep]
                if not victims:
                    break
                for pid in victims:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.001)
        import shutil

        shutil.rmtree(cwd, ignore_errors=True)


def _live_pids():
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                pids.append(int(name))
    return pids


def _status_of(reply):
    if reply["status"] == "success" and reply.get("exit_code") not in (0, None):
        reply["status"] = "failed"
    return reply


def main(argv):
    _prctl(4, 0)  # PR_SET_DUMPABLE = 0: no ptrace or /proc/<pid>/mem access by same-uid processes
    if "--serve" not in argv:  # one shot: the job comes on stdin, read only after the zygote forked
        driver = Driver(sweep=False)
        job = json.loads(sys.stdin.buffer.read())
        print(json.dumps(_status_of(driver.run(job))), flush=True)
        return
    driver = Driver(sweep="--sweep" in argv)
    inp, out = sys.stdin.fileno(), sys.stdout.fileno()
    send_msg(out, b'{"ready": true}')
    while True:
        try:
            job = json.loads(recv_msg(inp))
        except EOFError:
            return
        send_msg(out, json.dumps(_status_of(driver.run(job))).encode())


if __name__ == "__main__":
    main(sys.argv[1:])
