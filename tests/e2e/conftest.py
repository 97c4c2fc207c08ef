"""Fixtures of the end-to-end tests.

Owns: `tiny_model_dir`, a random (untrained) tiny Qwen2 + BPE tokenizer saved as a Hugging Face
directory once per session, for runs that load `model.path` from disk.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import TinySpec, build_model, build_tokenizer, corpus

    spec = TinySpec(hidden_size=32, layers=2, heads=2, intermediate_size=64, vocab_size=64)
    probs = generate("arithmetic", 500, seed=0, difficulty=2, split="train")
    tok = build_tokenizer(corpus(probs), spec.vocab_size)
    model = build_model(spec, tok)
    out = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)
