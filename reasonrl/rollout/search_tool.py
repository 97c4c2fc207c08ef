"""The search tool (`rollout.tools.names: [search]`): a query the model writes goes to a retrieval
service and the passages it returns join the completion (Search-R1; verl's `SearchTool`).

Owns: `search(cfg, queries)`, which sends every query of a round in one request (per 512) to the service's
Search-R1 API (POST `{"queries": [...], "topk": k, "return_scores": true}`, answered by
`{"result": [[{"document": {"contents": "title\\ntext"}, "score": s}, ...], ...]}`, a list of passages per
query, as Search-R1's and verl's retrieval servers answer), retrying a refused request (no connection,
a 5xx, a timeout) `retries` times with a growing pause; `passages(docs, style)`, the passages as text
("search_r1": Search-R1's `Doc 1(Title: t) text` lines; "verl": verl's `Doc 1 (Title: t)` blocks,
several queries' results joined by `---`); and `probe(cfg)`, a test query before any work.
Does not own: finding calls in the text or appending outputs (`rollout.tools`), the HTTP POST
(`network.post_json`).

What the service returns is text the model reads, never a reward: verifiers score the model's own text
(`Completion.model_text`), so a passage holding `<answer>...</answer>` answers nothing (tested).
"""

from __future__ import annotations

import json
import time
import urllib.error
from typing import Any

from reasonrl.network import post_json

STATUS_RETRIED = (500, 502, 503, 504)
CHUNK = 512  # queries per request (a large round is several requests, each within the service's timeout)


def _title_and_text(doc: Any) -> tuple[str, str]:
    """A passage's (title, text): Search-R1's `{"contents": "title\\ntext"}`, or `{"title", "text"}`, or a
    plain string."""
    if isinstance(doc, dict) and isinstance(doc.get("document"), (dict, str)):
        doc = doc["document"]
    if isinstance(doc, str):
        doc = {"contents": doc}
    if not isinstance(doc, dict):
        raise ValueError(f"a passage is a {type(doc).__name__}, not an object or a string")
    if isinstance(doc.get("contents"), str):
        title, _, text = doc["contents"].partition("\n")
        return title.strip('"'), text
    if isinstance(doc.get("text"), str):
        return str(doc.get("title", "")), doc["text"]
    raise ValueError(f"a passage has no 'contents' or 'text' (keys: {sorted(doc)[:5]})")


def passages(docs: list, style: str) -> str:
    """The passages of one query as the model is shown them (module docstring)."""
    pairs = [_title_and_text(d) for d in docs]
    if style == "search_r1":
        return "".join(f"Doc {i + 1}(Title: {t}) {x}\n" for i, (t, x) in enumerate(pairs))
    return "\n\n".join(f"Doc {i + 1} (Title: {t})\n{x}" for i, (t, x) in enumerate(pairs))


def _request(cfg, queries: list[str]) -> list[list]:
    """The service's passages for each query (one request, retried); ValueError with what went wrong."""
    body = json.dumps({"queries": queries, "topk": cfg.topk, "return_scores": True}).encode()
    why = ""
    for attempt in range(cfg.retries + 1):
        if attempt:
            time.sleep(min(attempt, 5))
        try:
            reply = json.loads(post_json(cfg.url, body, cfg.timeout_s))
        except urllib.error.HTTPError as e:
            why = f"HTTP {e.code}"
            if e.code in STATUS_RETRIED:
                continue
            raise ValueError(f"the search service answered {why}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
            why = str(getattr(e, "reason", e))
            continue
        except json.JSONDecodeError:
            raise ValueError("the search service's answer is not JSON") from None
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            n = len(result) if isinstance(result, list) else "no"
            raise ValueError(f"the search service answered {n} results for {len(queries)} queries "
                             f"(Search-R1's API: {{\"result\": [[passage, ...], ...]}})")  # fmt: skip
        if not all(isinstance(r, list) for r in result):
            raise ValueError("the search service's result for a query is not a list of passages")
        return result
    raise ValueError(f"the search service did not answer after {cfg.retries + 1} tries ({why})")


def search(cfg, calls: list[list[str]], style: str) -> list[tuple[str, str]]:
    """(output, status) of each call, a call being its list of queries; every query of every call in one
    request. Status "success", or "service_error" (the output says why, as verl shows the model)."""
    queries = [q for qs in calls for q in qs]
    if not queries:
        return []
    try:
        results = [r for i in range(0, len(queries), CHUNK) for r in _request(cfg, queries[i : i + CHUNK])]
        shown = [passages(r, style) for r in results]
    except ValueError as e:
        return [(f"Search error: {e}", "service_error") for _ in calls]
    out, at = [], 0
    for qs in calls:
        text = "\n---\n".join(shown[at : at + len(qs)]).strip() or "No search results found."
        out.append((text, "success"))
        at += len(qs)
    return out


def probe(cfg) -> str:
    """One line saying the service answers a test query with passages, or ValueError saying why not."""
    if not cfg.url:
        raise ValueError("rollout.tools.search.url (the retrieval service) is not set")
    try:
        (docs,) = _request(cfg, ["test"])
        passages(docs, "verl")
    except ValueError as e:
        raise ValueError(f"rollout.tools.search.url={cfg.url}: {e}") from None
    return f"rollout.tools: the search service at {cfg.url} answers ({len(docs)} passage(s) for a test query)"
