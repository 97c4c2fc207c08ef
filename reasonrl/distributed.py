"""Where this process stands in a (possibly) data-parallel run, and the reductions all ranks share.

Owns: `rank`, `world_size`, `is_main` (only rank 0 writes logs, rollouts, plots and checkpoints),
`all_reduce_sum` (loss normalisers and early-stop statistics: every rank must divide by the same
global counts, so N ranks compute the same loss and gradients as one process), `global_normalisers`
(the mini-batch's token / sequence counts over all ranks), `global_masked_mean` and `reduce_metrics`
(a step's metrics averaged over ranks, `_max` keys maxed, `loss/` terms (already normalised by global
counts) summed). With torch.distributed not initialised (one process) every function is the identity,
so single-process results are bit-for-bit what they were. Gloo's AVG all-reduce has had a
silent-correctness bug (pytorch#162338): only SUM and MAX are used here.
Also owns joining a torchrun launch (`init_from_env`: gloo on CPU, NCCL and gloo on CUDA, a collective timeout
so a crashed or hung rank fails the others with an error instead of hanging them), the rank's share of
a step's prompts (`shard`; `set_share` for a rank's rollout worker), `all_gather_objects` and
`any_rank` (one decision for all ranks), and a group of helper processes, one per rank, outside the
trainers' group (`side_group_address` agreed by the trainers, `join_side_group` in each helper: the
rollout workers when a step's decisions need every rank's rollouts).
Does not own: the sharded engine (`engines.fsdp2`).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re

import torch

from reasonrl.algorithms.masked import masked_mean, normalisers


class RankError(RuntimeError):
    """A collective failed or timed out: another rank crashed or hangs."""


def _collective(name: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except RuntimeError as e:  # gloo / NCCL timeouts and broken connections
        raise _failed(e, name) from None


_PHASE = ["start"]
_COMM = re.compile(r"timed out|gloo|nccl|connection|socket|peer|broken pipe", re.IGNORECASE)


def set_phase(name: str) -> None:
    """The training phase this rank is in (named when a collective fails)."""
    _PHASE[0] = name


@contextlib.contextmanager
def collective_errors():
    """A communication failure inside (FSDP's own collectives included) becomes a RankError naming this
    rank and its phase."""
    try:
        yield
    except RankError:
        raise
    except RuntimeError as e:
        if world_size() < 2 or not _COMM.search(str(e)):
            raise
        raise _failed(e) from None


def _failed(e: Exception, collective: str = "") -> RankError:
    """The one error every failed collective becomes: this rank, its phase and what failed (the
    collective's name where known, and the first line of `e`)."""
    what = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
    what = f"{collective}: {what}" if collective else what
    return RankError(
        f"rank {rank()} of {world_size()}: a collective in phase {_PHASE[0]!r} failed ({what}); another rank "
        f"crashed or hangs (train.dist_timeout_s bounds the wait)"
    )


def active() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def rank() -> int:
    return torch.distributed.get_rank() if active() else 0


def world_size() -> int:
    return torch.distributed.get_world_size() if active() else 1


def is_main() -> bool:
    return rank() == 0


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """The sum of `t` over all ranks (a new tensor; `t` itself unchanged)."""
    if not active():
        return t
    out = t.detach().clone()
    _collective("all_reduce_sum", torch.distributed.all_reduce, out, op=torch.distributed.ReduceOp.SUM)
    return out


def global_normalisers(mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """`algorithms.masked.normalisers` of the whole mini-batch across ranks."""
    return {k: all_reduce_sum(v) for k, v in normalisers(mask).items()}


def global_masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean of `x` over the True entries of `mask` on all ranks together."""
    if not active():
        return masked_mean(x, mask)
    m = mask.to(x.dtype)
    both = all_reduce_sum(torch.stack([(x * m).sum(), m.sum()]))
    return both[0] / both[1].clamp_min(1)


def reduce_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """One dict every rank agrees on, what one process would log for the whole step; rank 0 logs it.

    Averaged over ranks (each holds an equal share of the step), `_max` keys maxed, `loss/` terms
    (already normalised by global counts) summed. A family of keys with a `<family>/count` (the
    verifiers' health metrics) is weighted by each rank's count, its count summed: a rank whose share
    held no problem of a data source has none of its keys. Any other key must be on every rank.
    """
    if not active():
        return metrics
    every = all_gather_objects({k: float(v) for k, v in metrics.items()})
    union = list(dict.fromkeys(k for d in every for k in d))
    counted = {k.rsplit("/", 1)[0] for k in union if k.endswith("/count")}

    def family(k: str) -> str:
        return k.rsplit("/", 1)[0]

    gaps = {
        r: sorted(k for k in union if k not in d and family(k) not in counted)[:3]
        for r, d in enumerate(every)
    }
    gaps = {r: g for r, g in gaps.items() if g}
    if gaps:  # a rank-specific code path: mixing such metrics would mislead
        raise RankError(f"rank {rank()} of {world_size()}: the ranks' metrics differ (missing: {gaps})")
    out: dict[str, float] = {}
    for k in union:
        have = [d for d in every if k in d]
        if k.endswith("_max"):
            out[k] = max(d[k] for d in have)
        elif k.startswith("loss/") or (family(k) in counted and k.endswith("/count")):
            out[k] = sum(d[k] for d in have)
        elif family(k) in counted:
            w = [d.get(f"{family(k)}/count", 0.0) for d in have]
            out[k] = (
                sum(x * d[k] for x, d in zip(w, have)) / sum(w)
                if sum(w)
                else sum(d[k] for d in have) / len(have)
            )
        else:
            out[k] = sum(d[k] for d in have) / len(every)
    return out


def launched(single_rank: bool = False) -> bool:
    """True under torchrun (or any launcher that sets WORLD_SIZE > 1); single_rank: also a launch of
    one rank (torchrun --nproc-per-node 1 sets WORLD_SIZE=1 and MASTER_ADDR)."""
    world = os.environ.get("WORLD_SIZE")
    return int(world or "1") > 1 or (single_rank and world is not None and "MASTER_ADDR" in os.environ)


def init_from_env(timeout_s: float = 1800.0, single_rank: bool = False) -> bool:
    """Join the process group a launcher described in the environment (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT, LOCAL_RANK); returns True if this call created it. With CUDA: NCCL for CUDA tensors
    (each rank on cuda:LOCAL_RANK) and gloo for CPU ones (the loss normalisers, metrics and objects this
    module reduces live on the CPU; an NCCL-only group refuses them: "No backend type associated with
    device type cpu", seen on an H100). Without CUDA: gloo. single_rank: a launch of one rank gets its
    group too (what FSDP2 on one device needs)."""
    if not launched(single_rank) or active():
        return False
    timeout = datetime.timedelta(seconds=timeout_s)
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        torch.distributed.init_process_group("cpu:gloo,cuda:nccl", timeout=timeout, device_id=device)
    else:
        torch.distributed.init_process_group("gloo", timeout=timeout)
    return True


def shutdown() -> None:
    if active():
        torch.distributed.destroy_process_group()


def barrier(name: str = "barrier") -> None:
    if active():
        _collective(name, torch.distributed.barrier)


_SHARE: list[tuple[int, int] | None] = [None]


def set_share(rank_: int, world: int) -> None:
    """Make `shard` take rank `rank_`'s share of `world` in a process outside the process group: a
    rank's rollout worker generates that rank's prompts."""
    _SHARE[0] = (rank_, world) if world > 1 else None


def side_group_address(name: str) -> tuple[str, int, str]:
    """(host, port, key prefix) where one helper process per rank can form its own process group: the
    launcher's store (MASTER_ADDR:MASTER_PORT, which every rank already reached) under a prefix unique
    to this call. Every rank must call it (rank 0's prefix is used)."""
    import uuid

    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(
            f"a group of helper processes needs the launcher's store: {', '.join(missing)} not set"
        )
    prefix = all_gather_objects(f"reasonrl/{name}/{uuid.uuid4().hex}")[0]
    return os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), prefix


def join_side_group(address: tuple[str, int, str], rank_: int, world: int, timeout_s: float) -> None:
    """Make this process (not a trainer) rank `rank_` of a gloo group of `world` helper processes met at
    `address` (`side_group_address`); every function of this module then works across those helpers."""
    host, port, prefix = address
    timeout = datetime.timedelta(seconds=timeout_s)
    store = torch.distributed.TCPStore(host, port, is_master=False, timeout=timeout)
    torch.distributed.init_process_group(
        "gloo",
        store=torch.distributed.PrefixStore(prefix, store),
        rank=rank_,
        world_size=world,
        timeout=timeout,
    )


def shard(items: list) -> list:
    """This rank's contiguous share of a list whose length every rank agrees on (divisible by the world)."""
    r, n = _SHARE[0] if _SHARE[0] is not None and not active() else (rank(), world_size())
    if n == 1:
        return items
    if len(items) % n:
        raise ValueError(f"{len(items)} items cannot be split evenly over {n} ranks")
    k = len(items) // n
    return items[r * k : (r + 1) * k]


def all_gather_objects(obj) -> list:
    """[obj of rank 0, obj of rank 1, ...] on every rank (picklable objects)."""
    if not active():
        return [obj]
    out = [None] * world_size()
    _collective("all_gather_objects", torch.distributed.all_gather_object, out, obj)
    return out


def sum_over_ranks(values: dict[str, float]) -> dict[str, float]:
    """{key: the sum of its values over the ranks that hold it}, the same dict on every rank."""
    if not active():
        return dict(values)
    out: dict[str, float] = {}
    for part in all_gather_objects(values):
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    return out


def any_rank(flag: bool) -> bool:
    """True on every rank if `flag` is True on any rank (e.g. a stop signal seen by one)."""
    if not active():
        return flag
    t = torch.tensor([1.0 if flag else 0.0])
    _collective("any_rank", torch.distributed.all_reduce, t, op=torch.distributed.ReduceOp.MAX)
    return bool(t.item())


def max_over_ranks(n: int) -> int:
    """The largest `n` of all ranks (e.g. how many forwards each must run to stay in lock-step)."""
    if not active():
        return n
    t = torch.tensor([float(n)])
    _collective("max_over_ranks", torch.distributed.all_reduce, t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def train_engine_kind(engine: str, world: int) -> str:
    """`train.engine` resolved for a launch of `world` ranks: "auto" is fsdp2 under torchrun, else single."""
    return engine if engine != "auto" else ("fsdp2" if world > 1 else "single")
