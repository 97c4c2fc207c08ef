"""Token log-probabilities and chunked entropy against torch.distributions.Categorical."""

from __future__ import annotations

import pytest
import torch
from _tolerance import close
from torch.distributions import Categorical

from reasonrl.algorithms.logprobs import entropy_from_logits, logprobs_and_entropy, token_logprobs


def test_entropy_hand_computed():
    # uniform over 4: H = ln 4 = 1.386294 ; logits [0, ln 3] -> p = [.25, .75],
    # H = -(.25 ln .25 + .75 ln .75) = .346574 + .215762 = .562335
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, 1.098612, -1e9, -1e9]]])
    close(entropy_from_logits(logits), [[1.386294, 0.562335]])


@pytest.mark.parametrize("chunk_rows", [1, 4, 5, 1024])
def test_entropy_matches_categorical_and_gradient(chunk_rows):
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(3, 5, 17, generator=g)).requires_grad_(True)
    ours = entropy_from_logits(logits, chunk_rows=chunk_rows)
    ref = Categorical(logits=logits).entropy()
    close(ours, ref.detach())
    (g1,) = torch.autograd.grad(ours.sum(), logits)
    (g2,) = torch.autograd.grad(ref.sum(), logits)
    close(g1, g2)


def test_entropy_extreme_and_low_precision_logits():
    logits = torch.tensor([[[1e4, -1e4, 0.0], [-1e30, -1e30, 5.0]]])
    out = entropy_from_logits(logits)
    assert torch.isfinite(out).all()
    close(out, [[0.0, 0.0]], atol=1e-5)
    bf = torch.randn(2, 3, 7).to(torch.bfloat16)
    out_bf = entropy_from_logits(bf)
    assert out_bf.dtype == torch.float32  # computed in fp32
    close(out_bf, Categorical(logits=bf.float()).entropy())


def test_token_logprobs_matches_categorical():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 6, 9, generator=g)
    targets = torch.randint(0, 9, (2, 6), generator=g)
    close(token_logprobs(logits, targets), Categorical(logits=logits).log_prob(targets))
    # hand: logits [0, ln 3] target 1 -> ln .75 = -.287682
    close(token_logprobs(torch.tensor([[[0.0, 1.098612]]]), torch.tensor([[1]])), [[-0.287682]])


def test_log_probs_and_entropy_at_a_temperature_are_those_of_logits_over_it():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, 9, generator=g) * 3
    targets = torch.randint(0, 9, (2, 5), generator=g)
    for t in (0.6, 1.7):
        want = Categorical(logits=logits / t)
        close(token_logprobs(logits, targets, temperature=t), want.log_prob(targets))
        close(
            entropy_from_logits(logits, chunk_rows=3, temperature=t), want.entropy(), atol=1e-5
        )  # two formulas
        lp, ent = logprobs_and_entropy(logits, targets, with_entropy=True, temperature=t)
        close(lp, want.log_prob(targets))
        close(ent, want.entropy(), atol=1e-5)
        assert (lp - token_logprobs(logits, targets)).abs().max() > 0.05  # the temperature changed them
    # hand: logits [0, ln 3] at temperature 2 -> [0, ln sqrt 3]; target 1 -> ln(sqrt3 / (1 + sqrt3)) = -.455746
    close(
        token_logprobs(torch.tensor([[[0.0, 1.098612]]]), torch.tensor([[1]]), temperature=2.0), [[-0.455746]]
    )


def test_empty():
    assert entropy_from_logits(torch.zeros(0, 4, 5)).shape == (0, 4)


def test_fused_logprob_and_entropy_maths_equal_the_reference_with_gradients():
    """The functions compiled on CUDA compute the same values and gradients as the eager reference
    (run eagerly here; the compiled kernels are checked on a GPU by bench/gpu_train_step.py)."""
    from reasonrl.algorithms import logprobs as L

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        z = (torch.randn(3, 7, 50, generator=g) * 4).to(dtype).requires_grad_()
        t = torch.randint(0, 50, (3, 7), generator=g)
        ref_lp, ref_ent = L.token_logprobs(z, t), L.entropy_from_logits(z)
        (ref_lp.sum() + ref_ent.sum()).backward()
        ref_grad, z.grad = z.grad.clone(), None
        lp, ent = L._fused_logprobs(z, t), L._fused_entropy(z)
        (lp.sum() + ent.sum()).backward()
        assert lp.dtype == ent.dtype == torch.float32
        assert torch.allclose(lp, ref_lp, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-5)
        assert torch.allclose(z.grad.float(), ref_grad.float(), atol=1e-3)
        assert ref_lp.abs().min() > 0.01  # real log-probs, not a degenerate all-zero case
    # on CPU the engines' entry point is the eager reference; a metric-only entropy has no graph
    lp, ent = L.logprobs_and_entropy(z, t, with_entropy=True, entropy_grad=False)
    assert torch.equal(lp, L.token_logprobs(z, t)) and lp.requires_grad and not ent.requires_grad
    assert L.logprobs_and_entropy(z, t)[1] is None
    assert L.logprobs_and_entropy(z, t, with_entropy=True)[1].requires_grad  # by default a loss term's graph


def test_the_compiled_path_its_fallback_and_its_cache(monkeypatch):
    """The CUDA path's control flow, on CPU with the fused functions standing in for compiled ones:
    used when given, entropy without a graph when it is only a metric; a first failure warns once and
    falls back to the eager path for good; a failure after a success is raised, not hidden."""
    import warnings

    from reasonrl.algorithms import logprobs as L

    z = torch.randn(2, 3, 11, generator=torch.Generator().manual_seed(1)).requires_grad_()
    t = torch.randint(0, 11, (2, 3), generator=torch.Generator().manual_seed(2))
    calls = []

    def lp_fn(logits, targets, temperature):
        calls.append("lp" if temperature == 1.0 else f"lp/{temperature}")
        return L._fused_logprobs(logits, targets, temperature)

    def ent_fn(logits, temperature):
        calls.append("ent" if temperature == 1.0 else f"ent/{temperature}")
        return L._fused_entropy(logits, temperature)

    monkeypatch.setattr(L, "_compiled", {"fns": (lp_fn, ent_fn)})
    lp, ent = L._logprobs_and_entropy(z, t, True, True, compiled=True)
    assert calls == ["lp", "ent"] and L._compiled["ok"] is True
    assert torch.allclose(lp, L.token_logprobs(z, t)) and ent.requires_grad
    _, ent = L._logprobs_and_entropy(z, t, True, False, compiled=True)
    assert not ent.requires_grad and torch.allclose(ent, L.entropy_from_logits(z))
    assert L._logprobs_and_entropy(z, t, False, True, compiled=True)[1] is None
    assert calls == ["lp", "ent", "lp", "ent", "lp"]
    assert L._logprobs_and_entropy(z, t, True, True, compiled=False)[0] is not None and len(calls) == 5
    lp, ent = L._logprobs_and_entropy(z, t, True, False, compiled=True, temperature=0.5)  # the rollouts'
    assert calls[5:] == ["lp/0.5", "ent/0.5"]
    assert torch.allclose(lp, L.token_logprobs(z * 2, t)) and torch.allclose(
        ent, L.entropy_from_logits(z * 2)
    )

    def broken(*args):
        raise RuntimeError("no compiler")

    with pytest.raises(RuntimeError, match="no compiler"):  # it worked before: a real error
        monkeypatch.setattr(L, "_compiled", {"fns": (broken, broken), "ok": True})
        L._logprobs_and_entropy(z, t, False, True, compiled=True)
    monkeypatch.setattr(L, "_compiled", {"fns": (broken, broken)})
    with pytest.warns(
        UserWarning, match="fused log-probs not compiled .RuntimeError: no compiler.; using the eager"
    ):
        lp, _ = L._logprobs_and_entropy(z, t, False, True, compiled=True)
    assert torch.equal(lp, L.token_logprobs(z, t)) and L._compiled["fns"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: the eager path from now on, silently
        assert torch.equal(L._logprobs_and_entropy(z, t, False, True, compiled=True)[0], lp)

    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, dynamic: compiled.append((fn, dynamic)) or fn)
    monkeypatch.setattr(L, "_compiled", {})
    assert (
        L._compiled_fns() == (L._fused_logprobs, L._fused_entropy) and L._compiled_fns() is L._compiled_fns()
    )
    assert compiled == [(L._fused_logprobs, True), (L._fused_entropy, True)]  # once, dynamic shapes
