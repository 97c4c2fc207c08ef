"""A plugin (recipe key `plugins`) registering rollout engines that fail on purpose, to test how the
trainer handles a rollout worker that raises, dies or hangs. Imported in the worker process too."""

from __future__ import annotations

import multiprocessing
import os
import time

from reasonrl.rollout.factory import ROLLOUT_ENGINES
from reasonrl.rollout.hf import HFRolloutEngine


class _Faulty(HFRolloutEngine):
    def __init__(self, model, tokenizer, fail_at: int, how: str):
        if fail_at == 0 and multiprocessing.current_process().name == "reasonrl-rollout-worker":
            raise RuntimeError("planted start-up failure")  # the worker's engine cannot be built
        super().__init__(model, tokenizer)
        self.calls, self.fail_at, self.how = 0, fail_at, how

    def generate(self, prompts, params):
        self.calls += 1
        if self.calls == self.fail_at:
            if self.how == "raise":
                raise RuntimeError("planted generation failure")
            if self.how == "die":
                os._exit(3)
            time.sleep(3600)  # hang
        return super().generate(prompts, params)


@ROLLOUT_ENGINES.register("faulty")
def faulty(model, tokenizer, fail_at: int = 3, how: str = "raise"):
    """HF engine whose `fail_at`-th generate call raises, exits the process or hangs (`how`); with
    `fail_at` 0 building it in the rollout worker raises (the trainer's own engine builds)."""
    return _Faulty(model, tokenizer, fail_at, how)
