"""The policy-gradient term of a demonstration's tokens under off-policy guidance (LUFFY, Yan et al. 2025,
arXiv:2504.14945: a group mixes the policy's samples with a demonstration from elsewhere).

Owns: `guided_token_loss(logprobs, advantages, shaping, gamma)`, per token
    loss_t = -A_t * f(p_t),   p_t = exp(logprobs_t), the current policy's probability of the token,
with f one of
    regularized   p / (p + gamma)   LUFFY's policy shaping (its "p_div_p" reshape): the gradient
                                    A * gamma * p / (p + gamma)^2 * grad log p is largest where p is near
                                    gamma, so tokens the policy finds unlikely are not ignored (plain p
                                    would give them almost no gradient) and likely ones are not pushed on
    prob          p                 the importance ratio pi / pi_expert with the expert's probability taken
                                    as 1 (LUFFY's "no_reshape")
    logprob       log p             A * grad log p: the demonstration trained like a sampled completion at
                                    ratio 1, i.e. an advantage-weighted SFT term
No clipping (LUFFY clips neither: the demonstration's ratio against its own sampler is unknown), and
`SHAPINGS` for the config's check. Pure: no model, no config. Does not own: which rows are demonstrations
or how the term joins the loss (`trainer.step.make_loss_fn`), or building the demonstrations
(`trainer.guidance`).
"""

from __future__ import annotations

import torch

SHAPINGS = ("regularized", "prob", "logprob")


def guided_token_loss(logprobs: torch.Tensor, advantages: torch.Tensor, shaping: str = "regularized",
                      gamma: float = 0.1) -> torch.Tensor:  # fmt: skip
    """-A * f(p) per token (module docstring); `logprobs` carry the gradient, `advantages` do not."""
    if shaping == "logprob":
        shaped = logprobs
    else:
        p = logprobs.exp()
        if shaping == "prob":
            shaped = p
        elif shaping == "regularized":
            shaped = p / (p + gamma)
        else:
            raise ValueError(f"unknown guidance shaping {shaping!r}; known: {', '.join(SHAPINGS)}")
    return -advantages.detach() * shaped
