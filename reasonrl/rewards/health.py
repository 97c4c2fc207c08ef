"""Health metrics of one batch of verifier calls: `verifier/...` rates, latencies and counts.

Owns: `health_metrics` (overall and per verifier name), `kind` (ok / timeout / error of a result), and
`is_error` / `failed_share` / `failure_warning` / `most_common_error`, the one reading of an error reason
for everything that counts them.
Does not own: running the calls (`rewards.runner`, which reports these for every batch) or reducing
metrics across steps / ranks (`trainer.metrics`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from reasonrl.rewards.base import RewardResult


def is_error(reason: str | None) -> bool:
    """Whether a result's reason says the verifier failed ("error: ..."), rather than scored the answer:
    what the error rate counts, the trainer's `verifier_watch` stops on and an eval rerun scores again."""
    return str(reason or "").startswith("error")


def failed_share(reasons: Iterable[str | None]) -> float:
    """The share of `reasons` where the verifier failed or timed out (the eval tables' `verifier_errors`
    column and in-training validation's `eval/verifier_errors`); 0.0 for none."""
    reasons = [str(r or "") for r in reasons]
    return sum(r.startswith(("error", "timeout")) for r in reasons) / len(reasons) if reasons else 0.0


def failure_warning(what: str, reasons: Iterable[str | None]) -> str | None:
    """One line when the verifier failed on some of these calls (each scored 0 without being measured,
    so a mean over them is a lower bound, not the model's), else None."""
    reasons = list(reasons)
    failed = [r for r in reasons if is_error(r)]
    if not failed:
        return None
    return (f"warning: {what}: the verifier failed on {len(failed)} of {len(reasons)} samples "
            f"(e.g. {most_common_error(failed)!r}); they count as wrong")  # fmt: skip


def most_common_error(reasons: Iterable[str | None], width: int = 160) -> str:
    """The most common error reason among `reasons`, cut to `width` characters for one line ('' if none)."""
    counts = Counter(str(r) for r in reasons if is_error(r))
    return counts.most_common(1)[0][0][:width] if counts else ""


def kind(res: RewardResult) -> str:
    r = res.reason
    if r == "timeout":
        return "timeout"
    if is_error(r):
        return "error"
    return "ok"


def _quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), NaN for an empty list."""
    if not xs:
        return math.nan
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def health_metrics(jobs: Sequence) -> dict[str, float]:
    """Flat `verifier/...` metrics over one batch of calls, overall and per verifier name.

    mean_score (over all calls, failures count as 0), timeout_rate, error_rate, extract_fail_rate
    (share of completed calls whose info has "extracted" set to None; terms that never report an
    extraction are left out of the denominator), latency_p50_s / latency_p95_s (seconds inside the
    verifier, as the runner measured it: a timeout counts as the time limit; a dead worker has no
    latency), count. A metric with no data (e.g. no call reported an extraction) is left out rather
    than reported as NaN.
    """
    groups: dict[str, list] = {}
    for j in jobs:
        groups.setdefault(j.name, []).append(j)
    out: dict[str, float] = {}

    def add(prefix: str, js: list) -> None:
        n = len(js)
        kinds = [kind(j.result) for j in js]
        with_extraction = [j for j, k in zip(js, kinds) if k == "ok" and "extracted" in j.result.info]
        lat = [j.latency for j in js if not math.isnan(j.latency)]
        out[f"{prefix}/count"] = float(n)
        out[f"{prefix}/mean_score"] = sum(float(j.result.score) for j in js) / n if n else math.nan
        out[f"{prefix}/timeout_rate"] = kinds.count("timeout") / n if n else math.nan
        out[f"{prefix}/error_rate"] = kinds.count("error") / n if n else math.nan
        out[f"{prefix}/extract_fail_rate"] = (
            sum(j.result.info["extracted"] is None for j in with_extraction) / len(with_extraction)
            if with_extraction
            else math.nan
        )
        out[f"{prefix}/latency_p50_s"] = _quantile(lat, 0.5)
        out[f"{prefix}/latency_p95_s"] = _quantile(lat, 0.95)

    add("verifier", list(jobs))
    del out["verifier/mean_score"]  # mixing verifiers' scores means nothing; per-name only
    for name, js in sorted(groups.items()):
        add(f"verifier/{name}", js)
    return {k: v for k, v in out.items() if not math.isnan(v)}  # no data -> no key (not NaN)


__all__ = ["health_metrics", "is_error", "kind", "most_common_error"]
