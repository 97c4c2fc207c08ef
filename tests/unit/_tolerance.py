"""The fp32 tolerance of the algorithm tests, in one place (DESIGN rule 12: rtol <= 1e-5).

Owns: `close(actual, expected)`, an `assert_close` that takes plain numbers / lists as the expected
value and casts them to the actual tensor's dtype. Does not own: any tensor fixtures (each test file
builds its own hand-computed inputs).
"""

from __future__ import annotations

import torch


def close(a: torch.Tensor, b, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    torch.testing.assert_close(a, torch.as_tensor(b, dtype=a.dtype), rtol=rtol, atol=atol)
