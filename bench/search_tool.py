"""The cost of the search tool (`rollout.tools.names: [search]`): queries per second answered by
`reasonrl retriever` (BM25 over a synthetic corpus, over HTTP with Search-R1's API) against bare `bm25s`
on the same index and queries, and one whole round of the tool loop (find the call, one request for every
sample's query, tokenize the passages, resume) for `--samples` samples with an engine that costs nothing.
Ends with one JSON line.

    python bench/search_tool.py [--passages 100000] [--queries 256] [--samples 64] [--topk 3]
"""

from __future__ import annotations

import argparse
import json
import random
import time


class _Instant:
    """An engine whose segments cost nothing: the first is a query, the one after the passages the answer."""

    def __init__(self, tok, queries):
        self.tok, self.queries, self.i = tok, queries, 0

    def generate(self, prompts, params):
        from reasonrl.types import Completion

        out = []
        for p in prompts:
            if "<information>" in self.tok.decode(p):
                text = "<answer> x </answer>"
            else:
                text, self.i = f"<search>{self.queries[self.i % len(self.queries)]}</search>", self.i + 1
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            out.append([Completion(ids, self.tok.decode(ids), [0.0] * len(ids)) for _ in range(params.n)])
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--topk", type=int, default=3)
    args = ap.parse_args()
    from reasonrl.config import SearchToolConfig, ToolsConfig
    from reasonrl.models.tiny import build_tokenizer
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.retrieval_server import Index, serving
    from reasonrl.rollout.search_tool import search
    from reasonrl.rollout.tools import ToolRolloutEngine

    rng = random.Random(0)
    words = [f"w{i}" for i in range(20_000)]  # a Zipf-like vocabulary: a few common words, many rare ones
    weights = [1 / (i + 1) for i in range(len(words))]
    docs = [{"id": str(i), "contents": f'"t{i}"\n' + " ".join(rng.choices(words, weights, k=60))}
            for i in range(args.passages)]  # fmt: skip
    queries = [" ".join(rng.choices(words, weights, k=6)) for _ in range(args.queries)]
    t0 = time.perf_counter()
    index = Index(docs)
    index_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    index.search(queries, args.topk)
    bare_qps = len(queries) / (time.perf_counter() - t0)

    with serving(index) as url:
        cfg = SearchToolConfig(url=url, topk=args.topk)
        t0 = time.perf_counter()
        answers = search(cfg, [[q] for q in queries], "search_r1")
        http_qps = len(queries) / (time.perf_counter() - t0)
        assert all(status == "success" for _, status in answers)

        tok = build_tokenizer(["<search> </search> <information> </information> <answer> </answer> Doc Title "
                               + " ".join(words[:200])], 400)  # fmt: skip
        tools = ToolsConfig(
            enabled=True, format="search_r1", names=["search"], search=cfg, max_output_chars=4000
        )
        engine = ToolRolloutEngine(_Instant(tok, queries), tok, tools)
        prompts = [tok("Q", add_special_tokens=False)["input_ids"]] * args.samples
        t0 = time.perf_counter()
        groups = engine.generate(prompts, SamplingParams(max_new_tokens=4000))
        round_s = time.perf_counter() - t0
        assert all(g[0].tool_calls == ("success",) for g in groups)
    result = {"passages": args.passages, "queries": len(queries), "topk": args.topk, "index_s": round(index_s, 2),
              "bare_bm25s_qps": round(bare_qps, 1), "service_qps": round(http_qps, 1),
              "service_vs_bare": round(http_qps / bare_qps, 3), "samples": args.samples,
              "round_s": round(round_s, 3)}  # fmt: skip
    print(f"index {args.passages} passages: {index_s:.1f} s; queries/s: bare bm25s {bare_qps:.0f}, through the "
          f"service {http_qps:.0f} ({http_qps / bare_qps:.2f}x); one round of {args.samples} searching samples: "
          f"{round_s:.3f} s")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
