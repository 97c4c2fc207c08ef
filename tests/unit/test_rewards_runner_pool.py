"""RewardRunner's process pool: workers recycled after max tasks, quick calls batched into few tasks
(sizes from measured call seconds) and failed batches rerun call by call, workers and their
replacements forked warm, workers dying with a SIGKILLed caller, a wedged pool given up and rebuilt.
Results, modes and terms: test_rewards_runner.py."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

from reasonrl.rewards.base import RewardResult
from reasonrl.rewards.runner import RewardRunner, _Job

sys.path.insert(0, str(Path(__file__).parent))  # workers get the parent's sys.path
import _runner_verifiers as H  # noqa: E402  (registers the "_runner_test/..." verifiers)
from _runner_verifiers import prob  # noqa: E402

T = H.P
TIMEOUT = 1.0


def test_workers_recycled_after_max_tasks():
    with RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__], max_tasks_per_worker=2) as r:
        res, _ = r.score(["a"] * 6, [prob(T + "echo")] * 6)
    assert [x.score for x in res] == [1.0] * 6
    assert len({x.info["pid"] for x in res}) == 3  # one worker, replaced after every 2 calls


def test_quick_calls_are_batched_into_few_tasks_with_the_same_results():
    gts = [str(i % 3) for i in range(40)]
    responses = [str(i % 2) for i in range(40)]  # right where i % 3 == i % 2
    want = [float(a == b) for a, b in zip(responses, gts)]
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        first, _ = r.score(responses, [prob(T + "echo_or_die", g) for g in gts])
        assert r.tasks_scheduled == 40  # a verifier not yet measured: one call per task
        second, m = r.score(responses, [prob(T + "echo_or_die", g) for g in gts])
    assert r.tasks_scheduled - 40 == 4  # measured quick: 10 calls a task, two tasks per worker
    assert [x.score for x in first] == [x.score for x in second] == want
    assert [x.info["extracted"] for x in second] == responses
    assert m["verifier/count"] == 40 and m["verifier/latency_p95_s"] < TIMEOUT


def test_a_batch_with_a_hang_and_a_crash_is_rerun_call_by_call():
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        r.score(["a"] * 8, [prob(T + "echo_or_die")] * 8)  # measured quick: the next call batches
        # four batches of four calls: the first and third fail as a whole, the others do not
        responses = ["a", "b", "hang", "a"] + ["a", "c", "a", "a"] + ["exit", "a", "a", "b"] + ["a"] * 4
        res, m = r.score(responses, [prob(T + "echo_or_die")] * 16)
        tasks = r.tasks_scheduled
        again, _ = r.score(["a"] * 8, [prob(T + "echo_or_die")] * 8)
    reasons = {"hang": "timeout", "exit": "error: worker died (exit code 3)"}
    assert [x.reason for x in res] == [reasons.get(x, "ok") for x in responses]
    assert [x.score for x in res] == [float(x == "a") for x in responses]
    assert m["verifier/timeout_rate"] == 1 / 16 and m["verifier/error_rate"] == 1 / 16
    # 8 warm-up tasks, 4 batches, then the 8 calls of the two failed ones one by one; after a failure
    # the verifier is unmeasured again, so the next call goes one per task
    assert tasks == 8 + 4 + 8 and r.tasks_scheduled - tasks == 8
    assert [x.score for x in again] == [1.0] * 8


WARM_POOL = """
import os
import _runner_verifiers as H
from reasonrl.rewards.runner import RewardRunner
from reasonrl.types import Problem

def prob(v):
    return Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="a", data_source="t", verifier=v)

if __name__ == "__main__":
    with RewardRunner(workers=1, timeout_s=30, modules=[H.__name__], preload=["math_verify", "_preload_marker"]) as r:
        (a, b, c), _ = r.score(["", "exit", ""], [prob(H.P + "warm_state")] * 2 + [prob(H.P + "warm_fails")])
        (d,), _ = r.score([""], [prob(H.P + "warm_state")])
    print(a.info["pid"], d.info["pid"], a.info["warmed_in"], d.info["warmed_in"], a.info["math"], d.info["math"],
          b.info["reason"].split(":")[0], c.score, os.getpid())
"""


def test_pool_workers_and_their_replacements_fork_warm(tmp_path):
    """The verifiers' warm-ups run once, in the pool's forkserver (a fresh process here: a forkserver
    starts once per process, with the first pool's preloads); the worker and the one that replaces it
    after it died both inherit them, math-verify's among them, and a failing warm-up breaks nothing."""
    import ast
    import subprocess

    script = tmp_path / "warm_pool.py"
    script.write_text(WARM_POOL)
    # on the PYTHONPATH: a forkserver imports its preloads before it reads the parent's sys.path (3.11)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second, warmed_a, warmed_d, math_a, math_d, died, other, caller = out.stdout.split(maxsplit=8)
    assert died == "error" and first != second  # the worker died, the second call ran in its replacement
    server = ast.literal_eval(warmed_a)  # one warm-up, in one process: neither a worker nor the caller
    assert len(server) == 1 and str(server[0]) not in (first, second, caller.strip())
    assert ast.literal_eval(warmed_d) == server and math_a == math_d == "True"
    assert other == "1.0"


HANGING = """
import os, time
from reasonrl.rewards.base import VERIFIERS

@VERIFIERS.register("_orphan/hang")
def hang(response, problem):
    open(os.path.join(os.environ["ORPHAN_DIR"], str(os.getpid())), "w").close()
    time.sleep(300)  # busy in a call: only the kernel's parent-death signal ends it early
"""

ORPHANS = """
import hanging_verifier
from reasonrl.rewards.runner import RewardRunner
from reasonrl.types import Problem

if __name__ == "__main__":
    r = RewardRunner(workers=2, timeout_s=300, modules=["hanging_verifier"])
    p = Problem(prompt=[{"role": "user", "content": "q"}], ground_truth="a", data_source="t", verifier="_orphan/hang")
    r.score(["a"] * 2, [p] * 2)
"""


def test_workers_busy_in_a_call_die_with_a_killed_caller(tmp_path):
    """A trainer killed with SIGKILL runs no cleanup: its verifier workers, even one in the middle
    of a long call, must go with it (each is armed to die with its parent, the forkserver, which
    exits when the trainer is gone)."""
    import signal
    import subprocess
    import time

    (tmp_path / "hanging_verifier.py").write_text(HANGING)
    (tmp_path / "orphans.py").write_text(ORPHANS)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = {**os.environ, "ORPHAN_DIR": str(pid_dir),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(tmp_path / "orphans.py")], env=env)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            pids = [int(x.name) for x in pid_dir.iterdir()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)  # both workers are in their calls
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids), "verifier workers outlived their killed caller"
    finally:
        proc.kill()
        proc.wait()
        for p in pids:  # never leave one behind, even when the test fails
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_wedged_pool_times_out_its_calls_and_is_rebuilt(monkeypatch):
    import concurrent.futures as cf
    import time

    r = RewardRunner(workers=2, timeout_s=0.2, thread_timeout_s=20.0, modules=[H.__name__])
    r.wedge_grace_s = 0.0  # the outer deadline: 0.2 s x (1 round + 2) instead of 30 s more
    try:
        r.score(["a"], [prob(T + "echo")])  # a real pool, started
        pool = r._pool
        # the pool machinery stops answering: its tasks never complete (pebble's own limit never fires)
        monkeypatch.setattr(r, "_schedule", lambda batch, call_args: cf.Future())
        t0 = time.monotonic()
        res, m = r.score(["a", "<answer>3</answer>", "b", "t"],
                         [prob(T + "echo"), prob("arithmetic", "3"), prob(T + "echo"), prob(T + "threaded")])  # fmt: skip
        # given up at the pool's own deadline (0.6 s), not at the thread calls' 20 s backstop
        assert time.monotonic() - t0 < 10.0
        assert 0.5 < m["verifier/latency_p95_s"] < 10.0  # the timed-out calls waited that long
        assert [(x.score, x.reason) for x in res] == [(0.0, "timeout"), (1.0, "correct"), (0.0, "timeout"), (1.0, "ok")]  # fmt: skip
        assert (r.restarts, r._pool) == (1, None)  # the wedged pool is dropped...
        monkeypatch.undo()
        res, _ = r.score(["a"], [prob(T + "echo")])
        assert res[0].score == 1.0 and r._pool is not None and r._pool is not pool  # ...and rebuilt

        # a thread call past its backstop times out, but the process pool is not to blame
        class Stuck:
            def submit(self, *args):
                return cf.Future()

        monkeypatch.setattr(r, "_thread_pool", lambda name: Stuck())
        r.thread_timeout_s = 0.1
        res, _ = r.score(["t", "a"], [prob(T + "threaded"), prob(T + "echo")])
        assert [x.reason for x in res] == ["timeout", "ok"] and r.restarts == 1
    finally:
        r.close()


def test_batch_sizes_come_from_a_running_mean_of_measured_call_seconds():
    r = RewardRunner(workers=2, timeout_s=10.0)  # nothing scored: no pool is started

    def jobs(name, seconds, reason="ok"):
        return [_Job(item=i, term="correctness", name=name, result=RewardResult(1.0, {"reason": reason}),
                     latency=s) for i, s in enumerate(seconds)]  # fmt: skip

    r._learn_latency(jobs("v", [0.002, 0.004]) + jobs("w", [math.nan, 0.5]), failed=[])
    assert r._latency == pytest.approx({"v": 0.003, "w": 0.5})  # an unmeasured call does not count
    # the next measurement averages with the last (not replaces it); timeouts and errors do not count
    r._learn_latency(jobs("v", [0.001]) + jobs("v", [9.0], "timeout") + jobs("v", [9.0], "error: x"), [])
    assert r._latency["v"] == pytest.approx(0.002)
    # 0.02 x 10 s / 0.002 s = 100 calls a task, capped at 64 and at two tasks per worker
    sizes = [len(b) for b in r._pool_batches(jobs("v", [0.0] * 600))]
    assert sizes == [64] * 9 + [24]
    assert [len(b) for b in r._pool_batches(jobs("v", [0.0] * 40))] == [10] * 4
    # 0.02 x 10 s / 0.5 s = 0.4: slow calls go one to a task; so do a verifier's never measured
    assert [len(b) for b in r._pool_batches(jobs("w", [0.0] * 3) + jobs("u", [0.0] * 2))] == [1] * 5
    # a batch of "v" failed as a whole: one call per task until it is measured again
    r._learn_latency([], failed=jobs("v", [0.0]))
    assert "v" not in r._latency and [len(b) for b in r._pool_batches(jobs("v", [0.0] * 4))] == [1] * 4
    r.close()


def test_a_batch_of_two_that_fails_is_rerun_call_by_call():
    with RewardRunner(workers=2, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        r.score(["a"] * 8, [prob(T + "echo_or_die")] * 8)  # measured quick
        tasks = r.tasks_scheduled
        responses = ["a", "hang", "a", "a", "b", "a", "a", "a"]  # 8 calls: 4 tasks of two
        res, _ = r.score(responses, [prob(T + "echo_or_die")] * 8)
    assert r.tasks_scheduled - tasks == 4 + 2  # the failed pair again, one call each
    assert [x.reason for x in res] == ["ok", "timeout"] + ["ok"] * 6  # the hang, not its partner
    assert [x.score for x in res] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]


def test_closing_soon_shortens_pebbles_tick_until_close():
    """An eval says when its last chunk starts: the pool then polls every 5 ms, so closing it does not
    wait up to pebble's 0.1 s tick; `close` puts pebble's tick back for any pool that lives on."""
    from pebble.common import CONSTS

    tick = CONSTS.sleep_unit
    with RewardRunner(workers=1, timeout_s=TIMEOUT, modules=[H.__name__]) as r:
        assert r.score(["a"], [prob(T + "echo")])[0][0].score == 1.0
        assert CONSTS.sleep_unit == tick  # a pool that lives on keeps pebble's tick
        r.closing_soon()
        assert CONSTS.sleep_unit == 0.005
        assert r.score(["a"], [prob(T + "echo")])[0][0].score == 1.0  # and still scores
    assert CONSTS.sleep_unit == tick
