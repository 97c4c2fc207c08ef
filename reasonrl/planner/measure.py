"""Measured peak memory of one real training micro-batch (`reasonrl plan --measure`), to set beside the
estimate: the configured architecture with random weights (nothing downloaded but its config), the
single-device engine's own `train_step` with the configured loss, on the configured device.

Owns: building that step and measuring it: on CUDA `torch.cuda.max_memory_allocated`; on CPU (no
allocator statistics) `LivePeak`, a dispatch mode that counts the bytes of every live tensor storage
(released through weak references) on top of the parameters, optimizer state and batch already there.
torch's own MemTracker does the same accounting but refuses a module called twice in one step (the
chunked logits head, recomputed checkpointed layers). The optimizer state is created by a first step
outside the measurement, as it is by every step after the first in a run. On a CPU, half-precision
matrix products run in fp32 inside the dispatch (`_Fp32Products`; same result tensors, none of the
fp32 temporaries counted): CPUs without bf16 instructions take seconds per product (15x more in some
layouts), and the peak is about which tensors live, not how they are computed.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from reasonrl.config import RunConfig
from reasonrl.types import TrainBatch

_PRODUCTS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
             torch.ops.aten.baddbmm.default}  # fmt: skip
_HALF = (torch.bfloat16, torch.float16)


class _Fp32Products(TorchDispatchMode):
    """While active, a CPU matrix product of half-precision tensors is computed in fp32 and cast back
    to its dtype (a tensor of the same dtype and shape as the op's own); every other op runs as is."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        half = [
            a for a in args if isinstance(a, torch.Tensor) and a.dtype in _HALF and a.device.type == "cpu"
        ]
        if func not in _PRODUCTS or not half:
            return func(*args, **kwargs)
        up = [a.float() if isinstance(a, torch.Tensor) and a.dtype in _HALF else a for a in args]
        return func(*up, **kwargs).to(half[0].dtype)


class LivePeak(_Fp32Products):
    """Peak bytes of live CPU tensor storages while active; `hold(tensors)` counts existing ones.
    Half-precision matrix products run in fp32 inside (`_Fp32Products`), their temporaries uncounted."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = self.peak = 0

    def _add(self, st, release: bool) -> None:
        key = id(st)
        if key in self.live or not st.nbytes():
            return
        self.live[key] = st.nbytes()
        self.current += st.nbytes()
        self.peak = max(self.peak, self.current)
        if release:
            weakref.finalize(st, self._free, key)

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def hold(self, tensors) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self._add(t.untyped_storage(), release=False)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                self._add(t.untyped_storage(), release=True)
        return out


def _model(cfg: RunConfig, device: str):
    from reasonrl.models.loading import attention_kwargs, causal_lm_class, lean_attention, torch_dtype
    from reasonrl.planner.shape import hf_config

    dtype = torch_dtype(cfg.model.dtype)
    torch.manual_seed(0)
    config = hf_config(cfg.model.path)
    model = (
        causal_lm_class(config).from_config(config, **attention_kwargs(config)).to(device=device, dtype=dtype)
    )
    lean_attention(model)  # the attention training loads it with (`load_policy`)
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if cfg.model.lora.rank > 0:
        from reasonrl.trainer.setup import add_lora

        model = add_lora(model, cfg.model.lora)
    return model


def _batch(rows: int, prompt: int, completion: int, vocab: int, device: str) -> TrainBatch:
    """Random tokens at the full length; every other row's prompt starts a few positions later (left
    padding), so a padding mask reaches attention as in every real RL batch."""
    g = torch.Generator().manual_seed(0)
    attn = torch.ones(rows, prompt + completion, dtype=torch.long)
    attn[1::2, : min(4, prompt - 1)] = 0
    return TrainBatch(
        input_ids=torch.randint(0, vocab, (rows, prompt + completion), generator=g).to(device),
        attention_mask=attn.to(device),
        mask=torch.ones(rows, completion, dtype=torch.bool, device=device),
        prompt_len=prompt,
        advantages=torch.randn(rows, completion, generator=g).to(device),
        old_logprobs=None,
        rewards=torch.zeros(rows, device=device),
        lengths=torch.full((rows,), completion, device=device),
        truncated=torch.zeros(rows, dtype=torch.bool, device=device),
    )


def measure_train_step(cfg: RunConfig, prompt_tokens: int, device: str = "cpu") -> dict[str, float]:
    """Peak bytes of one micro-batch train step (rows = train.micro_batch, prompt_tokens + max_new_tokens
    long): {"peak": bytes}."""
    import functools

    from reasonrl.engines.single import SingleDeviceEngine, training_forward
    from reasonrl.trainer.step import make_loss_fn

    model = _model(cfg, device)
    if cfg.model.pack_tokens > 0:  # as trainer.setup: a model that attends in code of its own packs under
        from reasonrl.engines.packing import check_packing  # a block mask; one that cannot pack is named

        check_packing(model)
    forward = training_forward(cfg.model, cfg.rollout.temperature)  # as trainer.setup picks it
    engine = SingleDeviceEngine(model, lr=1e-6, bf16=cfg.model.dtype == "bfloat16", forward=forward)
    rows, tc = cfg.train.micro_batch, cfg.rollout.max_new_tokens
    batch = _batch(rows, prompt_tokens, tc, model.config.vocab_size, device)
    tokens = torch.tensor(float(rows * tc))
    loss_fn = make_loss_fn(cfg.algo, tokens, torch.tensor(float(rows)), tc)
    step = functools.partial(engine.train_step, entropy_grad=cfg.algo.entropy_coef > 0)  # as the trainer does
    if device.startswith("cuda"):
        step(batch, loss_fn, rows)  # creates the optimizer state, as a run's first step does
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step(batch, loss_fn, rows)
        torch.cuda.synchronize()
        return {"peak": float(torch.cuda.max_memory_allocated())}
    with _Fp32Products():
        step(batch, loss_fn, rows)  # creates the optimizer state, as a run's first step does
    probe = LivePeak()
    state = [v for st in engine.optimizer.state.values() for v in st.values()]
    fields = [getattr(batch, k) for k in batch.__dataclass_fields__]
    probe.hold([*model.parameters(), *model.buffers(), *state, *fields])
    with probe:
        step(batch, loss_fn, rows)
    return {"peak": float(probe.peak)}
