"""A test plugin: on rank 1 of a torchrun launch, the first step's batch shaping hangs for HANG_S seconds
(a stuck rank, for longer than the test's collective timeout); elsewhere it does nothing. The hang ends
on its own so that the test does not wait out torchrun's 30 s grace before it kills a rank that defers
its SIGTERM (a rank hung for good is killed then; docs/distributed.md)."""

from __future__ import annotations

import os
import time

HANG_S = 20.0

if os.environ.get("RANK") == "1":
    import reasonrl.trainer.loop as loop

    _shape = loop.shape_batch

    def _stuck(*args, **kwargs):
        time.sleep(HANG_S)
        return _shape(*args, **kwargs)

    loop.shape_batch = _stuck
