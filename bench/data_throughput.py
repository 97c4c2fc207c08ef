"""Data pipeline throughput on this machine: converting 100k rows, exact + MinHash dedup of 100k rows,
and decontamination of 100k rows against a 10k-row eval set (goal: under 60 s). Side by side: the
same MinHash work done the plain way with datasketch (one `MinHash.update` per shingle), the
baseline our bulk path is measured against.

    .venv/bin/python bench/data_throughput.py [--rows 100000] [--eval-rows 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path


def _words(rng: random.Random, vocab: list[str], n: int) -> str:
    return " ".join(rng.choice(vocab) for _ in range(n))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--eval-rows", type=int, default=10_000)
    args = ap.parse_args()
    from reasonrl.data import dedup
    from reasonrl.data.prepare import convert_files

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(20_000)]
    texts = [_words(rng, vocab, rng.randint(20, 60)) for _ in range(args.rows)]
    for i in range(0, args.rows, 20):  # 5% exact repeats, 5% one-word edits
        texts[i] = texts[i // 2]
        if i + 1 < args.rows:
            w = texts[(i + 1) // 2].split()
            w[len(w) // 2] = "edited"
            texts[i + 1] = " ".join(w)
    names = [f"row {i}" for i in range(args.rows)]
    evals = [_words(rng, vocab, 40) for _ in range(args.eval_rows)]
    for i in range(0, args.rows, 100):  # 1% of training rows overlap an eval problem
        texts[i] = "prefix " + evals[i % args.eval_rows]
    figures = {}

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "gsm8k.jsonl"
        src.write_text(
            "".join(json.dumps({"question": t, "answer": f"r\n#### {i}"}) + "\n" for i, t in enumerate(texts))
        )
        t0 = time.perf_counter()
        problems, _ = convert_files("gsm8k", [str(src)])
        from reasonrl.data.schema import write_problems

        write_problems(Path(d) / "out.parquet", problems)
        figures["convert gsm8k rows/s (read jsonl, convert, route, write parquet)"] = args.rows / (
            time.perf_counter() - t0
        )

    t0 = time.perf_counter()
    exact = dedup.exact_duplicates(texts, names)
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    # with the template pass, as `reasonrl data dedup` runs it
    near = dedup.near_duplicates(
        texts, names, 0.8, skip=[r.index for r in exact], groups=["gsm8k"] * len(texts)
    )
    t_near = time.perf_counter() - t0
    figures["dedup exact rows/s"] = args.rows / t_exact
    figures["dedup MinHash LSH rows/s"] = args.rows / t_near
    figures["dedup removed (exact, near)"] = (len(exact), len(near))

    from datasketch import MinHash

    sample = texts[:5000]
    t0 = time.perf_counter()
    for t in sample:
        m = MinHash(num_perm=128, seed=1)
        for s in dedup.shingles(t):
            m.update(s)
    plain = len(sample) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    MinHash.bulk([dedup.shingles(t) for t in sample], num_perm=128, seed=1)
    bulk = len(sample) / (time.perf_counter() - t0)
    figures["MinHash signatures rows/s: plain update loop / our bulk path"] = (plain, bulk, bulk / plain)

    t0 = time.perf_counter()
    template = dedup.template_ngrams(evals, ["eval"] * len(evals), 8, 0.05)  # as `data decontaminate` does
    removed = dedup.contaminated(
        texts, evals, [f"eval {j}" for j in range(len(evals))], n=8, template=template
    )
    t_dec = time.perf_counter() - t0
    figures[f"decontaminate {args.rows} rows vs {args.eval_rows} eval rows (s)"] = t_dec
    figures["decontaminated rows (planted 1%)"] = len(removed)
    for k, v in figures.items():
        if isinstance(v, tuple):
            print(f"{k}: " + ", ".join(f"{x:,.1f}" if isinstance(x, float) else str(x) for x in v))
        else:
            print(f"{k}: {v:,.1f}" if isinstance(v, float) else f"{k}: {v}")


if __name__ == "__main__":
    main()
