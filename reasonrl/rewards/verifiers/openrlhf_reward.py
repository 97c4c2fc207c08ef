"""OpenRLHF's remote rewards, used as they are: the verifiers `openrlhf_function` (a Python file defining
`reward_func(queries, prompts, labels, **kwargs)`, what `--remote_rm_url /path/reward_func.py` loads) and
`openrlhf_remote` (an HTTP reward server, what `--remote_rm_url http://host:port/get_reward` posts to:
OpenRLHF's `serve_rm.py` or one's own). `reasonrl convert openrlhf` routes every row to one of them.

Owns: the two verifiers, the texts OpenRLHF hands a reward (`texts`: the query is the prompt as the policy
saw it followed by the response; the prompt; the label, the row's ground truth), reading what comes back
(`read_rewards`: a mapping with `rewards`, optionally `scores` in [0, 1], which reasonrl logs as
correctness), the server's HTTP call (POST {"query": [...], "prompts": [...], "labels": [...]}, the rows
split evenly over comma-separated URLs, as OpenRLHF does; retried, each attempt within `timeout_s`), and
the checks before any work (the file imports and defines `reward_func`; the server accepts a connection
and answers a test row with one number: `services` / `probe`).
Does not own: loading a Python file (`user_code.load_function`), rendering prompts
(`data.prompts.encode_prompt`), where the calls run (`rewards.runner`: the file's calls one per pool task
with the time limit of any verifier, as OpenRLHF calls it one query at a time; the server's in one call per
batch, `run_mode = "batch"`).

Options: `path` / `url`; `tokenizer`: the policy's model path, whose chat template renders the prompt
(OpenRLHF's `--apply_chat_template`; the converter sets it to the actor's path); without one the prompt
is its plain text. The query has no end-of-sequence token (OpenRLHF's decodes the generated one too).
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from reasonrl.network import post_json
from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem

THINK = "<think>"


@lru_cache(maxsize=4)
def policy_tokenizer(path: str):
    from transformers import AutoTokenizer

    from reasonrl.models.hub import is_hub_id, offline_unless_reachable

    offline_unless_reachable(path)  # a hub id while the hub is down loads from the cache, not after a timeout
    return AutoTokenizer.from_pretrained(path if is_hub_id(path) else str(Path(path).expanduser()))


def texts(response: str, problem: Problem, tokenizer: str = "") -> tuple[str, str, Any]:
    """(query, prompt, label) as OpenRLHF gives them to a reward: the prompt as the policy saw it (its
    tokens decoded, special tokens kept), the query that prompt followed by the response."""
    from reasonrl.data.prompts import encode_prompt, plain_text

    if tokenizer:
        tok = policy_tokenizer(tokenizer)
        prompt = tok.decode(encode_prompt(tok, problem), skip_special_tokens=False)
    else:
        prompt = plain_text(problem)
    if response.startswith(THINK) and prompt.rstrip().endswith(THINK):  # the think block the prompt opened
        response = response[len(THINK) :]
    return prompt + response, prompt, problem.ground_truth


def _numbers(value: Any, n: int, what: str) -> list[float]:
    if hasattr(value, "tolist"):  # a tensor / array, as OpenRLHF's examples return
        value = value.tolist()
    values = value if isinstance(value, (list, tuple)) else [value]
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} values for {n} queries")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{what} holds {v!r}, not a finite number")
        out.append(float(v))
    return out


def read_rewards(value: Any, n: int) -> list[RewardResult]:
    """What a reward function or server returned for `n` queries: a mapping with `rewards` (the reward)
    and optionally `scores` (0..1: kept as the correctness reasonrl logs; else the reward is)."""
    if not isinstance(value, dict) or "rewards" not in value:
        keys = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise ValueError(f"expected a mapping with 'rewards' (and optionally 'scores'), got {keys}")
    rewards = _numbers(value["rewards"], n, "'rewards'")
    scores = _numbers(value["scores"], n, "'scores'") if value.get("scores") is not None else rewards
    return [RewardResult(r, {"extracted": None, "reason": "scored", "correctness": min(max(s, 0.0), 1.0)})
            for r, s in zip(rewards, scores)]  # fmt: skip


@VERIFIERS.register("openrlhf_function")
def openrlhf_function(
    response: str, problem: Problem, path: str | None = None, tokenizer: str = ""
) -> RewardResult:
    """`reward_func` of the file `path` called as OpenRLHF calls it, on this one row."""
    from reasonrl.user_code import load_function

    query, prompt, label = texts(response, problem, tokenizer)
    return read_rewards(load_function(str(path), "reward_func")([query], [prompt], [label]), 1)[0]


def _check_function(options: dict[str, Any]) -> None:
    """The file exists, imports and defines `reward_func` (when the recipe is read)."""
    from reasonrl.user_code import load_function

    if not options.get("path") or not isinstance(options["path"], str):
        raise ValueError(
            f"option 'path' (the Python file defining reward_func) is required, got {options.get('path')!r}"
        )
    load_function(str(options["path"]), "reward_func")


openrlhf_function.check_options = _check_function  # type: ignore[attr-defined]


def _urls(url: str) -> list[str]:
    return [u.strip() for u in url.split(",") if u.strip()]


def _post(url: str, payload: dict, timeout_s: float, retries: int) -> Any:
    """POST `payload` as JSON; the decoded JSON reply. Connection errors, timeouts and HTTP 5xx / 429 are
    tried again (`retries` more times, 1 s apart), any other answer fails at once (ValueError)."""
    data = json.dumps(payload).encode()
    failure = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(1.0)
        try:
            raw = post_json(url, data, timeout_s)
        except urllib.error.HTTPError as e:
            if e.code != 429 and e.code < 500:
                raise ValueError(f"{url}: http {e.code}") from None
            failure = f"http {e.code}"
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
            failure = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
        else:
            try:
                return json.loads(raw)
            except ValueError:
                raise ValueError(f"{url}: the reply is not JSON: {raw[:200]!r}") from None
    raise ValueError(f"{url}: no reply in {retries + 1} attempts ({failure})")


def score_remote(responses: list[str], problems: list[Problem], url: str | None = None, tokenizer: str = "",
                 timeout_s: float = 180.0, retries: int = 4) -> list[RewardResult]:  # fmt: skip
    """The server's rewards for a batch: the rows split evenly over the URLs, one request each."""
    rows = [texts(r, p, tokenizer) for r, p in zip(responses, problems)]
    urls = _urls(str(url or ""))
    size = max(1, math.ceil(len(rows) / len(urls)))
    out: list[RewardResult] = []
    for i, u in enumerate(urls):
        part = rows[i * size : (i + 1) * size]
        if part:
            reply = _post(u, {"query": [q for q, _, _ in part], "prompts": [p for _, p, _ in part],
                              "labels": [lab for _, _, lab in part]}, timeout_s, retries)  # fmt: skip
            out += read_rewards(reply, len(part))
    return out


@VERIFIERS.register("openrlhf_remote")
def openrlhf_remote(response: str, problem: Problem, url: str | None = None, tokenizer: str = "", timeout_s: float = 180.0,
                    retries: int = 4) -> RewardResult:  # fmt: skip
    """The server's reward for one row (the runner sends a whole batch: `score_remote`)."""
    return score_remote([response], [problem], url, tokenizer, timeout_s, retries)[0]


def _check_remote(options: dict[str, Any]) -> None:
    url = options.get("url")
    urls = _urls(url) if isinstance(url, str) else []
    if not urls:
        raise ValueError(
            f"option 'url' (the reward server, e.g. http://host:5000/get_reward) is required, got {url!r}"
        )
    bad = [u for u in urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ValueError(f"option 'url': {bad[0]!r} is not an http(s) URL")
    if options.get("timeout_s", 1.0) <= 0:
        raise ValueError(f"option 'timeout_s' must be > 0, got {options['timeout_s']!r}")


def _services(options: dict[str, Any], problems: Sequence[Problem]) -> dict[str, str]:  # noqa: ARG001
    return {
        u: "the reward server (reward.options.openrlhf_remote.url)"
        for u in _urls(str(options.get("url", "")))
    }


def _probe(options: dict[str, Any], problems: Sequence[Problem]) -> list[str]:
    """Each server answers the first routed row with an empty response by one reward (ValueError if not)."""
    lines: list[str] = []
    if not problems:
        return lines
    for u in _urls(str(options.get("url", ""))):
        one = score_remote([""], list(problems[:1]), u, str(options.get("tokenizer", "")),
                           float(options.get("timeout_s", 180.0)), int(options.get("retries", 4)))  # fmt: skip
        lines.append(f"reward server at {u} answers (a test row: reward {one[0].score:g})")
    return lines


openrlhf_remote.score_batch = score_remote  # type: ignore[attr-defined]
openrlhf_remote.run_mode = "batch"  # type: ignore[attr-defined]
openrlhf_remote.check_options = _check_remote  # type: ignore[attr-defined]
openrlhf_remote.services = _services  # type: ignore[attr-defined]
openrlhf_remote.probe = _probe  # type: ignore[attr-defined]
