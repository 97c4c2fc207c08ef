"""Plugin for tests/unit/test_rollout_vllm.py: rank 1's vLLM engine silently loads nothing when weights
are pushed (it still takes part in gathering them, so the ranks stay in lock-step, and reports a sync
as usual). Not part of the library."""

import os

if os.environ.get("RANK") == "1":
    from reasonrl.rollout.vllm import VLLMRolloutEngine

    def _load_nothing(self, groups, version=None):
        for _ in groups:  # the FSDP2 gathers every rank must join
            pass
        self.version = self.version + 1 if version is None else version
        self.last_sync = {"perf/weight_sync_seconds": 0.0, "perf/weight_sync_mb": 0.0,
                          "rollout/engine_policy_version": float(self.version)}  # fmt: skip
        return self.last_sync

    VLLMRolloutEngine.update_weights = _load_nothing
