"""Per-token KL estimators between the current policy and a reference (Schulman, "Approximating KL
divergence", 2020). With log-ratio d = logprobs - ref_logprobs (sampled from the current policy):

  k1  = d                      unbiased, high variance, can be negative
  k2  = d^2 / 2                ("mse"), biased, low variance
  k3  = exp(-d) - 1 + d        ("low_var_kl"), unbiased, always >= 0 (GRPO's choice)
  abs = |d|

Shapes: [B, T] in, [B, T] out. k3's exponent is clamped to [-20, 20] for stability.
"""

from __future__ import annotations

import torch

KL_ESTIMATORS = ("k1", "k2", "k3", "abs")


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    d = logprobs - ref_logprobs
    if estimator == "k1":
        return d
    if estimator == "k2":
        return 0.5 * d * d
    if estimator == "k3":
        d = d.clamp(-20.0, 20.0)
        return torch.exp(-d) - 1.0 + d
    if estimator == "abs":
        return d.abs()
    raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")
