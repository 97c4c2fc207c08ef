"""Training with the vLLM engine, run by `vllm_checks.py PATH train RUN_DIR SKIP_FROM` in a child process
(on the model `vllm_checks.build` writes): the sampler-vs-trainer gap the trainer logs each step, with the
engine's weight syncs skipped from a given policy version on (a sync that silently does nothing)."""

from __future__ import annotations


def train_gaps(path: str, run_dir: str, skip_from: int) -> list[dict]:
    """3 training steps with rollout.engine=vllm (the entropy bonus moves a random policy); per step the
    logged sampler-vs-trainer gap and policy version. From policy version `skip_from` on, the engine
    receives no updates (a sync that silently does nothing)."""
    from reasonrl.config import load_config
    from reasonrl.rollout.vllm import VLLMRolloutEngine
    from reasonrl.trainer.loop import train

    real_sync = VLLMRolloutEngine.sync_weights

    def sync_until(self, model, version=None):
        if version is None or version < skip_from:
            real_sync(self, model, version)

    VLLMRolloutEngine.sync_weights = sync_until
    cfg = load_config(None, [
        f"model.path={path}", "model.device=cpu", f"log.run_dir={run_dir}", "train.steps=3",
        "train.global_batch=16", "rollout.n=4", "train.mini_batch=16", "train.micro_batch=8",
        "train.lr=3e-3", "algo.entropy_coef=0.05", "rollout.max_new_tokens=12", "data.train_size=64",
        "val.size=4", "val.n=1", "log.progress=false", "log.tensorboard=false", "checkpoint.every=0",
        "rollout.engine=vllm", "rollout.engine_kwargs={kv_cache_gb: 0.25}",
    ])  # fmt: skip
    hist = train(cfg, log=lambda *a: None)["history"][1:]
    keys = ("rollout/logprob_gap_mean", "rollout/logprob_gap_max", "rollout/policy_version")
    return [{k: row.get(k) for k in keys} for row in hist]
