"""The cost of TRL environments (`rollout.tools.environment`): one batch of episodes (reset, `--calls` method
calls per rollout, get_reward, end) for `--rollouts` rollouts through `rollout.environments.Environments`
(the instances in worker processes, every request under a time limit) against the same episodes on
instances in this process, called one after the other (TRL's way for a synchronous environment: no limit,
no isolation). Two methods: one that costs nothing (what is left is the processes' messaging) and one that
waits `--io-ms` (a game server, an API: where the workers run side by side). Ends with one JSON line.

    python bench/environment_calls.py [--rollouts 64] [--calls 4] [--io-ms 5] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ENV = '''
import time

class Counter:
    def reset(self, **row):
        self.count = 0

    def increment(self, by: int) -> int:
        """Add to the count.

        Args:
            by: how much to add
        """
        self.count += by
        return self.count

    def fetch(self, ms: int) -> int:
        """Wait for a server.

        Args:
            ms: milliseconds
        """
        time.sleep(ms / 1000)
        return self.count

    def get_reward(self) -> float:
        return float(self.count)
'''


def _requests(keys: list[int], calls: int, method: str, io_ms: int) -> list[list[tuple]]:
    """Each round's requests: a call per rollout (a rollout's calls come one round after another)."""
    args = {"by": 1} if method == "increment" else {"ms": io_ms}
    return [[("call", k, method, args) for k in keys] for _ in range(calls)]


def in_process(spec: str, rollouts: int, calls: int, method: str, io_ms: int) -> float:
    from reasonrl.user_code import load_callable

    cls = load_callable(spec)
    instances = [cls() for _ in range(rollouts)]
    t0 = time.perf_counter()
    for e in instances:
        e.reset()
    for round_ in _requests(list(range(rollouts)), calls, method, io_ms):
        for _, k, name, args in round_:
            str(getattr(instances[k], name)(**args))
    rewards = [e.get_reward() for e in instances]
    assert rewards == [float(calls)] * rollouts or method == "fetch"
    return time.perf_counter() - t0


def through_workers(spec: str, rollouts: int, calls: int, method: str, io_ms: int, workers: int) -> float:
    from reasonrl.rollout.environments import Environments

    env = Environments(spec, workers, 10.0)
    try:
        env.end(env.begin([("", {})] * workers)[0])  # the processes started (not counted)
        t0 = time.perf_counter()
        keys, resets = env.begin([("", {})] * rollouts)
        assert all(s == "ok" for s, _ in resets)
        for round_ in _requests(keys, calls, method, io_ms):
            assert all(s == "ok" for s, _ in env.ask(round_))
        rewards = env.ask([("reward", k) for k in keys])
        env.end(keys)
        assert rewards == [("ok", float(calls))] * rollouts or method == "fetch"
        return time.perf_counter() - t0
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rollouts", type=int, default=64)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--io-ms", type=int, default=5)
    ap.add_argument("--workers", default="1,2,4,8")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "bench_envs.py").write_text(ENV)
    sys.path.insert(0, str(tmp))
    spec = "bench_envs.Counter"
    requests = args.rollouts * (args.calls + 2)  # resets, calls, rewards
    out = {"rollouts": args.rollouts, "calls": args.calls, "io_ms": args.io_ms}
    for method in ("increment", "fetch"):
        base = in_process(spec, args.rollouts, args.calls, method, args.io_ms)
        print(f"{method}: in this process, one after the other: {base * 1e3:.1f} ms "
              f"({requests / base:.0f} requests/s)")  # fmt: skip
        out[method] = {"in_process_s": base}
        for w in map(int, args.workers.split(",")):
            s = through_workers(spec, args.rollouts, args.calls, method, args.io_ms, w)
            print(f"{method}: {w} worker processes: {s * 1e3:.1f} ms ({requests / s:.0f} requests/s, "
                  f"{s / base:.2f}x the in-process time)")  # fmt: skip
            out[method][f"workers_{w}_s"] = s
    print(json.dumps(out))


if __name__ == "__main__":
    main()
