"""Shared test fixtures.

Owns: `tiny_model_and_tokenizer`, a random (untrained) tiny Qwen2 and a BPE tokenizer built from the
procedural task corpus by `reasonrl.models.tiny`, in a couple of seconds, once per test session; and
`python_every_uid_reaches` (unisolated sandbox runs as root drop to a per-run uid, which must reach
the interpreter); `user_module`, a Python module of the test's own written where a recipe's import path finds it (the
user's reward functions and tools: the working directory, as TRL imports them); `fusion_servers`, SandboxFusion stand-ins on 127.0.0.1 that run code with our own
sandbox (the remote code backend's tests); the `bwrap` marker and `require_bwrap` (skip without the
sandbox, fail under CI); `_torch_threads`, which gives every test torch's thread count back as it found
it (a test that set 1 thread once made every later test run single-threaded, and a test that holds only
on one thread passed by the order of the files); `_registries_left_as_found`, which fails a test that
leaves an entry it defined in one of the registries (an engine registered by one test made another
test's list of known engines wrong, on CI's order of files only); `_hub_mode_left_as_found` (hub
offline mode, which loading an unreachable hub id turns on for the process); `_no_processes_left`, which fails a
module that leaves a process running below the test process (multiprocessing's forkservers and
resource tracker excepted: they serve the whole session); and the order of the modules: the few
that take minutes go first, so that `make test`'s parallel workers (pytest-xdist, one module per worker
at a time) start them at once and finish together, rather than one worker running the longest module
alone at the end.
Does not own: the warm-started demo model (too slow for unit tests; the e2e tests build it).

The model is shared by every test of the session: tests that change its weights or its mode must work
on `copy.deepcopy(model)`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# the modules that take a minute or more (seconds summed over their tests, `--junitxml`, 2026-11-30),
# longest first; every other module keeps its place. `make test` passes --no-loadscope-reorder:
# pytest-xdist otherwise sorts modules by their number of tests, which put these (ten-odd tests each)
# last, and one worker ran the longest of them alone at the end.
_LONGEST_FIRST = (
    "tests/e2e/test_fsdp2_train.py",
    "tests/unit/test_rollout_vllm.py",
    "tests/e2e/test_async_rollouts.py",
    "tests/e2e/test_eval_runner.py",
    "tests/e2e/test_planner_memory.py",
    "tests/e2e/test_bench_scripts.py",
    "tests/e2e/test_watchdog.py",
)
# plain words beside the task corpus so the vocabulary exceeds 50 tokens (transformers' historical
# default top_k) and a hidden top-k filter would show up in the sampler log-probabilities
_EXTRA_TEXT = [
    "the quick brown fox jumps over the lazy dog while we think about the answer",
    "reasoning with reinforcement learning on verifiable rewards needs careful tests",
]


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer():
    """(model, tokenizer): random tiny Qwen2 (2 layers, hidden 32) in eval mode, fp32 on CPU."""
    import torch

    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import TinySpec, build_model, build_tokenizer, corpus

    problems = generate("arithmetic", 100, seed=0, difficulty=2) + generate(
        "countdown", 100, seed=0, difficulty=2
    )
    tokenizer = build_tokenizer(corpus(problems) + _EXTRA_TEXT, vocab_size=96)
    spec = TinySpec(hidden_size=32, layers=2, heads=2, intermediate_size=64, max_positions=128, seed=7)
    model = build_model(spec, tokenizer)
    # larger weights than the default init (std 0.02) so the next-token distribution is far from
    # uniform: log-prob comparisons then test something and greedy decoding has no near-ties
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3, generator=gen)
    model.eval()
    return model, tokenizer


@pytest.fixture
def python_every_uid_reaches() -> str:
    """As root, an interpreter every uid can reach: this one's base, else the system's; else skip."""
    import os

    from reasonrl.rewards.sandbox import process as sandbox

    if os.geteuid() != 0:
        pytest.skip("unisolated runs get a uid of their own only as root")
    for python in (sandbox.interpreter(), "/usr/bin/python3"):
        if os.path.exists(python) and sandbox._world_traversable(python):
            return python
    pytest.skip("no interpreter every uid can reach")


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """write(text, prefix) -> the import name of a module holding `text`, in the working directory (the
    test's tmp_path), as a user's reward functions or tools are imported (`reasonrl.user_code`); the name is
    the test's own (imports are cached per process), and sys.path, the directory and the import are undone."""
    import sys

    names = []

    def write(text: str, prefix: str = "user_module") -> str:
        name = f"{prefix}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / f"{name}.py").write_text(text)
        names.append(name)
        return name

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # (the import puts the directory there, as TRL does)
    yield write
    for name in names:
        sys.modules.pop(name, None)


def fusion_response(req: dict) -> dict:
    """SandboxFusion's RunCodeResponse for a RunCodeRequest, computed with our sandbox."""
    from reasonrl.rewards.sandbox import run_python

    res = run_python(
        req["code"],
        stdin=req.get("stdin") or "",
        timeout_s=float(req.get("run_timeout", 10)),
        memory_mb=int(req["memory_limit_MB"]) if req.get("memory_limit_MB", -1) > 0 else 1024,
    )
    run_status = "TimeLimitExceeded" if res.timed_out else "Finished"
    status = "Success" if res.status == "success" else "Failed"
    return {
        "status": status,
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": run_status,
            "execution_time": res.duration_s,
            "return_code": res.exit_code,
            "stdout": res.stdout,
            "stderr": res.stderr,
        },
        "executor_pod_name": None,
        "files": {},
    }


class FusionServer:
    """A ThreadingHTTPServer on 127.0.0.1:0 whose POST behaviour is `behave(request_dict) -> (code, body)`."""

    def __init__(self, behave):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, **body})
                code, payload = behave(body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (request-timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def refused_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released): connections to it are refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fusion_servers():
    """make(behave=...) -> a SandboxFusion stand-in on 127.0.0.1 (by default it runs the code with our own
    sandbox and answers as SandboxFusion does); all closed after the test."""
    made: list[FusionServer] = []

    def make(behave=lambda req: (200, fusion_response(req))):
        s = FusionServer(behave)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _require_bwrap() -> None:
    """Skip without a working bubblewrap sandbox, except under CI, where it is installed: there a sandbox
    that stopped working fails the test rather than skipping it."""
    import os

    from reasonrl.rewards.sandbox import process

    problem = process.bwrap_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"bwrap sandbox unavailable under CI: {problem}", pytrace=False)
        pytest.skip(f"bwrap sandbox unavailable: {problem}")


def pytest_runtest_setup(item):
    if item.get_closest_marker("bwrap") is not None:  # `@pytest.mark.bwrap`: the test needs the sandbox
        _require_bwrap()


@pytest.fixture
def require_bwrap():
    """`require_bwrap()` where only some cases of a test run code in the sandbox."""
    return _require_bwrap


@pytest.fixture(autouse=True)
def _torch_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _hub_mode_left_as_found():
    """Hub offline mode as it was: loading a hub id the hub cannot serve turns it on for the whole
    process (`models.hub`), which would make a later test in this worker (an upload to a stand-in hub)
    fail."""
    import os
    import sys

    env = os.environ.get("HF_HUB_OFFLINE")
    yield
    if "reasonrl.network" in sys.modules:
        sys.modules["reasonrl.network"].forget()
    if (hub := sys.modules.get("reasonrl.models.hub")) is None:
        return
    hub._turned_offline.clear()
    if os.environ.get("HF_HUB_OFFLINE") != env:
        hub.set_offline((env or "").upper() in {"1", "ON", "YES", "TRUE"})
        if env is not None:
            os.environ["HF_HUB_OFFLINE"] = env


# the registries (module, name); checked only once a test has imported the module
_REGISTRIES = (
    ("reasonrl.rollout.factory", "ROLLOUT_ENGINES"),
    ("reasonrl.rewards.base", "VERIFIERS"),
    ("reasonrl.data.prepare", "CONVERTERS"),
    ("reasonrl.eval.benchmarks", "BENCHMARKS"),
    ("reasonrl.algorithms.advantages", "ADVANTAGES"),
    ("reasonrl.algorithms.losses", "POLICY_LOSSES"),
)


def _loaded_registries():
    import sys

    for module, name in _REGISTRIES:
        if module in sys.modules:
            yield f"{module}.{name}", getattr(sys.modules[module], name)


@pytest.fixture(autouse=True)
def _registries_left_as_found():
    """Entries a test defines (functions inside the test) must be gone when it ends: register them on
    `monkeypatch.setattr(REG, "_entries", dict(REG._entries))`. Entries that modules register when
    imported stay (their functions are not local)."""
    before = {key: set(reg._entries) for key, reg in _loaded_registries()}
    yield
    for key, reg in _loaded_registries():
        left = [
            n
            for n, fn in reg._entries.items()
            if n not in before.get(key, ()) and "<locals>" in getattr(fn, "__qualname__", "")
        ]
        if left:
            pytest.fail(f"the test left {key} entries {left} registered; register them on a copy")


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return _LONGEST_FIRST.index(path) if path in _LONGEST_FIRST else len(_LONGEST_FIRST)

    items.sort(key=rank)  # stable: the other modules keep their order


# long-lived helpers that outlive a module by design: multiprocessing's forkservers (the verifier
# pools', gloo_ranks') and its resource tracker, started once per worker process
_SERVERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def _descendants() -> dict[int, str]:
    """{pid: command line} of the live (not zombie) processes below this one, the servers left out."""
    import psutil

    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.cmdline())
        except psutil.Error:  # gone meanwhile
            continue
        if not any(s in cmd for s in _SERVERS):
            out[p.pid] = cmd
    return out


@pytest.fixture(autouse=True, scope="module")
def _no_processes_left():
    """No test module leaves a process behind: every process started below this one while a module
    ran (its tests and its fixtures) must be gone 10 s after the module's last fixture is torn down.
    The code sandbox's pool of warm servers, which lives as long as the process by design, is stopped
    first (`rewards.sandbox.server.shutdown`)."""
    import sys
    import time

    before = set(_descendants())
    yield
    sandbox = sys.modules.get("reasonrl.rewards.sandbox.server")
    if sandbox is not None:  # the code sandbox keeps warm servers for the process's life: stop them here
        sandbox.shutdown()
    deadline = time.monotonic() + 10.0
    while True:
        left = {pid: cmd for pid, cmd in _descendants().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if left:
        pytest.fail(
            f"{len(left)} process(es) left running after the module: "
            + "; ".join(f"pid {pid}: {cmd[:160]}" for pid, cmd in sorted(left.items()))
        )
