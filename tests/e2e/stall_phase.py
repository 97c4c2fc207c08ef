"""A test plugin: stall the phase named by REASONRL_TEST_STALL (generation, reward, sync, update,
checkpoint, validation) at step 2 by sleeping in the function that does that phase's work; the
watchdog must catch it."""

from __future__ import annotations

import os
import time

TARGET = os.environ.get("REASONRL_TEST_STALL")


def _stalling(fn):
    def wrapper(*args, **kwargs):
        from reasonrl.trainer import watchdog

        cur = watchdog._ACTIVE[-1].current if watchdog._ACTIVE else None
        if cur is not None and cur[0] == TARGET and cur[1] == 2:
            time.sleep(600)
        return fn(*args, **kwargs)

    return wrapper


if TARGET:
    import reasonrl.engines.single as single
    import reasonrl.rewards.runner as runner
    import reasonrl.rollout.hf as hf
    import reasonrl.trainer.loop as loop
    import reasonrl.trainer.state as state

    targets = {
        "generation": (hf.HFRolloutEngine, "generate"),
        "reward": (runner.RewardRunner, "score"),
        "sync": (hf.HFRolloutEngine, "sync_weights"),
        "update": (single.SingleDeviceEngine, "train_step"),
        "checkpoint": (state, "save_checkpoint"),
        "validation": (loop, "validate_policy"),
    }
    owner, name = targets[TARGET]
    setattr(owner, name, _stalling(getattr(owner, name)))
