"""A local retrieval service for the search tool (`reasonrl retriever CORPUS`): BM25, or a dense
encoder (`--dense MODEL`, `rollout.dense_retrieval`), over a passage corpus, answering Search-R1's
retrieval API, so a Search-R1 recipe runs on one machine with no other service (Search-R1 and verl ship
their own e5 / BM25 servers; this one serves the same API, and Search-R1's prebuilt e5 FAISS index).

Owns: reading the corpus (`load_corpus`: JSON lines, or any file `data.files` reads, with Search-R1's
`{"id", "contents": "title\\ntext"}` or `{"title", "text"}`; a bad row is an InputError naming the file,
row and field before anything is indexed), the BM25 index (`Index` (`bm25s`, the optional extra `reasonrl[search]`; English stop words, no
stemming), and the HTTP service over either index (`serve`): POST /retrieve `{"queries": [...], "topk": k, "return_scores":
true}` answered by `{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}` (documents
alone without return_scores), the passages that share a term with the query, best first, at most k; a
malformed request is a 400 naming what is wrong. GET / says what is served.
Does not own: calling it (`rollout.search_tool`).
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from reasonrl.errors import InputError

MAX_TOPK = 100
MAX_QUERIES = 4096  # of one request (the search tool sends at most 512)


def load_corpus(path: str) -> list[dict]:
    """The passages of a corpus file (JSON lines, or any format `data.files` reads) as `{"id", "contents"}`
    (module docstring)."""
    from reasonrl.data.files import read_rows

    docs = []
    for n, row in enumerate(read_rows(path), 1):
        if not isinstance(row, dict):
            raise InputError(f"{path}: row {n} is not an object")
        if isinstance(row.get("contents"), str):
            contents = row["contents"]
        elif isinstance(row.get("text"), str):
            contents = f'"{row.get("title", "")}"\n{row["text"]}'
        else:
            raise InputError(f"{path}: row {n} has no 'contents' or 'text' (a string)")
        docs.append({"id": str(row.get("id", len(docs))), "contents": contents})
    return docs


class Index:
    """BM25 over `docs`; `search(queries, k)` -> per query [(doc, score)], best first, score > 0."""

    kind = "BM25"

    def __init__(self, docs: list[dict]) -> None:
        try:
            import bm25s
        except ImportError:
            raise InputError("the retrieval service needs bm25s: pip install 'reasonrl[search]'") from None
        self.docs, self._bm25s = docs, bm25s
        self.bm25 = bm25s.BM25()
        self.bm25.index(self._tokens([d["contents"] for d in docs]), show_progress=False)
        self.lock = threading.Lock()

    def _tokens(self, texts: list[str]):
        return self._bm25s.tokenize(texts, stopwords="en", show_progress=False)

    def search(self, queries: list[str], k: int) -> list[list[tuple[dict, float]]]:
        k = min(k, len(self.docs))
        with self.lock:
            ids, scores = self.bm25.retrieve(self._tokens(queries), k=k, show_progress=False)
        return [[(self.docs[int(i)], float(s)) for i, s in zip(row_ids, row_scores) if s > 0]
                for row_ids, row_scores in zip(ids, scores)]  # fmt: skip


def _request(body: bytes) -> tuple[list[str], int, bool]:
    """(queries, topk, return_scores) of a request; ValueError naming what is wrong."""
    try:
        req = json.loads(body)
    except json.JSONDecodeError:
        raise ValueError("the request is not JSON") from None
    queries = req.get("queries") if isinstance(req, dict) else None
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError("'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise ValueError(f"at most {MAX_QUERIES} queries a request, got {len(queries)}")
    topk = req.get("topk", 3)
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise ValueError(f"'topk' must be an integer from 1 to {MAX_TOPK}, got {topk!r}")
    return queries, topk, bool(req.get("return_scores", False))


def serve(index: Index, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """The service over `index`, bound (port 0: any free one; `server_address` says which), not yet
    serving: call `serve_forever()` (in a thread, or as the process's work)."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: dict) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._send(200, {"service": f"reasonrl retriever ({index.kind})", "passages": len(index.docs),
                             "api": "POST /retrieve {queries, topk, return_scores}"})  # fmt: skip

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/retrieve":
                return self._send(404, {"error": f"no {self.path}: POST /retrieve"})
            try:
                queries, topk, scores = _request(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            except ValueError as e:
                return self._send(400, {"error": str(e)})
            hits = index.search(queries, topk) if queries else []
            result = [[{"document": d, "score": s} if scores else d for d, s in row] for row in hits]
            self._send(200, {"result": result})

        def log_message(self, *args) -> None:  # quiet: one line per request would flood a run's log
            pass

    return ThreadingHTTPServer((host, port), Handler)


@contextmanager
def serving(index, host: str = "127.0.0.1", port: int = 0):
    """The service over `index` in a thread for the block's duration (benches, tests, notebooks); yields
    its POST URL (rollout.tools.search.url)."""
    server = serve(index, host, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_address[1]}/retrieve"
    finally:
        server.shutdown()
        server.server_close()


def main(
    corpus: str, host: str = "127.0.0.1", port: int = 8000, dense=None, index_path: str | None = None
) -> None:
    """`reasonrl retriever`: index `corpus` (BM25, or with `dense` an `EncoderSpec`: embeddings, read from
    `index_path` where it exists, else built and written there) and serve it until interrupted."""
    if not Path(corpus).is_file():
        raise InputError(f"{corpus}: no such corpus file (JSON lines: {{id, contents}} or {{title, text}})")
    if index_path is not None and dense is None:
        raise InputError("--index is the dense retriever's passage embeddings: give --dense MODEL too")
    docs = load_corpus(corpus)
    if dense is None:
        index = Index(docs)
    else:
        from reasonrl.rollout.dense_retrieval import DenseIndex, Encoder

        index = DenseIndex(docs, Encoder(dense), index_path)
    server = serve(index, host, port)
    h, p = server.server_address[:2]
    how = index.kind if dense is None else f"dense ({dense.model})"
    print(f"reasonrl retriever: {len(docs)} passages of {corpus}, {how}; POST http://{h}:{p}/retrieve "
        f"(rollout.tools.search.url)", flush=True)  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
