"""Batch scoring of (response, problem) pairs: per-call time limits, hard kills, health metrics.

Owns: `RewardRunner` — routes each problem to its verifier (`routing.verifier_name`), runs the call
in one of three places, combines weighted terms (correctness + shaping terms) into one reward, keeps
input order, and reports health metrics (`verifier/...`) for every batch. Does not own: what any
verifier computes (domain modules), routing rules (`rewards.routing`), running untrusted code
(`rewards.sandbox`), or reducing metrics across steps / ranks (`trainer.metrics`).

Where a verifier runs (its *run mode*), chosen per verifier name:

    "inline"  in the calling process, no time limit. For cheap, pure, bounded verifiers
              (arithmetic, countdown, format terms). A verifier declares it with the function
              attribute `fn.run_mode = "inline"`; `DEFAULT_INLINE` lists built-ins that do not.
    "thread"  in a thread pool of the calling process, for I/O-bound verifiers that bound their own
              time (the LLM judge: HTTP timeouts + retries). Declared with `fn.run_mode = "thread"`.
    "batch"   one call per batch of the verifier's rows, in a thread of the calling process:
              `fn.score_batch(responses, problems, **options) -> [RewardResult]`, for a model that scores
              many rows a forward at a time (the reward model, `verifiers.reward_model`), loaded once in
              this process. A call that raises fails every row of it. Declared with
              `fn.run_mode = "batch"`.
    "pool"    (default) in a long-lived pebble `ProcessPool`. Each call has `timeout_s`; a worker
              that runs past it is killed (SIGTERM, then SIGKILL) and replaced by pebble; a worker
              that dies (os._exit, segfault) is replaced too. Either way the call scores 0 with
              info["reason"] = "timeout" or "error: ...". Calls of a verifier measured to be quick
              (math: well under a millisecond) go several to a task, so a batch costs a few messages
              instead of one per call; a batched task has the limit of one call, and one that runs
              past it or loses its worker is run again call by call, so each call still gets its
              own limit and its own result (a hang costs at most twice the limit).

The runner's `inline=` / `threaded=` arguments override the declarations by name. Wherever it runs,
a call that raises, returns something other than a `RewardResult`, or a score that is not a finite
number (NaN would make its group's advantages NaN and the step's gradient with them) scores 0 with
reason "error: ...", counted in the error rate.

Options worth knowing: `modules=` are imported here and in every worker (plugins that register
verifiers); `preload=` only in workers, when they start: heavy libraries (e.g. "math_verify") whose
import then runs outside any call's time limit, so the first call after a kill is not charged for
importing sympy, and the calling process (which may never need them) does not pay for it either. A
verifier declares its own with `fn.preload = ("math_verify",)`; `preload_modules(problems)` collects
them for the verifiers a dataset routes to. A verifier's `fn.warm_up` (a bounded function that fills
its libraries' caches) runs once per process, in the forkserver after the preloads (`rewards.warm_up`).
`start()` starts the workers now (their imports overlap whatever the caller does next, e.g. loading
a model) instead of at the first call. `max_tasks_per_worker=N` recycles each worker after
N tasks, bounding memory that verifier libraries cache (sympy) at the cost of a re-import.

Workers import `reasonrl.rewards` (built-in registrations) plus the modules named in `modules=` and
receive the parent's `sys.path`, so verifiers registered on import of any module are available in
workers under every start method. The default start method is "forkserver": the trainer process
holds threads (torch, CUDA), and forking such a process is unsafe.

Combining terms: `weights={"correctness": 1.0, "format_think_answer": 0.1}` scores each named term
as its own call (same run modes / limits) and returns total = sum(w * term_score). The routed
verifier is the term "correctness"; its 0..1 score stays in info["correctness"], every term's raw
score in info["terms"], and a failed term's reason in info["term_reasons"]. Keyword options of any
verifier travel as `options={"overlong": {"max_len": 4096, "cache_len": 512}}`, checked against
the verifier's signature when the runner is built. `correctness_only()` is a view of the same runner that
scores the routed verifier alone (validation, which reports correctness, runs no other term).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, check_setup
from reasonrl.rewards.health import health_metrics, kind
from reasonrl.rewards.routing import verifier_name
from reasonrl.rewards.worker import call_batch, call_many, call_verifier, failure, init_worker, noop
from reasonrl.types import Problem

CORRECTNESS = "correctness"
RUN_MODES = ("inline", "thread", "batch", "pool")
# built-in verifiers that are cheap and pure but whose modules do not set `run_mode`
DEFAULT_INLINE = frozenset({"arithmetic", "countdown", "format_think_answer", "overlong"})
BATCH_BUDGET = 0.02  # a batched pool task is sized to take about this share of the time limit
MAX_BATCH = 64
# what a term's verifier reports beside its score that the combined result keeps (a TRL reward function's
# own scores and what it logged: `verifiers.trl_function`)
TERM_INFO = ("functions", "function_log", "logged_extra")
_PEBBLE_TICK: float | None = None  # pebble's own poll interval, saved when `closing_soon` lowers it


def preload_modules(problems: Iterable[Problem]) -> tuple[str, ...]:
    """The modules the verifiers of these problems declare for preloading (`fn.preload`), in order."""
    out: dict[str, None] = {}
    for name in dict.fromkeys(verifier_name(p) for p in problems):
        out.update(dict.fromkeys(getattr(VERIFIERS.get(name), "preload", ())))
    return tuple(out)


# ----------------------------------------------------------------------------- runner


@dataclass
class _Job:
    item: int  # index into the batch
    term: str  # "correctness" or a shaping term name
    name: str  # verifier name actually called
    mode: str = "pool"
    result: RewardResult | None = None
    latency: float = math.nan


def default_workers() -> int:
    """Verifier workers for a job that has the machine to itself (`reasonrl eval`, the pass-rate
    filter): every core this process may use but one, at least 2 and at most 16. On a 16-core GPU
    machine, 256 math answers took 0.38 s to score with 2 workers and 0.11 s with 15, while the GPU
    generated a chunk in about as long (docs/evaluation.md)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
    return max(2, min(16, cores - 1))


class RewardRunner:
    """Scores batches; create once and reuse (the process pool is long-lived). Close when done.

    A batch's pool calls that have not come back by `timeout_s * (rounds + 2) + wedge_grace_s`
    (rounds: calls per worker) mean the pool machinery itself wedged: they score 0 ("timeout") and the
    pool is rebuilt on the next call (`restarts`).

    >>> with RewardRunner(workers=2, timeout_s=10) as r:        # doctest: +SKIP
    ...     results, metrics = r.score(responses, problems)
    """

    def __init__(
        self,
        workers: int = 2,
        timeout_s: float = 10.0,
        inline: Iterable[str] | None = None,
        threaded: Iterable[str] | None = None,
        weights: dict[str, float] | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        modules: Iterable[str] = (),
        preload: Iterable[str] = (),
        threads: int = 8,
        thread_timeout_s: float = 600.0,
        max_tasks_per_worker: int = 0,
        start_method: str = "forkserver",
    ):
        import importlib

        if workers < 1 or timeout_s <= 0 or threads < 1:
            raise ValueError("workers and threads must be >= 1 and timeout_s > 0")
        self.workers, self.timeout_s, self.threads = workers, float(timeout_s), threads
        self.thread_timeout_s = float(thread_timeout_s)
        self.wedge_grace_s = 30.0  # beyond the calls' own limits, before the pool counts as wedged
        self.max_tasks_per_worker = int(max_tasks_per_worker)
        self.modules = tuple(modules)
        for m in self.modules:  # same registrations here as in the workers
            importlib.import_module(m)
        self.preload = tuple(m for m in preload if m not in self.modules)
        self._inline = set(inline) if inline is not None else None
        self._threaded = set(threaded) if threaded is not None else None
        self.weights = dict(weights) if weights is not None else {CORRECTNESS: 1.0}
        for term in self.weights:
            if term != CORRECTNESS:
                VERIFIERS.get(term)  # unknown term name: fail now, naming the known ones
        self.options = {k: dict(v) for k, v in (options or {}).items()}
        terms = {t: {} for t in self.weights if t != CORRECTNESS and t not in self.options}
        for name, kw in {**terms, **self.options}.items():  # a typo in an option fails here, not mid-run
            VERIFIERS.check_kwargs(name, kw, where="reward options")
            try:
                check_setup(name, kw)  # and so does a value that cannot work (backend typo, no server)
            except ValueError as e:
                raise ValueError(f"reward options for {name!r}: {e}") from None
        self.start_method = start_method
        self._pool = None
        self._starter = None  # the thread of a background start()
        self._tpools: dict[str, cf.ThreadPoolExecutor] = {}
        self.restarts = 0  # pools rebuilt after a hang of the pool itself (not worker kills)
        self.tasks_scheduled = 0  # pool tasks sent (a batch of quick calls is one task)
        self._latency: dict[str, float] = {}  # verifier name -> mean seconds per pool call
        self._tick_lowered = False  # closing_soon() lowered pebble's tick; close() restores it
        self.trainer_state: dict | None = None  # the step, set by the trainer (`trl_function` reads it)

    # -- lifecycle
    def __enter__(self) -> RewardRunner:
        return self

    def start(self) -> RewardRunner:
        """Start the worker processes now, from a background thread: their start-up (the forkserver's
        imports, the preloads) overlaps whatever the caller does next, e.g. loading a model. The first
        `score` waits for it."""
        import threading

        def warm() -> None:
            pool = self._process_pool()
            for _ in range(self.workers):
                pool.schedule(noop)

        self._starter = threading.Thread(target=warm, name="reward-runner-start", daemon=True)
        self._starter.start()
        return self

    def _wait_started(self) -> None:
        if self._starter is not None:
            self._starter.join()
            self._starter = None

    def __exit__(self, *exc: object) -> None:
        self.close()

    def closing_soon(self) -> None:
        """The caller is about to send its last batch (an eval's last chunk): until `close`, pebble's threads
        poll every 5 ms, not 0.1 s (`pebble.common.CONSTS.sleep_unit`, process-wide), so `close`, joining them,
        waits ~5 ms, not up to 0.1 s. A pool that lives on (a training run's) keeps 0.1 s (5 ms: ~1.5% of a core)."""
        from pebble.common import CONSTS

        global _PEBBLE_TICK
        if _PEBBLE_TICK is None:
            _PEBBLE_TICK = CONSTS.sleep_unit
        CONSTS.sleep_unit = min(CONSTS.sleep_unit, 0.005)
        self._tick_lowered = True

    def close(self) -> None:
        """Stop workers and threads. The runner can be used again (a new pool starts lazily)."""
        self._wait_started()
        self._close_pool()
        if self._tick_lowered:  # pebble's own tick again, for any pool that lives on
            from pebble.common import CONSTS

            CONSTS.sleep_unit = _PEBBLE_TICK
            self._tick_lowered = False
        for tpool in self._tpools.values():
            tpool.shutdown(wait=False, cancel_futures=True)
        self._tpools = {}

    def _close_pool(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.stop()
            try:
                pool.join(timeout=10)
            except TimeoutError:
                pass

    def __del__(self) -> None:  # best effort; explicit close() is the contract
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def _process_pool(self):
        if self._pool is None or not self._pool.active:
            from pebble import ProcessPool

            context = multiprocessing.get_context(self.start_method)
            if self.start_method == "forkserver":
                # workers fork from a server that imported these once (sympy: ~0.3 s each), so neither
                # the workers' start nor a replacement after a kill pays for the imports again; it
                # takes effect when the server starts (once per process); its last preload warms the
                # verifiers whose libraries it imported (rewards.warm_up), so workers fork warm too
                context.set_forkserver_preload(
                    ["reasonrl.rewards", *self.modules, *self.preload, "reasonrl.rewards.warm_up"]
                )
            self._pool = ProcessPool(
                max_workers=self.workers,
                max_tasks=self.max_tasks_per_worker,
                initializer=init_worker,
                initargs=(list(sys.path), (*self.modules, *self.preload)),
                context=context,
            )
        return self._pool

    def _thread_pool(self, name: str) -> cf.ThreadPoolExecutor:
        """One pool per thread-mode verifier, so a slow one (a judge endpoint) never starves another
        (the code sandbox)."""
        if name not in self._tpools:
            self._tpools[name] = cf.ThreadPoolExecutor(self.threads, thread_name_prefix=f"verifier-{name}")
        return self._tpools[name]

    def run_mode(self, name: str) -> str:
        """Where verifier `name` runs: "inline", "thread", "batch" or "pool" (see the module docstring)."""
        if self._inline is not None and name in self._inline:
            return "inline"
        if self._threaded is not None and name in self._threaded:
            return "thread"
        declared = getattr(VERIFIERS.get(name), "run_mode", None)
        if declared is not None:
            if declared not in RUN_MODES:
                raise ValueError(f"verifier {name!r} declares run_mode={declared!r}; one of {RUN_MODES}")
            # an explicit runner list that leaves this name out means "not here"
            if declared == "inline" and self._inline is not None:
                return "pool"
            if declared == "thread" and self._threaded is not None:
                return "pool"
            return declared
        if self._inline is None and name in DEFAULT_INLINE:
            return "inline"
        return "pool"

    # -- scoring
    def correctness_only(self) -> _CorrectnessOnly:
        """This runner (its pools, its limits) scoring the routed verifier alone: for validation, which
        reports correctness, so a reward model or another term is not run for nothing."""
        return _CorrectnessOnly(self)

    def score(self, responses: Sequence[str], problems: Sequence[Problem], all_terms: bool = True,
              given: Sequence[dict | None] | None = None) -> tuple[list[RewardResult], dict[str, float]]:  # fmt: skip
        """Score `responses[i]` against `problems[i]`; results keep input order. `all_terms` False: the
        routed verifier alone (the score is its correctness). `given[i]`: {verifier name: RewardResult} known
        already (an environment's reward, `rollout.environments`), taken as that verifier's result.

        Raises ValueError / RegistryError before any work if a problem cannot be routed (that is a
        data error). A verifier that raises, hangs or crashes scores 0 with the reason recorded.
        """
        if len(responses) != len(problems):
            raise ValueError(f"{len(responses)} responses but {len(problems)} problems")
        weights = self.weights if all_terms else {CORRECTNESS: 1.0}
        t0 = time.perf_counter()
        jobs: list[_Job] = []
        for i, p in enumerate(problems):
            for term in weights:
                name = verifier_name(p) if term == CORRECTNESS else term
                VERIFIERS.get(name)
                jobs.append(_Job(i, term, name))
        modes = {j.name: self.run_mode(j.name) for j in jobs}
        for j in jobs:
            j.mode = modes[j.name]
            if given and (given[j.item] or {}).get(j.name) is not None:
                j.mode, j.result, j.latency = "given", given[j.item][j.name], 0.0

        def call_args(j: _Job) -> tuple:
            return (j.name, responses[j.item], problems[j.item], self._options(j.name))

        pool_jobs = [j for j in jobs if j.mode == "pool"]
        if pool_jobs:
            self._wait_started()
        pending = {self._schedule(b, call_args): b for b in self._pool_batches(pool_jobs)}
        for j in jobs:
            if j.mode == "thread":
                pending[self._thread_pool(j.name).submit(call_many, [call_args(j)])] = [j]
        for name in dict.fromkeys(j.name for j in jobs if j.mode == "batch"):
            rows = [j for j in jobs if j.mode == "batch" and j.name == name]
            call = (
                name,
                [responses[j.item] for j in rows],
                [problems[j.item] for j in rows],
                self._options(name),
            )
            pending[self._thread_pool(name).submit(call_batch, *call)] = rows
        for j in jobs:  # inline work overlaps with the pool's
            if j.mode == "inline":
                j.result, j.latency = call_verifier(*call_args(j))
        retry = self._collect(pending)
        if retry:  # batches that failed as a whole: their calls again, one task each
            self._collect({self._schedule([j], call_args): [j] for j in retry})
        self._learn_latency(pool_jobs, failed=retry)

        results = [self._combine(i, [j for j in jobs if j.item == i], weights) for i in range(len(problems))]
        metrics = health_metrics(jobs)
        metrics["verifier/batch_seconds"] = time.perf_counter() - t0
        return results, metrics

    def _options(self, name: str) -> dict | None:
        """Verifier `name`'s options, with the trainer's `trainer_state` where it takes one (a TRL function)."""
        opts = self.options.get(name)
        if self.trainer_state is None or not getattr(VERIFIERS.get(name), "takes_trainer_state", False):
            return opts
        return {**(opts or {}), "trainer_state": dict(self.trainer_state)}

    def _pool_batches(self, jobs: list[_Job]) -> list[list[_Job]]:
        """Pool calls grouped into tasks: a verifier's calls go several to a task when its calls are
        known to be quick (each task then costs about BATCH_BUDGET of the time limit; at least two
        tasks per worker), one to a task otherwise (a verifier not yet seen, or a slow one)."""
        by_name: dict[str, list[_Job]] = {}
        for j in jobs:
            by_name.setdefault(j.name, []).append(j)
        out = []
        for name, js in by_name.items():
            seconds = self._latency.get(name)
            size = 1
            if seconds is not None:
                size = int(BATCH_BUDGET * self.timeout_s / max(seconds, 1e-6))
                size = max(1, min(size, MAX_BATCH, math.ceil(len(js) / (2 * self.workers))))
            out += [js[i : i + size] for i in range(0, len(js), size)]
        return out

    def _schedule(self, batch: list[_Job], call_args) -> cf.Future:
        """One pool task for `batch`, with the time limit of one call (a batch that runs past it, or
        whose worker dies, is scored again call by call: see `_collect`)."""
        self.tasks_scheduled += 1
        calls = [call_args(j) for j in batch]
        return self._process_pool().schedule(call_many, args=(calls,), timeout=self.timeout_s)

    def _learn_latency(self, jobs: list[_Job], failed: list[_Job]) -> None:
        """Per verifier, a running mean of seconds per pool call (what batch sizes are made from); a
        verifier whose batch failed goes back to one call per task until it is measured again."""
        lat: dict[str, list[float]] = {}
        for j in jobs:
            if not math.isnan(j.latency) and kind(j.result) == "ok":
                lat.setdefault(j.name, []).append(j.latency)
        for name, xs in lat.items():
            mean = sum(xs) / len(xs)
            old = self._latency.get(name)
            self._latency[name] = mean if old is None else 0.5 * (old + mean)
        for j in failed:
            self._latency.pop(j.name, None)

    def _collect(self, pending: dict[cf.Future, list[_Job]]) -> list[_Job]:
        """Wait for pool / thread calls; returns the calls of batched pool tasks that failed as a whole
        (ran past the time limit, lost their worker, or could not be sent), to be run again one by
        one. pebble enforces each pool task's timeout; the outer deadline only guards against the pool
        machinery itself wedging, so a batch can never hang. Thread calls bound their own time;
        `thread_timeout_s` is their backstop."""
        from pebble import ProcessExpired

        if not pending:
            return []
        pool = {f for f, js in pending.items() if js[0].mode == "pool"}
        pool_deadline = self.timeout_s * (math.ceil(len(pool) / self.workers) + 2) + self.wedge_grace_s
        t0 = time.monotonic()
        done, not_done = set(), set()
        # each kind against its own deadline from t0: a wedged pool is not held to the threads' backstop
        for futures, limit in ((pool, pool_deadline), (pending.keys() - pool, self.thread_timeout_s)):
            d, nd = cf.wait(futures, timeout=max(0.0, t0 + limit - time.monotonic()))
            done |= d
            not_done |= nd
        retry: list[_Job] = []
        for fut in done:
            batch = pending[fut]
            try:
                out = fut.result()
            except Exception as e:  # noqa: BLE001 - timeouts, dead workers, pickling errors, broken pool
                if len(batch) > 1 and batch[0].mode == "pool":
                    retry += batch
                    continue
                for job in batch:
                    if isinstance(e, cf.TimeoutError):
                        job.result, job.latency = failure("timeout"), self.timeout_s
                    elif isinstance(e, ProcessExpired):
                        job.result = failure(f"error: worker died (exit code {e.exitcode})")
                    else:
                        job.result = failure(f"error: {type(e).__name__}: {e}")
                continue
            for job, (res, seconds) in zip(batch, out):
                job.result, job.latency = res, seconds
        for fut in not_done:
            fut.cancel()
            for job in pending[fut]:
                job.result, job.latency = failure("timeout"), time.monotonic() - t0
        if any(pending[f][0].mode == "pool" for f in not_done):
            self._close_pool()  # a wedged pool is rebuilt on the next call
            self.restarts += 1
        return retry

    def _combine(self, item: int, jobs: list[_Job], weights: dict[str, float]) -> RewardResult:
        by_term = {j.term: j for j in jobs}
        main = by_term.get(CORRECTNESS)
        info: dict[str, Any] = dict(main.result.info) if main else {}
        total = 0.0
        terms: dict[str, float] = {}
        reasons: dict[str, str] = {}
        for term, w in weights.items():
            res = by_term[term].result
            assert res is not None
            terms[term] = float(res.score)
            total += w * float(res.score)
            if term != CORRECTNESS and kind(res) != "ok":
                reasons[term] = res.reason
            if term != CORRECTNESS:
                info.update({k: res.info[k] for k in TERM_INFO if k in res.info})
        if main:
            info["verifier"] = main.name
            # the verifier's own correctness where it gives one (a verl function's "acc"), else its score
            own = main.result.info.get("correctness", main.result.score)
            info["correctness"] = min(max(float(own), 0.0), 1.0)
            info["latency_s"] = main.latency
        if len(weights) > 1 or CORRECTNESS not in weights:
            info["terms"] = terms
            if reasons:
                info["term_reasons"] = reasons
        return RewardResult(total, info)


class _CorrectnessOnly:
    """A `RewardRunner` whose `score` runs the routed verifier alone (`RewardRunner.correctness_only`);
    everything else is the runner's."""

    def __init__(self, runner: RewardRunner):
        self._runner = runner

    def score(self, responses: Sequence[str], problems: Sequence[Problem], given=None):
        return self._runner.score(responses, problems, all_terms=False, given=given)

    def __getattr__(self, name: str):
        return getattr(self._runner, name)


__all__ = ["CORRECTNESS", "DEFAULT_INLINE", "RUN_MODES", "RewardRunner", "health_metrics"]
