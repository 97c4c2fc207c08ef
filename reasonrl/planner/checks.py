"""The pre-flight plan of a run: batch arithmetic, the memory estimate, and the mistakes it can see
before anything starts. `reasonrl plan` prints it; `reasonrl train` runs the same checks (errors stop
it, warnings are logged) with the real longest prompt once the data is loaded.

Owns: `make_plan(cfg, ...)` -> `Plan` (batch figures per step and per rank, memory terms, findings);
each `Finding` names the config key to change. Does not own: the arithmetic of memory
(`planner.memory`) or type / range checks of single keys (`config.checks`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from reasonrl.config import RunConfig
from reasonrl.planner.memory import Settings, estimate
from reasonrl.planner.shape import ModelShape, hf_config, model_shape

GIB = 2**30


@dataclass
class Finding:
    level: str  # "error": the run cannot work as configured; "warn": it works but wastes or risks something
    key: str  # the config key to change
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.key}: {self.message}"


@dataclass
class Plan:
    shape: ModelShape
    batch: dict[str, int]
    memory: dict[str, float]
    device: str
    device_memory: float | None  # bytes available per device, None when unknown
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]


GPU_MARGIN = 0.9  # warn above this share of a GPU's memory: peaks reached 1.02x the estimate there, and
# the allocator's fragmentation and kernel workspaces are not in the estimate at all


def device_memory(device: str) -> tuple[str, float | None]:
    """(device kind, bytes of memory per device): CUDA's total memory, or this machine's RAM on CPU;
    a run configured for CUDA is planned as one (fused attention) even where no GPU is present."""
    import torch

    if device in ("auto", "cuda") and torch.cuda.is_available():
        return "cuda", float(torch.cuda.get_device_properties(0).total_memory)
    if device == "cuda":  # planning a GPU run on a machine without one: give --device-memory
        return "cuda", None
    try:
        return "cpu", float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return "cpu", None


def micro_rows(cfg: RunConfig, seq: int) -> int:
    """Rows in a micro-batch of `seq`-token rows: train.micro_batch, or with train.micro_tokens as many
    as fit (a longer row alone), at most train.micro_batch."""
    t = cfg.train
    return min(t.micro_batch, max(1, t.micro_tokens // seq)) if t.micro_tokens else t.micro_batch


def batch_figures(cfg: RunConfig, world: int, prompt_tokens: int) -> dict[str, int]:
    """prompt_tokens: the longest prompt (`make_plan` passes the measured one or the worst case)."""
    t, r = cfg.train, cfg.rollout
    seq = prompt_tokens + r.max_new_tokens
    mini_rank = t.mini_batch // world
    return {
        "prompts_per_step": t.global_batch // r.n,
        "sequences_per_step": t.global_batch,
        "max_tokens_per_step": t.global_batch * seq,
        "sequences_per_rank": t.global_batch // world,
        "optimizer_steps_per_rollout_batch": t.epochs * (t.global_batch // t.mini_batch),
        "mini_batch_per_rank": mini_rank,
        # at most, with train.micro_tokens (every row of the longest length)
        "micro_batches_per_optimizer_step_per_rank": max(-(-mini_rank // micro_rows(cfg, seq)), 1),
        "world_size": world,
    }


def make_plan(cfg: RunConfig, world: int | None = None, memory_bytes: float | None = None,
              prompt_tokens: int | None = None, shape: ModelShape | None = None) -> Plan:  # fmt: skip
    """prompt_tokens: the longest prompt (default: data.max_prompt_tokens, the worst case).
    memory_bytes: per-device memory to check against (default: this machine's device)."""
    from reasonrl import distributed as dist
    from reasonrl.rollout.factory import memory_share

    world = world or dist.world_size()
    m, t, r = cfg.model, cfg.train, cfg.rollout
    shape = shape or model_shape(m.path, m.lora.rank, list(m.lora.target_modules))
    kind, detected = device_memory(m.device)
    mem = memory_bytes if memory_bytes is not None else detected
    prompt = prompt_tokens if prompt_tokens is not None else cfg.data.max_prompt_tokens
    sharded = dist.train_engine_kind(t.engine, world) == "fsdp2"
    engine_kw = dict(r.engine_kwargs)
    s = Settings(
        dtype=m.dtype, seq_tokens=prompt + r.max_new_tokens, micro_batch=micro_rows(cfg, prompt + r.max_new_tokens),
        completion_tokens=r.max_new_tokens, gradient_checkpointing=m.gradient_checkpointing,
        logprob_chunk=m.logprob_chunk, pack_tokens=m.pack_tokens, world=world,
        sharded=sharded, cpu_offload=t.cpu_offload and sharded, reference=cfg.algo.kl.coef > 0,
        critic=_needs_critic(cfg), generation_rows=min(int(engine_kw.get("max_batch", 512)), t.global_batch // world),
        engine_memory_share=memory_share(r.engine, engine_kw) if kind == "cuda" else 0.0,
    )  # fmt: skip
    s.reward_model_bytes, unread = reward_model_bytes(cfg, kind)
    plan = Plan(shape, batch_figures(cfg, world, prompt), estimate(shape, s), kind, mem)
    plan.findings = _findings(cfg, plan, s, prompt, prompt_tokens is not None) + unread
    return plan


def cpu_computes(dtype: str) -> bool:
    """Whether this CPU has instructions for `dtype` ("bfloat16", "float16") matrix products (oneDNN's
    check; True where torch cannot say)."""
    import torch

    check = {"bfloat16": "_is_mkldnn_bf16_supported", "float16": "_is_mkldnn_fp16_supported"}[dtype]
    try:
        return bool(getattr(torch.ops.mkldnn, check)())
    except (AttributeError, RuntimeError):
        return True


def rank_split(cfg: RunConfig, world: int) -> tuple[str, str] | None:
    """(key, message) where the batches do not divide over `world` ranks (what a torchrun launch of that
    many refuses, `trainer.setup.check_parallel`), else None."""
    t, prompts = cfg.train, cfg.train.global_batch // cfg.rollout.n
    if world > 1 and (prompts % world or t.mini_batch % world):
        return ("train.global_batch", f"train.global_batch / rollout.n = {prompts} prompts and train.mini_batch = "
                f"{t.mini_batch} must both divide evenly over {world} ranks")  # fmt: skip
    return None


def _cpu_capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


def reward_model_bytes(cfg: RunConfig, kind: str) -> tuple[float, list[Finding]]:
    """Bytes of the reward model's weights on the training device (a `reward_model` term in reward.weights,
    on the device kind the policy trains on), and a warning where its config cannot be read here."""
    if "reward_model" not in cfg.reward.weights:
        return 0.0, []
    opts = dict(cfg.reward.options.get("reward_model") or {})
    device = str(opts.get("device", "auto"))
    if (device == "cpu") != (kind != "cuda"):  # on the other kind of device: not in this budget
        return 0.0, []
    dtype = str(opts.get("dtype", "auto"))
    dtype = ("bfloat16" if kind == "cuda" else "float32") if dtype == "auto" else dtype
    import torch
    from transformers import AutoModelForSequenceClassification

    try:
        config = hf_config(str(opts.get("path", "")))
        with torch.device("meta"):
            params = sum(
                p.numel() for p in AutoModelForSequenceClassification.from_config(config).parameters()
            )
    except Exception as e:  # noqa: BLE001 - a plan still reports the rest
        return 0.0, [Finding("warn", "reward.options.reward_model.path", f"the reward model's weights are not "
                             f"counted: {str(e).splitlines()[0].split(': ', 1)[-1][:200]}")]  # fmt: skip
    return params * getattr(torch, dtype).itemsize, []


def _needs_critic(cfg: RunConfig) -> bool:
    from reasonrl.algorithms import ADVANTAGES

    return "values" in ADVANTAGES.get(cfg.algo.adv_estimator).needs


def _findings(cfg: RunConfig, plan: Plan, s: Settings, prompt: int, measured_prompt: bool) -> list[Finding]:
    out: list[Finding] = []
    t, r, sh, mem = cfg.train, cfg.rollout, plan.shape, plan.memory
    ctx = sh.context
    if ctx and r.max_new_tokens >= ctx:
        out.append(Finding("error", "rollout.max_new_tokens", f"{r.max_new_tokens} tokens is the model's whole "
                           f"context (max_position_embeddings {ctx}) or more"))  # fmt: skip
    elif ctx and prompt + r.max_new_tokens > ctx:
        what = "the longest prompt" if measured_prompt else "data.max_prompt_tokens"
        out.append(Finding("error" if measured_prompt else "warn", "rollout.max_new_tokens",
                           f"{what} ({prompt}) + rollout.max_new_tokens ({r.max_new_tokens}) = {prompt + r.max_new_tokens} "
                           f"exceeds the model's context (max_position_embeddings {ctx})"))  # fmt: skip
    prompts = t.global_batch // r.n
    if prompts < plan.batch["world_size"]:
        out.append(Finding("error", "train.global_batch", f"{prompts} prompts per step (train.global_batch / "
                           f"rollout.n) for {plan.batch['world_size']} ranks: some ranks would get no group"))  # fmt: skip
    elif (split := rank_split(cfg, plan.batch["world_size"])) is not None:
        out.append(Finding("error", *split))
    elif prompts < 4:
        out.append(Finding("warn", "rollout.n", f"only {prompts} prompt(s) per step (train.global_batch="
                           f"{t.global_batch} / rollout.n={r.n}): each update sees very few problems; raise "
                           "train.global_batch or lower rollout.n"))  # fmt: skip
    if t.mini_batch % r.n and t.mini_batch < t.global_batch:
        out.append(Finding("warn", "train.mini_batch", f"{t.mini_batch} is not a multiple of rollout.n={r.n}: "
                           "groups are split across optimizer steps"))  # fmt: skip
    if plan.device_memory:
        avail, gib = plan.device_memory, lambda x: f"{x / GIB:.2f} GiB"
        if s.engine_memory_share:
            avail *= max(
                1.0 - s.engine_memory_share, 0.0
            )  # what a colocated rollout engine (vLLM) leaves for training
        hint = "" if s.gradient_checkpointing else "; or set model.gradient_checkpointing=true"
        hint += (
            ""
            if s.logprob_chunk or mem["logits"] < 0.2 * mem["training_peak"]
            else "; or set model.logprob_chunk"
        )
        if mem["training_peak"] > avail:
            out.append(Finding("error", "train.micro_batch", f"{t.micro_batch} sequences of {s.seq_tokens} tokens need "
                               f"an estimated {gib(mem['training_peak'])} per device, more than the {gib(avail)} "
                               f"available: lower train.micro_batch{hint}"))  # fmt: skip
        elif plan.device == "cuda" and mem["training_peak"] > GPU_MARGIN * avail:
            # measured on an H100 (docs/operations.md): peaks 0.68-1.02x the estimate at 2k-8k tokens
            out.append(Finding("warn", "train.micro_batch", f"{t.micro_batch} sequences of {s.seq_tokens} tokens need "
                               f"an estimated {gib(mem['training_peak'])} of the {gib(avail)} available; measured GPU "
                               f"peaks reached 1.02x the estimate: lower train.micro_batch{hint} to keep a margin"))  # fmt: skip
        elif plan.device == "cuda" and t.micro_batch < plan.batch["mini_batch_per_rank"] \
                and mem["training_peak"] < 0.25 * avail:  # fmt: skip
            out.append(Finding("warn", "train.micro_batch", f"{t.micro_batch} uses an estimated "
                               f"{gib(mem['training_peak'])} of {gib(avail)}: a larger micro-batch would be faster"))  # fmt: skip
        if mem["generation_peak"] > avail:
            out.append(Finding("error", "rollout.engine_kwargs.max_batch", f"generating {s.generation_rows} rows "
                               f"at once needs an estimated {gib(mem['generation_peak'])} (KV cache "
                               f"{gib(mem['kv_cache'])}), more than {gib(avail)}: set rollout.engine_kwargs.max_batch lower"))  # fmt: skip
    if (
        plan.device == "cpu"
        and cfg.model.dtype in ("bfloat16", "float16")
        and not cpu_computes(cfg.model.dtype)
    ):
        out.append(Finding("warn", "model.dtype", f"{cfg.model.dtype} on a CPU without {cfg.model.dtype} instructions "
                           f"(this one: {_cpu_capability()}): its matrix products run emulated, 8-100x slower than "
                           "float32 ones on such a CPU (a bfloat16 training step measured 17x slower); "
                           "model.dtype=float32 trains faster here"))  # fmt: skip
    if not s.logprob_chunk and mem["logits"] > 0.3 * mem["training_peak"] \
            and mem["logits"] > GIB:  # fmt: skip
        out.append(Finding("warn", "model.logprob_chunk", f"the logits [B, T, V] take an estimated "
                           f"{mem['logits'] / GIB:.2f} GiB of the step's peak; model.logprob_chunk=256 avoids them"))  # fmt: skip
    return out
