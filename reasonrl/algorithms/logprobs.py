"""Per-token log-probabilities and entropy from logits.

`token_logprobs(logits [B, T, V], targets [B, T]) -> [B, T]` uses log_softmax + gather in fp32.
`entropy_from_logits(logits [B, T, V]) -> [B, T]` computes H = logsumexp(z) - sum softmax(z) z, in
chunks of rows so the [B, T, V] fp32 temporaries never all exist at once.
Each takes `temperature`: the distribution softmax(logits / temperature), the one a sampler at that
temperature draws from (so the trainer's log-probs, the ratio and the entropy are those of the policy
that produced the rollouts, as verl and TRL compute them; 1 leaves the logits as they are).
`logprobs_and_entropy(logits, targets, with_entropy, entropy_grad, temperature)` is what the engines call: on CUDA
both come from `torch.compile`d functions that read the (bf16) logits a few times inside fused
reductions instead of writing several fp32 [B, T, V] temporaries (on an H100 with a 152k vocabulary
those passes took about a fifth of a training step); elsewhere, and if compiling fails (said once),
the two functions above.
Does not own: running the model or slicing completion positions out of its logits (`engines/`).
"""

from __future__ import annotations

import torch


def _scaled(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    z = logits.float()
    return z / temperature if temperature != 1.0 else z


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    logp = torch.log_softmax(_scaled(logits, temperature), dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(
    logits: torch.Tensor, chunk_rows: int = 1024, temperature: float = 1.0
) -> torch.Tensor:
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for i in range(0, flat.shape[0], chunk_rows):
        z = _scaled(flat[i : i + chunk_rows], temperature)
        p = torch.softmax(z, dim=-1)
        out.append(torch.logsumexp(z, dim=-1) - (p * z).sum(-1))
    return torch.cat(out).reshape(logits.shape[:-1]) if out else flat.new_zeros(logits.shape[:-1])


def _fused_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    z = _scaled(logits, temperature)
    return z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)


def _fused_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    z = _scaled(logits, temperature)
    return torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(-1)


_compiled: dict[str, object] = {}


def _compiled_fns():
    """The two fused functions compiled for CUDA (once, dynamic shapes), or None if compiling failed."""
    if "fns" not in _compiled:
        _compiled["fns"] = (
            torch.compile(_fused_logprobs, dynamic=True),
            torch.compile(_fused_entropy, dynamic=True),
        )
    return _compiled["fns"]


def logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor, with_entropy: bool = False,
                         entropy_grad: bool = True, temperature: float = 1.0,
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(token log-probs [..], entropy [..] or None) in fp32, of softmax(logits / temperature).
    entropy_grad=False: the entropy is a metric, computed without a graph."""
    return _logprobs_and_entropy(logits, targets, with_entropy, entropy_grad, logits.is_cuda, temperature)


def _logprobs_and_entropy(logits, targets, with_entropy: bool, entropy_grad: bool, compiled: bool,
                          temperature: float = 1.0):  # fmt: skip
    temperature = float(temperature)
    fns = _compiled_fns() if compiled and _compiled.get("fns", True) is not None else None
    if fns is not None:
        try:
            lp = fns[0](logits, targets, temperature)
            if with_entropy and entropy_grad:
                ent = fns[1](logits, temperature)
            elif with_entropy:
                with torch.no_grad():
                    ent = fns[1](logits.detach(), temperature)
            _compiled["ok"] = True
            return lp, (ent if with_entropy else None)
        except Exception as e:
            if _compiled.get("ok"):  # compiled before: not a missing toolchain, so not ours to hide
                raise
            import warnings

            warnings.warn(
                f"fused log-probs not compiled ({type(e).__name__}: {e}); using the eager path", stacklevel=2
            )
            _compiled["fns"] = None
    lp = token_logprobs(logits, targets, temperature)
    if not with_entropy:
        return lp, None
    return lp, entropy_from_logits(logits if entropy_grad else logits.detach(), temperature=temperature)
