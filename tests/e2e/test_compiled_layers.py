"""`model.compile: true`: decoder layers compiled for training. A 3-step run equals the eager run (the
same rewards, losses and gradient norms to float tolerance, and the same trained weights), the
compiled graphs are really used in training, generation never compiles anything (it runs the layers
eagerly), and a CPU without a C++ compiler is refused before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reasonrl.config import ConfigError, load_config
from reasonrl.engines.compiled import cpp_compiler
from reasonrl.trainer.loop import train

needs_cc = pytest.mark.skipif(cpp_compiler() is None, reason="torch.compile on CPU needs a C++ compiler")


def _cfg(model_dir, run_dir, *extra):
    return load_config(None, [
        f"model.path={model_dir}", "model.device=cpu", f"log.run_dir={run_dir}", "train.steps=3",
        "train.global_batch=16", "rollout.n=4", "train.mini_batch=16", "train.micro_batch=8",
        "train.lr=1e-3", "algo.entropy_coef=0.01", "rollout.max_new_tokens=12", "data.train_size=64",
        "val.size=8", "val.n=1", "log.progress=false", "log.tensorboard=false", "checkpoint.every=3",
        *extra,
    ])  # fmt: skip


@needs_cc
def test_compiled_training_equals_eager_and_generation_stays_eager(tiny_model_dir, tmp_path, monkeypatch):
    from torch._dynamo.utils import counters

    from reasonrl.rollout.hf import HFRolloutEngine

    graphs = {"generate": 0}
    real = HFRolloutEngine._generate_chunk

    def counting(self, *a, **k):  # graphs compiled while generating (there must be none)
        before = counters["stats"]["unique_graphs"]
        out = real(self, *a, **k)
        graphs["generate"] += counters["stats"]["unique_graphs"] - before
        return out

    monkeypatch.setattr(HFRolloutEngine, "_generate_chunk", counting)
    torch._dynamo.reset()
    counters.clear()
    eager = train(_cfg(tiny_model_dir, tmp_path / "eager"), log=lambda *a, **k: None)
    assert counters["stats"]["unique_graphs"] == 0
    lines: list[str] = []
    compiled = train(_cfg(tiny_model_dir, tmp_path / "compiled", "model.compile=true"),
                     log=lambda *a, **k: lines.append(" ".join(map(str, a))))  # fmt: skip
    assert any("2 decoder layers compiled" in x for x in lines)
    assert counters["stats"]["unique_graphs"] >= 1  # the training forward ran compiled code
    assert graphs["generate"] == 0  # rollouts and validation decoded eagerly
    for e, c in zip(eager["history"][1:], compiled["history"][1:], strict=True):
        assert c["reward/mean"] == e["reward/mean"]  # the same samples: the same policy at each step
        for key in ("loss/policy", "actor/entropy", "grad_norm"):
            assert c[key] == pytest.approx(e[key], rel=1e-4, abs=1e-6), key
    from safetensors.torch import load_file

    def weights(run):
        (ckpt,) = sorted((run / "checkpoints").glob("step_*"))
        return load_file(str(ckpt / "model.safetensors"))

    we, wc = weights(tmp_path / "eager"), weights(tmp_path / "compiled")
    assert we.keys() == wc.keys()  # compiled in place: the same parameter names in checkpoints
    assert max((we[k] - wc[k]).abs().max().item() for k in we) < 1e-5
    start = load_file(str(Path(tiny_model_dir) / "model.safetensors"))
    assert max((we[k] - start[k]).abs().max().item() for k in we) > 1e-4  # and training moved them


def test_compile_on_a_cpu_without_a_cpp_compiler_is_refused(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("reasonrl.engines.compiled.cpp_compiler", lambda: None)
    with pytest.raises(ConfigError, match="model.compile=true on a CPU needs a C\\+\\+ compiler"):
        _cfg(tiny_model_dir, tmp_path / "r", "model.compile=true")


def test_eager_sets_the_compiled_layers_aside_and_restores_them(tiny_model_and_tokenizer):
    import copy

    from reasonrl.engines.compiled import compile_decoder_layers, eager, is_compiled

    model = copy.deepcopy(tiny_model_and_tokenizer[0])
    assert not is_compiled(model)
    assert compile_decoder_layers(model) == 2 and is_compiled(model)  # lazy: nothing compiled yet
    with eager(model):
        assert not is_compiled(model)
    assert is_compiled(model)
    with pytest.raises(RuntimeError), eager(model):
        raise RuntimeError("generation failed")
    assert is_compiled(model)  # restored on the way out of an error too


def test_a_compile_failure_in_the_training_forward_names_the_key():
    """torch.compile fails on some models' layers at their first training forward (Mamba's and Jamba's
    under torch 2.13's dynamic shapes: "cannot determine truth value of Relational"); the forward
    `model.compile` trains with turns it into a one-line ConfigError. Other errors pass unchanged."""
    from torch._dynamo.exc import BackendCompilerFailed

    from reasonrl.config import ModelConfig
    from reasonrl.engines.compiled import naming_compile_failures
    from reasonrl.engines.single import completion_logprobs, training_forward

    def failing(*args, **kwargs):
        raise BackendCompilerFailed(
            "inductor", RuntimeError("cannot determine truth value of Relational"), None
        )

    with pytest.raises(ConfigError, match=r"model.compile: torch.compile failed on this model's decoder layers "
                                          r"\(.*cannot determine truth value.*\); set model.compile=false"):  # fmt: skip
        naming_compile_failures(failing)()
    with pytest.raises(ValueError, match="not a compiler error"):
        naming_compile_failures(lambda: (_ for _ in ()).throw(ValueError("not a compiler error")))()
    wrapped = training_forward(ModelConfig(compile=True))
    assert wrapped.__wrapped__ is completion_logprobs
    assert training_forward(ModelConfig(compile=True, logprob_chunk=4)).__wrapped__.keywords == {"chunk": 4}
    assert training_forward(ModelConfig()) is None
