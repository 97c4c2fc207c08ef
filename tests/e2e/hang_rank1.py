"""A test plugin: on rank 1 of a torchrun launch, the first step's batch shaping hangs (a stuck rank);
elsewhere it does nothing."""

from __future__ import annotations

import os
import time

if os.environ.get("RANK") == "1":
    import reasonrl.trainer.loop as loop

    _shape = loop.shape_batch

    def _stuck(*args, **kwargs):
        time.sleep(600)
        return _shape(*args, **kwargs)

    loop.shape_batch = _stuck
