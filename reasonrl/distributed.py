"""Where this process stands in a (possibly) data-parallel run, and the reductions all ranks share.

Owns: `rank`, `world_size`, `is_main` (only rank 0 writes logs, rollouts, plots and checkpoints),
`all_reduce_sum` (loss normalisers and early-stop statistics: every rank must divide by the same
global counts, so N ranks compute the same loss and gradients as one process), `global_normalisers`
(the mini-batch's token / sequence counts over all ranks), `global_masked_mean` and `reduce_metrics`
(a step's metrics averaged over ranks, `_max` keys maxed, `loss/` terms (already normalised by global
counts) summed). With torch.distributed not initialised (one process) every function is the identity,
so single-process results are bit-for-bit what they were. Gloo's AVG all-reduce has had a
silent-correctness bug (pytorch#162338): only SUM and MAX are used here.
Does not own: launching or the process group (the distributed engine, `reasonrl train` under torchrun).
"""

from __future__ import annotations

import torch

from reasonrl.algorithms.masked import masked_mean, normalisers


def _active() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def rank() -> int:
    return torch.distributed.get_rank() if _active() else 0


def world_size() -> int:
    return torch.distributed.get_world_size() if _active() else 1


def is_main() -> bool:
    return rank() == 0


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """The sum of `t` over all ranks (a new tensor; `t` itself unchanged)."""
    if not _active():
        return t
    out = t.detach().clone()
    torch.distributed.all_reduce(out, op=torch.distributed.ReduceOp.SUM)
    return out


def global_normalisers(mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """`algorithms.masked.normalisers` of the whole mini-batch across ranks."""
    return {k: all_reduce_sum(v) for k, v in normalisers(mask).items()}


def global_masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean of `x` over the True entries of `mask` on all ranks together."""
    if not _active():
        return masked_mean(x, mask)
    m = mask.to(x.dtype)
    both = all_reduce_sum(torch.stack([(x * m).sum(), m.sum()]))
    return both[0] / both[1].clamp_min(1)


def reduce_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """One dict every rank agrees on; rank 0 logs it. Keys must be the same on all ranks."""
    if not _active() or not metrics:
        return metrics
    keys = sorted(metrics)
    maxed = [k for k in keys if k.endswith("_max")]
    rest = [k for k in keys if not k.endswith("_max")]
    out: dict[str, float] = {}
    if rest:
        t = torch.tensor([float(metrics[k]) for k in rest], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        n = world_size()
        out.update({k: v if k.startswith("loss/") else v / n for k, v in zip(rest, t.tolist())})
    if maxed:
        t = torch.tensor([float(metrics[k]) for k in maxed], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        out.update(dict(zip(maxed, t.tolist())))
    return {k: out[k] for k in metrics}
