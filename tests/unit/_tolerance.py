"""The fp32 tolerance of the algorithm tests, in one place (DESIGN rule 12: rtol <= 1e-5).

Owns: `close(actual, expected)`, an `assert_close` that takes plain numbers / lists as the expected
value and casts them to the actual tensor's dtype. Does not own: any tensor fixtures (each test file
builds its own hand-computed inputs).
"""

from __future__ import annotations

import torch


def close(a: torch.Tensor, b, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    torch.testing.assert_close(a, torch.as_tensor(b, dtype=a.dtype), rtol=rtol, atol=atol)


# Parameters after a few Adam steps (lr 1e-2), compared across two ways of summing the same gradients
# (2 ranks against one process, trimmed against padded micro-batches, packed against padded): Adam
# divides each element's gradient by its own running scale, so where a gradient is near zero,
# summation-order rounding becomes a step-size difference in that element. How large depends on the
# CPU's kernels: after 3 steps the largest element differs by up to 2.2e-5 on an AMD EPYC without
# AVX-512 and 1.2e-4 on one with it (DeepSeek-V3.2 packed; Gemma 2 packed 5.7e-5), while the tensors'
# mean difference stays below 1.3e-6 on both. A wrong update differs by about a step (lr) in the
# elements it touches: `adam_close` bounds the largest element at 5% of a step and each tensor's mean
# difference at 5e-6 (a per-row or per-shard error moves the mean by orders more). Losses and gradient
# norms, which a wrong normaliser or a missing reduction changes, stay at rtol 1e-5 / atol 1e-6.
ADAM_PARAM_MAX = 5e-4
ADAM_PARAM_MEAN = 5e-6


def adam_close(got: dict, want: dict, skip: tuple[str, ...] = ("k_proj.bias",)) -> None:
    """Every tensor of `want` (name -> tensor) in `got` within Adam's tolerance above. Names ending in
    `skip` are left out: softmax ignores a bias added to every key, so its gradient is pure rounding
    noise, which Adam normalises into full-size steps of either sign."""
    for name, w in want.items():
        if name.endswith(skip):
            continue
        d = (torch.as_tensor(got[name]) - w).abs()
        big, mean = d.max().item(), d.mean().item()
        assert big <= ADAM_PARAM_MAX and mean <= ADAM_PARAM_MEAN, (name, big, mean)
