"""The network services routed problems' verifiers call (an LLM judge's endpoint, SandboxFusion servers),
reached and tried before any work.

Owns: `endpoints(problems, options)`, every service URL the verifiers of `problems` will call with
`options` (a verifier declares its own: `fn.services(options, problems) -> {url: what sets it}`), and
`check_services(...)`, which waits until each one accepts a connection or `wait_s` passes, then tries
each with a test call (a verifier's `fn.probe(options, problems) -> [lines]`, ValueError naming what is
wrong: the judge grades a right and a wrong answer, the code sandbox (local, or each SandboxFusion
server) runs two programs), and raises
one InputError naming the service, its URL, where the URL comes from and why it failed. Without it a
judge URL with a typo, a wrong API key or model name, or a sandbox server that is not up, cost loading
the model and a whole step of rollouts (minutes on a large model), and then scored every answer 0 as a
verifier error until `reward.max_error_rate` stopped the run; a judge that gives no verdict line scored
every answer 0 with no error at all. A service may still be starting when the run does (a judge model
loading beside it): the wait covers that, and says it is waiting.
`prepare_terms(weights, options)` loads what a reward term holds (a reward model) before any work.
Does not own: the connection probe (`network.wait_for`: a TCP connection to the URL's host and port, or
its proxy's) or what each verifier sends (`rewards.verifiers.judge`, `rewards.verifiers.code`).
"""

from __future__ import annotations

from reasonrl.errors import InputError
from reasonrl.types import Problem

SERVICE_WAIT_S = 60.0  # the default wait for a service that does not answer yet
WAIT_ENV = "REASONRL_SERVICE_WAIT_S"  # the wait of `reasonrl eval` / `data passrate` (a run's: its config)


def _seams(problems: list[Problem], options: dict | None, seam: str):
    """(the verifier's `seam` function, its options, the problems routed to it) for each verifier of
    `problems` that has one."""
    from reasonrl.rewards import VERIFIERS
    from reasonrl.rewards.routing import verifier_name

    options = options or {}
    by_verifier: dict[str, list[Problem]] = {}
    for p in problems:
        by_verifier.setdefault(verifier_name(p), []).append(p)
    for name, routed in by_verifier.items():
        fn = getattr(VERIFIERS.get(name), seam, None)
        if fn is not None:
            yield fn, dict(options.get(name) or {}), routed


def endpoints(problems: list[Problem], options: dict | None = None) -> dict[str, str]:
    """{url: what sets it} over the verifiers `problems` route to (each asked once, with its options)."""
    out: dict[str, str] = {}
    for declared, opts, routed in _seams(problems, options, "services"):
        for url, what in declared(opts, routed).items():
            out.setdefault(url, what)
    return out


def check_services(problems: list[Problem], options: dict | None = None, wait_s: float | None = None,
                   log=print, setting: str = "reward.service_wait_s") -> None:  # fmt: skip
    """InputError unless every service the problems' verifiers call accepts a connection within `wait_s`
    seconds (None: env REASONRL_SERVICE_WAIT_S, else 60) (one line each while waiting; `setting` names
    what sets the wait) and then passes its verifier's test call (one line each when it does)."""
    import os

    from reasonrl.network import wait_for

    if wait_s is None:
        setting, raw = WAIT_ENV, os.environ.get(WAIT_ENV, "")
        try:
            wait_s = float(raw) if raw else SERVICE_WAIT_S
        except ValueError:
            raise InputError(f"{WAIT_ENV} must be a number of seconds, got {raw!r}") from None
        if not wait_s >= 0:
            raise InputError(f"{WAIT_ENV} must be >= 0, got {raw!r}")
    for url, what in endpoints(problems, options).items():
        reason = wait_for(url, wait_s, lambda r, u=url, w=what: log(
            f"waiting up to {wait_s:g} s for {w} at {u} to accept connections ({r}; {setting} sets the wait)"))  # fmt: skip
        if reason is not None:
            raise InputError(f"{what} at {url} cannot be reached ({reason}, for {wait_s:g} s): start it or fix "
                             f"its URL; nothing was generated or scored")  # fmt: skip
    tried: list[tuple] = []
    for probe, opts, routed in _seams(problems, options, "probe"):
        if (probe, opts) in tried:  # one backend behind two verifiers (code, cruxeval): tried once
            continue
        tried.append((probe, opts))
        try:
            for line in probe(opts, routed):
                log(line)
        except ValueError as e:
            raise InputError(f"{e}; nothing was generated or scored") from None


def prepare_terms(weights: dict[str, float], options: dict | None = None, keep: bool = True) -> list[str]:
    """Load what the reward terms of `weights` hold (a reward model: `fn.prepare(options) -> line`) before
    any work, so that a checkpoint that cannot serve stops the run before the policy loads and the first
    step generates, not at its first scoring (then every row an error until reward.error_patience). One
    line each; ValueError is an InputError naming the term. `keep=False`: loaded to check, then let go
    (`fn.release()`): another process scores (the asynchronous rollout worker loads its own copy)."""
    from reasonrl.rewards import VERIFIERS

    lines = []
    for term in weights:
        fn = VERIFIERS.get(term) if term in VERIFIERS else None
        prepare = getattr(fn, "prepare", None)
        if prepare is not None:
            try:
                lines.append(prepare(dict((options or {}).get(term) or {})))
            except ValueError as e:
                raise InputError(f"reward.weights.{term}: {e}; nothing was generated or scored") from None
            if not keep and (release := getattr(fn, "release", None)) is not None:
                release()
                lines[-1] += "; checked here and let go: the rollout worker scores with its own copy"
    return lines


__all__ = ["SERVICE_WAIT_S", "WAIT_ENV", "check_services", "endpoints", "prepare_terms"]
