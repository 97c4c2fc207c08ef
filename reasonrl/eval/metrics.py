"""Evaluation statistics, as pure functions of per-sample scores and extracted answers.

Owns:
  `pass_at_k(n, c, k)`: the unbiased estimator of Chen et al. 2021 (arXiv:2107.03374),
      1 - C(n-c, k) / C(n, k), in its numerically stable product form
      1 - prod_{i=n-c+1..n} (1 - k / i); 1.0 when n - c < k.
  `mean_at_n`, `best_at_n`, `worst_at_n` of one problem's n scores.
  `answer_key`: the normalised form an extracted answer votes with: a number (1/2, 0.5, \\frac{1}{2},
      50% of ... are the same value) becomes its exact fraction; anything else its LaTeX-cleaned,
      whitespace-collapsed, case-folded text.
  `majority(keys)`: the winning answer key's first sample and its votes (also `rewards.pseudo_label`'s vote);
  `maj_at_k(keys, scores, k)`: majority vote over the first k samples' answer keys (samples without
      an answer do not vote). Ties go to the answer that appeared first among those samples, so the
      result is deterministic and does not depend on dict order; the vote scores the first sample
      carrying the winning key. No answer at all scores 0.
  `standard_error` (of a mean over problems), `bootstrap_ci` (percentile interval, seeded) and
      `macro_average` (mean per domain, then over domains).
Does not own: running a benchmark (`eval.runner`), or extracting answers (the verifiers).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_at_n(scores: Sequence[float]) -> float:
    return sum(scores) / len(scores)


def best_at_n(scores: Sequence[float]) -> float:
    return max(scores)


def worst_at_n(scores: Sequence[float]) -> float:
    return min(scores)


def answer_key(extracted: Any) -> str | None:
    """The key equivalent answers share (None: no answer)."""
    if extracted is None:
        return None
    from reasonrl.rewards.verifiers.math import clean_latex, to_number

    text = str(extracted).strip()
    if not text:
        return None
    num = to_number(text)
    if num is not None:
        value, percent, _ = num
        return f"num:{value / 100 if percent else value}"
    return "text:" + " ".join(clean_latex(text).split()).casefold()


def majority(keys: Sequence[str | None]) -> tuple[int, int] | None:
    """(index of the first sample carrying the winning key, the winner's votes); None when no sample has a
    key. Samples without a key do not vote; a tie goes to the key that appeared first."""
    votes: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key is not None:
            votes[key] = votes.get(key, 0) + 1
            first.setdefault(key, i)
    if not votes:
        return None
    winner = min(votes, key=lambda key: (-votes[key], first[key]))
    return first[winner], votes[winner]


def maj_at_k(keys: Sequence[str | None], scores: Sequence[float], k: int) -> float:
    if not 1 <= k <= len(keys) or len(keys) != len(scores):
        raise ValueError(f"maj@k needs 1 <= k <= n and one score per answer, got k={k}, n={len(keys)}")
    won = majority(keys[:k])
    return 0.0 if won is None else float(scores[won[0]])


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean of per-problem values (sample standard deviation / sqrt(N))."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def bootstrap_ci(values: Sequence[float], level: float = 0.95, iters: int = 2000, seed: int = 0):
    """(low, high): percentile bootstrap interval of the mean, resampling problems (seeded)."""
    if not values:
        raise ValueError("bootstrap_ci of no values")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(iters))
    lo = means[int(math.floor((1 - level) / 2 * iters))]
    hi = means[min(iters - 1, int(math.ceil((1 + level) / 2 * iters)) - 1)]
    return lo, hi


def macro_average(values: dict[str, float], domains: dict[str, str]) -> dict[str, float]:
    """{domain: mean of its benchmarks' values} plus "macro": the mean over domains."""
    per: dict[str, list[float]] = {}
    for name, v in values.items():
        per.setdefault(domains.get(name, name), []).append(v)
    out = {d: sum(vs) / len(vs) for d, vs in sorted(per.items())}
    if out:
        out["macro"] = sum(out.values()) / len(out)
    return out
