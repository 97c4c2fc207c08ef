"""Plugin for tests/unit/test_rollout_vllm.py: from policy version SKIP_FROM on, rank 1's vLLM engine
silently loads nothing when weights are pushed (it still takes part in gathering them, so the ranks
stay in lock-step, and reports a sync as usual). Earlier versions sync for real, so one run shows both:
step 2 samples a synced policy (version 1), step 3 a stale one. Not part of the library."""

import os

SKIP_FROM = 2

if os.environ.get("RANK") == "1":
    from reasonrl.rollout.vllm import VLLMRolloutEngine

    _update = VLLMRolloutEngine.update_weights

    def _load_nothing(self, groups, version=None):
        if version is None or version < SKIP_FROM:
            return _update(self, groups, version)
        for _ in groups:  # the FSDP2 gathers every rank must join
            pass
        self.version = version
        self.last_sync = {"perf/weight_sync_seconds": 0.0, "perf/weight_sync_mb": 0.0,
                          "rollout/engine_policy_version": float(self.version)}  # fmt: skip
        return self.last_sync

    VLLMRolloutEngine.update_weights = _load_nothing
