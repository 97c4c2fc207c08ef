"""Rollout engines: turn prompts into sampled completions with the sampler's log-probabilities.

`hf` (transformers generate; CPU or one GPU) is built in; `vllm` lives in `rollout.vllm`, the only
module that imports vllm. This package file only re-exports `rollout.base` (the protocol and
`SamplingParams`); rollout does not own prompt encoding (`data.prompts`) or scoring (`rewards`).
"""

from reasonrl.rollout.base import RolloutEngine, SamplingParams

__all__ = ["RolloutEngine", "SamplingParams"]
