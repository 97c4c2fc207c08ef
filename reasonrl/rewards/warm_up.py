"""Warming verifier libraries once per process, before any call and outside every call's time limit.

Owns: `warm_up_verifiers()`, which runs the `warm_up` function of each registered verifier whose
`preload` modules this process has imported, once per process. Importing this module runs it: the
verifier pool's forkserver imports it as its last preload, so every worker, and every replacement of a
killed worker, forks with warm caches instead of building them itself. Workers started otherwise
(spawn, fork), or from a forkserver that an earlier pool started without these libraries, are not
warmed: their verifiers warm on their first calls, as before. Does not own: what a warm-up does (the
verifier's module) or which modules a pool preloads (`rewards.runner.preload_modules`).

Why: math-verify's LaTeX parser (ANTLR) builds its prediction tables lazily, on the first input of
each shape. The first chained equation a worker reads takes 0.1-0.3 s, the same answer read again
under 1 ms; every worker paid this for itself, on the first chunk it scored (measured in
docs/evaluation.md). A verifier declares `fn.warm_up = function()`; the function must be bounded (fixed
inputs) and may raise: a failure is ignored here (the verifier then warms on its first calls, as
before), since an exception in a forkserver preload would break the whole pool.
"""

from __future__ import annotations

import sys

from reasonrl.rewards.base import VERIFIERS

_warmed: set = set()  # warm-up functions run in this process (inherited by forked workers)


def warm_up_verifiers() -> list[str]:
    """Warm every verifier that declares `warm_up` and whose `preload` modules are imported here (so
    a pool that does not route to it never pays for it); returns the names warmed by this call. A
    function shared by several verifiers (math, gsm8k) runs once."""
    done = []
    for name in VERIFIERS.names():
        fn = VERIFIERS.get(name)
        warm = getattr(fn, "warm_up", None)
        if warm is None or warm in _warmed or not all(m in sys.modules for m in getattr(fn, "preload", ())):
            continue
        _warmed.add(warm)
        try:
            warm()
        except Exception:  # noqa: BLE001 - a cold verifier is slower, not wrong
            continue
        done.append(name)
    return done


warm_up_verifiers()
