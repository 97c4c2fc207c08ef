"""Rollout engines: turn prompts into sampled completions with the sampler's log-probabilities.

`hf` (transformers generate; CPU or one GPU) is built in; `vllm` lives in `rollout.vllm`, the only
module that imports vllm.
"""

from reasonrl.rollout.base import RolloutEngine, SamplingParams

__all__ = ["RolloutEngine", "SamplingParams"]
