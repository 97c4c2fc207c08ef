"""Where a step's rollouts come from: generated right here between updates (`SyncRollouts`,
rollout.max_staleness=0), or by a rollout worker process running up to k policy versions ahead
(`AsyncRollouts`, max_staleness=k > 0). Built by `rollout_source`.

The schedule (async). Step s trains on samples from policy version v(s) = max(start, s - 1 - k), the
policy after s - 1 - k updates (synchronous: s - 1). The worker gets, in order: the start policy and
requests for steps start+1 .. start+k+1; after each update s the trainer pushes policy s and asks for
step s+k+1. So while the trainer updates on step s, the worker already generates step s+1 (and up to
s+k+1): generation and training overlap, each on its own cores. The versions used depend only on the
step, never on timing, so async runs are reproducible.

Exact resume (async). A checkpoint at step s waits for the batches already asked for (steps s+1 ..
s+k+1, generated from older policies that the checkpoint no longer holds) and stores them with the
prompt sampler's position after them; a resumed run replays those batches, then asks for s+k+2 after
its first update, exactly as the uninterrupted run did.

Several ranks. Each rank starts its own worker, which generates that rank's share of every step
(`distributed.set_share`) on the rank's device; weight pushes gather the sharded policy on every rank
in lock-step. A checkpoint stores every rank's pending batches, and a resume on the same number of
ranks replays each rank's own (on another number of ranks they are dropped with a warning: the
resumed run is then valid but not bit-exact). Dynamic sampling and an adaptive curriculum decide on the
whole step's rollouts: then the workers also form a gloo group of their own (met at the launcher's
store, `distributed.side_group_address`), so each worker runs exactly what a synchronous rank runs
(`trainer.sampling.collect_step`: every round gathered from all workers, the same keep / refill and
curriculum decisions on all of them) while the trainers train.

Failure. A worker that raises, dies or delivers nothing for rollout.worker_timeout_s (at start-up:
at least 300 s) raises `RolloutWorkerError` naming the worker (pid) and its phase; the trainer stops,
the worker is stopped or killed (at start-up too, before the error reaches the caller),
no checkpoint is touched after the failure. A failure while a checkpoint waits for pending batches
still writes that checkpoint, with the batches that arrived (a resume generates the others from the
checkpoint's policy, so it is valid but not bit-exact), then stops.

Logged per step: rollout/policy_version (the version sampled), rollout/staleness (s - 1 - version),
perf/rollout_wait_seconds (the trainer waiting for the batch), perf/rollout_worker_seconds (the
worker generating and scoring it), perf/rollout_overlap (the share of that work hidden behind
training: 1 - wait / worker time, clipped to [0, 1]).
"""

from __future__ import annotations

import queue
import time

import torch

from reasonrl.config import RunConfig, to_dict
from reasonrl.trainer.sampling import StepRollouts, step_rollouts


class RolloutWorkerError(RuntimeError):
    pass


class SyncRollouts:
    """Generate each step's rollouts in this process, then push the updated policy to the engine."""

    def __init__(self, run, cfg: RunConfig, needs: frozenset[str], start: int):
        self.run, self.cfg, self.needs, self.version = run, cfg, needs, start

    def get(self, step: int) -> tuple[StepRollouts, dict[str, float]]:
        engine = self.run.rollout_engine
        engine.wake()
        out = step_rollouts(self.run, self.cfg, step, self.needs, self.version)
        engine.sleep()  # generation memory back to the update (where the engine can)
        return out, {}

    def updated(self, step: int) -> None:
        self.run.rollout_engine.sync_weights(self.run.model, step)  # policy version = updates applied
        self.version = step

    def checkpoint_state(self) -> list[StepRollouts]:
        return []

    def close(self) -> None:
        pass


def decides_on_whole_step(cfg: RunConfig) -> bool:
    """Whether a step's rollouts are decided on as a whole (dynamic sampling's refill rounds, the
    curriculum's levels), so that with several ranks every rank's worker must see every share."""
    return bool(cfg.algo.dynamic_sampling.enabled or cfg.data.curriculum.enabled)


class AsyncRollouts:
    def __init__(self, run, cfg: RunConfig, start: int, replay: list[dict]):
        import torch.multiprocessing as mp

        self.run, self.cfg, self.k = run, cfg, cfg.rollout.max_staleness
        self.timeout = cfg.rollout.worker_timeout_s
        self.threads = torch.get_num_threads()  # lowered while the worker runs, restored by close()
        self.ready: dict[int, StepRollouts] = {d["step"]: d["rollouts"] for d in replay}
        self.asked: list[int] = sorted(self.ready)  # asked for (or replayed), not yet trained on
        ctx = mp.get_context("spawn")
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.phase = ctx.Array("c", 200, lock=False)
        sampler_state = replay[-1]["rollouts"].sampler_state if replay else run.sampler.state_dict()
        import os

        from reasonrl import distributed as dist
        from reasonrl.trainer.rollout_worker import worker_main

        # with several ranks each rank has its own worker, generating that rank's share of every step
        share = (dist.rank(), dist.world_size(), int(os.environ.get("LOCAL_RANK", "0")))
        # decisions on the whole step's rollouts: the workers form their own group to see every rank's share
        whole = dist.world_size() > 1 and decides_on_whole_step(cfg)
        group = dist.side_group_address("rollout-workers") if whole else None
        self.proc = ctx.Process(
            target=worker_main,
            args=(
                to_dict(cfg),
                run.sampler,  # its sources (problems, generators, curriculum); the state comes next
                sampler_state,
                cfg.rollout.worker_threads,
                self.inbox,
                self.outbox,
                self.phase,
                share,
                group,
            ),  # fmt: skip
            name="reasonrl-rollout-worker",
            # not daemonic: the worker's RewardRunner starts its own process pool (math, plugins), which
            # a daemonic process may not; it still dies with the trainer (PR_SET_PDEATHSIG), and
            # `close` (also at interpreter exit, before multiprocessing joins its children) stops it
            daemon=False,
        )
        import atexit

        atexit.register(self.close)
        self.proc.start()
        self.pid = self.proc.pid
        try:
            self._receive(expect="ready", what="start-up")
        except BaseException:  # the caller never gets this source to close: a worker that hangs
            self.close()  # at start-up (or a Ctrl-C meanwhile) must not outlive the failed start
            raise
        torch.set_num_threads(max(1, torch.get_num_threads() - cfg.rollout.worker_threads))
        self.error: RolloutWorkerError | None = None
        self._push(start)
        # replayed steps first (a prefix: the worker answers in order), then the rest of the window
        for s in range(max(self.asked, default=start) + 1, start + self.k + 2):
            self._ask(s, start)

    # --- protocol -----------------------------------------------------------------------------
    def _push(self, version: int) -> None:
        from reasonrl.trainer.rollout_worker import pack_weights

        self.inbox.put(("weights", version, pack_weights(self.run.model)))

    def _ask(self, step: int, version: int) -> None:
        if step <= self.cfg.train.steps:
            self.inbox.put(("rollouts", step, version))
            self.asked.append(step)

    def _phase(self) -> str:
        return bytes(self.phase[:]).split(b"\0")[0].decode() or "unknown"

    def _receive(self, expect: str, what: str):
        limit = max(self.timeout, 300.0) if expect == "ready" else self.timeout  # start-up imports, loads
        deadline = time.monotonic() + limit
        while True:
            try:
                msg = self.outbox.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                if not self.proc.is_alive():
                    raise RolloutWorkerError(
                        f"rollout worker (pid {self.pid}) died with exit code {self.proc.exitcode} while "
                        f"{self._phase()} (the trainer was waiting for {what})"
                    ) from None
                if time.monotonic() > deadline:
                    raise RolloutWorkerError(
                        f"rollout worker (pid {self.pid}) hung: nothing for {what} within {limit:g}s "
                        f"(rollout.worker_timeout_s={self.timeout:g}); its phase: {self._phase()}"
                    ) from None
                continue
            if msg[0] == "error":
                raise RolloutWorkerError(
                    f"rollout worker (pid {self.pid}) failed while {msg[1]}: "
                    f"{msg[2].strip().splitlines()[-1]}\n{msg[2]}"
                )
            if msg[0] != expect:
                raise RolloutWorkerError(
                    f"rollout worker (pid {self.pid}) sent {msg[0]!r}, expected {expect!r}"
                )
            return msg

    # --- the trainer's side -------------------------------------------------------------------
    def get(self, step: int) -> tuple[StepRollouts, dict[str, float]]:
        if self.error is not None:  # the worker failed while a checkpoint waited for it
            raise self.error
        t0 = time.perf_counter()
        while step not in self.ready:
            _, s, out = self._receive(expect="rollouts", what=f"the rollouts of step {step}")
            self.ready[s] = out
        out = self.ready.pop(step)
        self.asked.remove(step)
        self.run.sampler.load_state_dict(out.sampler_state)  # the prompts drawn so far, for checkpoints
        wait = time.perf_counter() - t0
        return out, {
            "rollout/staleness": float(step - 1 - out.version),
            "perf/rollout_wait_seconds": wait,
            "perf/rollout_worker_seconds": out.seconds,
            "perf/rollout_overlap": min(1.0, max(0.0, 1.0 - wait / out.seconds)) if out.seconds else 0.0,
        }

    def updated(self, step: int) -> None:
        self._push(step)
        self._ask(step + self.k + 1, step)
        self.run.rollout_engine.sync_weights(self.run.model, step)  # the trainer's engine: validation

    def checkpoint_state(self) -> list[dict]:
        """The batches asked for and not yet trained on (waits for them), for an exact resume. If the
        worker fails meanwhile, the batches that did arrive are saved (the checkpoint stays usable:
        a resume generates the rest from its policy) and the next `get` raises the failure."""
        try:
            for s in list(self.asked):
                while s not in self.ready:
                    _, got, out = self._receive(
                        expect="rollouts", what=f"the rollouts of step {s} (checkpoint)"
                    )
                    self.ready[got] = out
        except RolloutWorkerError as e:
            self.error = e
        return [{"step": s, "rollouts": self.ready[s]} for s in sorted(self.asked) if s in self.ready]

    def close(self) -> None:
        import atexit

        atexit.unregister(self.close)
        if self.proc.is_alive():  # asked-for steps queue before "stop": give it a moment, then kill
            try:
                self.inbox.put(("stop",))
                self.proc.join(timeout=5)
            except (OSError, ValueError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=10)
        for q in (self.inbox, self.outbox):
            q.cancel_join_thread()
            q.close()
        # the trainer's threads go back to what they were: a later run in this process (a library
        # caller, a benchmark running synchronous after asynchronous) must not train on fewer cores
        torch.set_num_threads(self.threads)


def rollout_source(run, cfg: RunConfig, needs: frozenset[str], start: int, replay: list[dict] | None):
    """SyncRollouts for max_staleness 0, else AsyncRollouts (replaying a checkpoint's pending batches);
    SftRollouts (the data's responses) for algo.objective=sft."""
    if cfg.algo.objective == "sft":
        from reasonrl.trainer.sft import SftRollouts

        return SftRollouts(run, cfg, needs, start)
    if cfg.rollout.max_staleness == 0:
        return SyncRollouts(run, cfg, needs, start)
    return AsyncRollouts(run, cfg, start, list(replay or []))
