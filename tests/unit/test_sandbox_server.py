"""rewards.sandbox.server: the pool of long-lived sandboxed harness drivers (reused between jobs, replaced
when they die, misbehave or reach their job cap) and the one-shot path of the unisolated fallback."""

from __future__ import annotations

import pytest

from reasonrl.rewards.sandbox import process, server

pytestmark = pytest.mark.timeout(120)
needs_bwrap = pytest.mark.bwrap


def _job(program="def f(x):\n    return 2 * x\n", tests=("assert f(21) == 42",)):
    return {"kind": "script", "program": program, "prefix": "", "setup": "", "tests": list(tests),
            "memory_mb": 512, "stop_early": True, "timeout_s": 5.0}  # fmt: skip


def _pool(key=None) -> list:
    with server._lock:
        if key is None:
            return [s for pool in server._idle.values() for s in pool]
        return list(server._idle.get(key, []))


@needs_bwrap
def test_a_driver_serves_job_after_job_until_its_cap_then_a_fresh_one_starts(monkeypatch):
    monkeypatch.setattr(server, "MAX_JOBS_PER_SERVER", 2)
    key = (process.interpreter(), server.SERVER_MEMORY_MB)
    server.shutdown()
    pids = []
    for want in (True, False, True):
        reply = server.run_job(_job(tests=["assert f(21) == 42" if want else "assert f(1) == 3"]))
        assert (reply["status"], reply["passed"]) == (
            "success",
            [want],
        )  # the run went fine; the verdict is `passed`
        idle = _pool(key)
        pids.append(idle[0].proc.pid if idle else None)
    assert pids[0] is not None and pids[1] is None  # one driver did two jobs, then was stopped at its cap
    assert pids[2] not in (None, pids[0])  # the third job started a new one
    server.shutdown()


@needs_bwrap
def test_a_driver_that_died_while_idle_is_replaced():
    key = (process.interpreter(), server.SERVER_MEMORY_MB)
    server.shutdown()
    assert server.run_job(_job())["passed"] == [True]
    (idle,) = _pool(key)
    idle.kill()  # dies between jobs
    assert server.run_job(_job())["passed"] == [True]
    (fresh,) = _pool(key)
    assert fresh is not idle and fresh.proc.poll() is None and idle not in server._all
    server.shutdown()
    assert _pool() == [] and not server._all


class _FakeServer:
    def __init__(self, jobs=0, alive=True):
        self.jobs, self.killed = jobs, False
        self.proc = type("P", (), {"poll": lambda s: None if alive and not self.killed else -9})()

    def kill(self):
        self.killed = True


@pytest.mark.parametrize(
    "healthy, jobs, alive, kept",
    [
        (True, 0, True, True),
        (False, 0, True, False),  # timed out or broke the protocol: its next reply could be the old job's
        (True, 5, True, False),  # at the cap
        (True, 4, True, True),
        (True, 0, False, False),  # exited
    ],
)
def test_a_driver_goes_back_to_the_pool_only_when_healthy_alive_and_under_its_cap(
    monkeypatch, healthy, jobs, alive, kept
):
    monkeypatch.setattr(server, "MAX_JOBS_PER_SERVER", 5)
    monkeypatch.setattr(server, "_idle", {})
    monkeypatch.setattr(server, "_all", set())
    fake = _FakeServer(jobs, alive)
    server._all.add(fake)
    server._checkin(("py", 1), fake, healthy)
    assert (_pool(("py", 1)) == [fake]) is kept
    assert (fake in server._all) is kept and fake.killed is not kept
    if kept:
        assert server._checkout(("py", 1)) is fake and _pool(("py", 1)) == []


def test_unisolated_jobs_run_one_shot_without_a_driver(monkeypatch, python_every_uid_reaches):
    started = []
    monkeypatch.setattr(server, "_checkout", lambda key: started.append(key))
    reply = server.run_job(_job(), isolation="unisolated", python=python_every_uid_reaches)
    assert (reply["status"], reply["passed"]) == ("success", [True]) and started == []
    wrong = server.run_job(
        _job(tests=["assert f(1) == 3"]), isolation="unisolated", python=python_every_uid_reaches
    )
    assert (wrong["status"], wrong["passed"]) == ("success", [False])


def test_a_missing_bubblewrap_is_named_before_any_driver_starts(monkeypatch):
    monkeypatch.setattr(process, "bwrap_problem", lambda interp: "bwrap not found on PATH")
    monkeypatch.setattr(server, "_checkout", lambda key: pytest.fail("a driver was started"))
    with pytest.raises(
        process.SandboxUnavailable, match="bubblewrap sandbox unavailable: bwrap not found on PATH"
    ):
        server.run_job(_job(), isolation="bwrap")


@pytest.mark.parametrize(
    "stdout, status, want",
    [
        (
            'noise\n{"status": "success", "passed": [true]}\n',
            "success",
            "success",
        ),  # the last line is the reply
        ("", "failed", "sandbox_error"),
        ("[true]\n", "success", "sandbox_error"),  # JSON, but not a reply
        ('{"passed": [true]}\n', "success", "sandbox_error"),
        ('{"status": "success", "passed": [true]}\nnot json\n', "success", "sandbox_error"),
        ("", "timeout", "timeout"),
    ],
)
def test_a_one_shot_reply_is_the_last_stdout_line_and_nothing_else(stdout, status, want):
    from reasonrl.rewards.sandbox import SandboxResult

    def execute(program, stdin, timeout_s, memory_mb):
        assert (timeout_s, memory_mb) == (5.0 + server.REPLY_GRACE_S, 512 + 256)
        return SandboxResult(status, 0, stdout, "harness stderr\n")

    reply = server.run_one_shot(_job(), execute)
    assert reply["status"] == want
    if want != "success":
        assert reply["passed"] == [] and reply["errors"] == ["harness: harness stderr"]


@needs_bwrap
@pytest.mark.parametrize(
    "hello", [b"not json", b'{"ready": false}', None], ids=["not-json", "not-ready", "exits"]
)
def test_a_driver_that_does_not_start_is_killed_and_named(monkeypatch, hello):
    """A harness whose first message is not JSON, is not its ready message, or that exits at once:
    the sandbox is unavailable (one line), and the driver, still alive for the first two, is killed."""
    say = "" if hello is None else f"os.write(1, struct.pack('>I', {len(hello)}) + {hello!r}); time.sleep(60)"
    monkeypatch.setattr(server, "harness_program", lambda: f"import os, struct, time\n{say}\n".encode())
    killed = []
    kill = server._Server.kill
    monkeypatch.setattr(server._Server, "kill", lambda self: (killed.append(self.proc), kill(self)))
    with pytest.raises(process.SandboxUnavailable, match="the sandboxed test harness did not start"):
        server._Server(process.interpreter(), server.SERVER_MEMORY_MB)
    assert len(killed) == 1 and killed[0].poll() is not None
