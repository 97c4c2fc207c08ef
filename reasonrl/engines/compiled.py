"""`model.compile: true`: the policy's decoder layers compiled with torch.compile for training.

Owns: compiling each decoder layer in place (`nn.Module.compile`, so parameter names, state dicts,
checkpoints and weight sync are unchanged; one compiled function shared by every layer of the same
class), with dynamic shapes (RL micro-batches change length every step, and a recompilation per
length would cost more than it saves), the check that a CPU has the C++ compiler inductor needs, and
`eager()`: the context under which generation runs the same layers uncompiled (the HF rollout engine
decodes one position at a time against a growing KV cache: other shapes, other graphs, no gain).
Per-layer compilation is what torchtitan does: the norms, rotary embedding, SiLU and residual adds fuse
into a few kernels, which is where small models lose time on a GPU.
Does not own: which model is compiled (`trainer.setup`), the forward itself (`engines.single`).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

import torch

from reasonrl.models.loading import unwrapped


def cpp_compiler() -> str | None:
    """The C++ compiler inductor would use on a CPU ($CXX, else g++ / c++ / clang++ on PATH)."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compile_decoder_layers(model) -> int:
    """Compiles every decoder layer in place; returns how many."""
    from reasonrl.engines.fsdp2 import decoder_layers

    inner = unwrapped(model)
    layers = decoder_layers(inner)
    for layer in layers:
        layer.compile(dynamic=True)
    return len(layers)


def naming_compile_failures(forward):
    """`forward`, with a failure of torch.compile inside it (dynamo or inductor: it compiles the layers on
    their first training forward) raised as a ConfigError naming `model.compile`: Mamba's and Jamba's
    layers fail that way under torch 2.13 with dynamic shapes, in a trace of compiler internals."""
    import functools

    from torch._dynamo.exc import TorchDynamoException  # inductor's errors derive from it too

    @functools.wraps(forward)
    def run(*args, **kwargs):
        try:
            return forward(*args, **kwargs)
        except TorchDynamoException as e:
            from reasonrl.config import ConfigError

            inner = getattr(e, "inner_exception", None) or e  # the compiler's own error, not dynamo's wrapper
            first = next((line.strip() for line in str(inner).splitlines() if line.strip()), "")
            raise ConfigError(f"model.compile: torch.compile failed on this model's decoder layers "
                              f"({type(inner).__name__}: {first}); set model.compile=false") from e  # fmt: skip

    return run


def compiled_modules(model) -> list[torch.nn.Module]:
    return [m for m in model.modules() if getattr(m, "_compiled_call_impl", None) is not None]


def is_compiled(model) -> bool:
    return bool(compiled_modules(model))


@contextmanager
def eager(model):
    """Inside the block the compiled layers of `model` run their plain eager forward: `Module.compile`
    keeps the compiled callable beside the module's own, and it is set aside meanwhile (no dynamo frame
    at all: `torch.compiler.set_stance("force_eager")` would still pass through it, 3-5% slower here)."""
    saved = [] if model is None else [(m, m._compiled_call_impl) for m in compiled_modules(model)]
    for m, _ in saved:
        m._compiled_call_impl = None
    try:
        yield
    finally:
        for m, fn in saved:
            m._compiled_call_impl = fn
