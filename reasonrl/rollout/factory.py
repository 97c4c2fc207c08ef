"""Choosing and building the rollout engine: the registry `ROLLOUT_ENGINES` (a real seam).

Owns: one builder per engine name, `(model, tokenizer, **settings) -> RolloutEngine`, with that
engine's settings as keyword options (checked against the builder's signature when the config loads,
from `rollout.engine_kwargs`), and `build_rollout_engine`. Builders import their engine module lazily,
so the registry (and config validation) stays free of torch / vllm. Does not own: the engines
(`rollout.hf`, later `rollout.vllm`) or the protocol they implement (`rollout.base.RolloutEngine`).
"""

from __future__ import annotations

from typing import Any

from reasonrl.registry import Registry

ROLLOUT_ENGINES: Registry = Registry("rollout engine", positional=2)


@ROLLOUT_ENGINES.register("hf")
def hf(model, tokenizer, max_batch: int = 512):
    """Hugging Face `generate` on the policy itself (shares its weights; CPU or GPU).

    max_batch: rows (prompts x n) per `generate` call."""
    from reasonrl.rollout.hf import HFRolloutEngine

    return HFRolloutEngine(model, tokenizer, max_batch=max_batch)


def build_rollout_engine(name: str, model, tokenizer, settings: dict[str, Any] | None = None):
    """The engine `name` for `model`, with its settings (e.g. `rollout.engine_kwargs`)."""
    return ROLLOUT_ENGINES.get(name)(model, tokenizer, **dict(settings or {}))
