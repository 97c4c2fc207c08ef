"""Test helper: random weights large enough that what sets an architecture apart (soft-caps, attention
sinks, logit scales) changes the numbers; the default init (std 0.02) leaves scores near zero, where a
soft-cap is the identity and a sink takes no mass."""

from __future__ import annotations

import torch


def spread_weights(model, std: float, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, q in model.named_parameters():
            if "sinks" in name:
                q.normal_(1.0, 1.0, generator=g)
            elif q.dim() > 1:
                q.normal_(0.0, std, generator=g)
    return model
