"""Shared test fixtures.

Owns: `tiny_model_and_tokenizer`, a random (untrained) tiny Qwen2 and a BPE tokenizer built from the
procedural task corpus by `reasonrl.models.tiny`, in a couple of seconds, once per test session; and
`python_every_uid_reaches` (unisolated sandbox runs as root drop to a per-run uid, which must reach
the interpreter); `_torch_threads`, which gives every test torch's thread count back as it found it (a test that set 1
thread once made every later test run single-threaded, and a test that holds only on one thread
passed by the order of the files); and the order of the modules: the few that take minutes go first,
so that `make test`'s parallel workers (pytest-xdist, one module per worker at a time) start them at
once and finish together, rather than one worker running the longest module alone at the end.
Does not own: the warm-started demo model (too slow for unit tests; the e2e tests build it).

The model is shared by every test of the session: tests that change its weights or its mode must work
on `copy.deepcopy(model)`.
"""

from __future__ import annotations

import pytest

# the modules that take minutes (`--durations`), longest first; every other module keeps its place
_LONGEST_FIRST = ("tests/e2e/test_fsdp2_train.py", "tests/unit/test_rollout_vllm.py")
# plain words beside the task corpus so the vocabulary exceeds 50 tokens (transformers' historical
# default top_k) and a hidden top-k filter would show up in the sampler log-probabilities
_EXTRA_TEXT = [
    "the quick brown fox jumps over the lazy dog while we think about the answer",
    "reasoning with reinforcement learning on verifiable rewards needs careful tests",
]


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer():
    """(model, tokenizer): random tiny Qwen2 (2 layers, hidden 32) in eval mode, fp32 on CPU."""
    import torch

    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import TinySpec, build_model, build_tokenizer, corpus

    problems = generate("arithmetic", 100, seed=0, difficulty=2) + generate(
        "countdown", 100, seed=0, difficulty=2
    )
    tokenizer = build_tokenizer(corpus(problems) + _EXTRA_TEXT, vocab_size=96)
    spec = TinySpec(hidden_size=32, layers=2, heads=2, intermediate_size=64, max_positions=128, seed=7)
    model = build_model(spec, tokenizer)
    # larger weights than the default init (std 0.02) so the next-token distribution is far from
    # uniform: log-prob comparisons then test something and greedy decoding has no near-ties
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3, generator=gen)
    model.eval()
    return model, tokenizer


@pytest.fixture
def python_every_uid_reaches() -> str:
    """As root, an interpreter every uid can reach: this one's base, else the system's; else skip."""
    import os

    from reasonrl.rewards.sandbox import process as sandbox

    if os.geteuid() != 0:
        pytest.skip("unisolated runs get a uid of their own only as root")
    for python in (sandbox.interpreter(), "/usr/bin/python3"):
        if os.path.exists(python) and sandbox._world_traversable(python):
            return python
    pytest.skip("no interpreter every uid can reach")


@pytest.fixture(autouse=True)
def _torch_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return _LONGEST_FIRST.index(path) if path in _LONGEST_FIRST else len(_LONGEST_FIRST)

    items.sort(key=rank)  # stable: the other modules keep their order
