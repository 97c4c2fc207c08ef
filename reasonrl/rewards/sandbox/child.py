"""The untrusted side of the test harness, run INSIDE the sandbox (stdlib only): wire framing, the
zygote that forks one child per job, and the child that runs the candidate's program.

Owns: `send_msg` / `recv_msg` framing, `_zygote_main`, `_child_main` (runs the program as
`__main__`, then answers RPC requests), the child's pickler that sends plain data by value and
everything else as handles. Does not own: the tests or the verdict (`harness.py`, the driver).
Shipped together with `harness.py` as one program (`server.harness_program()`).
"""

import builtins
import io
import json
import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
import traceback
import types

MAX_MSG = 16 << 20
_PLAIN = (type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)
_PRELOAD = ("typing collections math itertools functools heapq bisect re string operator copy random "
            "fractions decimal statistics datetime json hashlib array").split()  # fmt: skip


class JobError(Exception):
    """The job could not be run (child died, RPC broke, deadline passed)."""


# ----------------------------------------------------------------------------- framing


def send_msg(fd, data):
    data = struct.pack(">I", len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def recv_msg(fd, deadline=None):
    head = _read_exact(fd, 4, deadline)
    (n,) = struct.unpack(">I", head)
    if n > MAX_MSG:
        raise JobError(f"message of {n} bytes over the {MAX_MSG} cap")
    return _read_exact(fd, n, deadline)


def _read_exact(fd, n, deadline):
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("deadline passed")
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return bytes(buf)


def _prctl(option, arg):
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


# ----------------------------------------------------------------------------- child side (untrusted)


def _plainify(obj):
    """(plain base type, plain copy) for an instance of a subclass of a plain type, else None. Done
    in the child: the driver only ever receives the plain value, whatever the subclass claims."""
    for base in (int, float, complex, str, bytes, dict, list, tuple, set, frozenset):
        if isinstance(obj, base):
            try:
                value = int.__index__(obj) if base is int else base(obj)
            except Exception:  # noqa: BLE001 - a subclass that cannot say what it is stays opaque
                return None
            return (base, value) if type(value) is base else None
    return None


class _ChildPickler(pickle.Pickler):
    """Plain data by value, plain-type subclasses as their plain copy, anything else as a handle."""

    def __init__(self, f, table):
        super().__init__(f, protocol=5)
        self.table = table

    def persistent_id(self, obj):
        if type(obj) in _PLAIN or (not isinstance(obj, type) and _plainify(obj) is not None):
            return None
        self.table.append(obj)
        return len(self.table) - 1

    def reducer_override(self, obj):
        if type(obj) in _PLAIN:
            return NotImplemented
        base, value = _plainify(obj)
        return base, (value,)


class _ChildUnpickler(pickle.Unpickler):
    def __init__(self, f, table):
        super().__init__(f)
        self.table = table

    def persistent_load(self, pid):
        return self.table[pid]

    def find_class(self, module, name):
        if name == "_rebuild":
            return _rebuild
        return super().find_class(module, name)


def _rebuild(qualname):
    """Child side of a trusted object sent as an argument (e.g. a ListNode built by the tests)."""
    cls = sys.modules["__main__"].__dict__[qualname]
    return cls.__new__(cls)


def _child_reply(out_fd, table, value=None, error=None):
    buf = io.BytesIO()
    try:
        payload = ("err", type(error).__name__, str(error)[:2000]) if error else ("ok", value)
        _ChildPickler(buf, table).dump(payload)
    except Exception as e:  # noqa: BLE001 - an unserialisable result is reported, not fatal
        buf = io.BytesIO()
        pickle.dump(("err", "TypeError", f"unserialisable result: {type(e).__name__}"), buf, protocol=5)
    send_msg(out_fd, buf.getvalue())


def _child_serve(module, in_fd, out_fd):
    table = [module]
    while True:
        try:
            req = _ChildUnpickler(io.BytesIO(recv_msg(in_fd)), table).load()
        except EOFError:
            os._exit(0)
        op = req[0]
        try:
            if op == "get":
                name = req[1]
                if name not in module.__dict__:
                    raise NameError(name)
                value = module.__dict__[name]
                if isinstance(value, types.ModuleType):
                    value = ("module", value.__name__)
                else:
                    value = ("value", value)
            elif op == "getattr":
                value = getattr(table[req[1]], req[2])
            else:  # call
                value = table[req[1]](*req[2], **req[3])
            _child_reply(out_fd, table, value)
        except BaseException as e:  # noqa: BLE001 - the candidate's exception is the answer
            if isinstance(e, SystemExit):
                os._exit(1)
            _child_reply(out_fd, table, error=e)


def _child_main(req, fds):
    moved = [os.dup(fd) for fd in fds]  # above every target so the dup2s below cannot clobber
    if req["mode"] == "rpc":  # the program's own stdio goes nowhere; the pipes carry only RPC
        null = os.open(os.devnull, os.O_RDWR)
        moved[:3] = [null, null, null]
    for src, dst in zip(moved, (0, 1, 2, 3, 4)):
        os.dup2(src, dst)
    os.closerange(5, 65536)
    import resource

    mem = int(req["memory_mb"]) << 20
    cpu = max(1, int(req["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    os.chdir(req["cwd"])
    job = json.loads(recv_msg(3).decode("utf-8"))
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)  # noqa: SIM115
    sys.argv = ["main.py"]
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    code, error, how = 0, "", ""
    try:
        for part in (job.get("prefix") or "", job["program"]):
            exec(compile(part, "main.py", "exec"), module.__dict__)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        error, how = f"SystemExit({e.code!r}) while defining the program", "exit"
    except BaseException:  # noqa: BLE001 - report like the interpreter would
        error, how = traceback.format_exc(), "error"
        sys.stderr.write(error)
        code = 1
    if req["mode"] == "rpc":
        if error:
            send_msg(4, pickle.dumps(("dead", how, error[-2000:])))
            os._exit(1)
        send_msg(4, pickle.dumps(("ready",)))
        _child_serve(module, 3, 4)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code & 0xFF)


# ----------------------------------------------------------------------------- zygote


def _zygote_main(sock):
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the driver
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the host channel is the driver's alone
    os.closerange(3, sock.fileno())
    os.closerange(sock.fileno() + 1, 65536)
    for name in _PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        req = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            sock.close()
            try:
                _child_main(req, fds)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())
