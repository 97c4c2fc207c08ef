"""Client for the SandboxFusion HTTP `run_code` API (bytedance/SandboxFusion), for clusters that run
code on dedicated sandbox servers instead of the local bubblewrap sandbox.

Owns: `SandboxFusionClient` — round-robin over several servers, per-request timeouts, retries with
backoff (on connection errors, HTTP 429/5xx and `SandboxError` answers), and mapping a
`RunCodeResponse` to our `SandboxResult`. Does not own: local execution (`rewards.sandbox`) or what
the output means (`rewards.verifiers.code`).

Wire format (SandboxFusion `sandbox/server/sandbox_api.py`):
  POST {server}/run_code  {"code", "language": "python", "stdin", "run_timeout", "memory_limit_MB",
                           "compile_timeout", "files": {}, "fetch_files": []}
  -> {"status": "Success"|"Failed"|"SandboxError", "message",
      "run_result": {"status": "Finished"|"Error"|"TimeLimitExceeded", "execution_time",
                     "return_code", "stdout", "stderr"}, "compile_result": ..., "files": {}}
Servers come from the `urls` argument (list, or comma-separated string; "host:port" gets http://) or
else env REASONRL_SANDBOX_FUSION_URLS.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
import urllib.error
from collections.abc import Sequence

from reasonrl.network import post_json
from reasonrl.rewards.sandbox import DEFAULT_MAX_OUTPUT_BYTES, SandboxResult

ENV_URLS = "REASONRL_SANDBOX_FUSION_URLS"
_RETRY_HTTP = {408, 429, 500, 502, 503, 504}


def parse_urls(urls: str | Sequence[str] | None) -> list[str]:
    """Normalised `.../run_code` endpoints from a list or a comma-separated string (or the env)."""
    if urls is None:
        urls = os.environ.get(ENV_URLS, "")
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = []
    for item in (str(u).strip() for u in items):
        if not item:
            continue
        if "://" not in item:
            item = "http://" + item
        item = item.rstrip("/")
        out.append(item if item.endswith("/run_code") else item + "/run_code")
    return out


class SandboxFusionClient:
    """Thread-safe client; one instance can be shared by all verifier threads.

    timeout_slack_s: added to the code's run timeout for the HTTP request (queueing, transfer)
    retries:         extra attempts after the first; each attempt goes to the next server
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        retries: int = 2,
        backoff_s: float = 0.5,
        timeout_slack_s: float = 5.0,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ):
        self.urls = parse_urls(urls)
        if not self.urls:
            raise ValueError(
                f"no SandboxFusion servers: pass urls=[...] or set {ENV_URLS}=host:port[,host:port]"
            )
        if retries < 0 or backoff_s < 0 or timeout_slack_s < 0:
            raise ValueError("retries, backoff_s and timeout_slack_s must be >= 0")
        self.retries, self.backoff_s, self.timeout_slack_s = retries, backoff_s, timeout_slack_s
        self.max_output_bytes = max_output_bytes
        self._next = itertools.count()
        self._lock = threading.Lock()

    def _pick(self) -> str:
        with self._lock:
            return self.urls[next(self._next) % len(self.urls)]

    def run_python(
        self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_mb: int = 1024
    ) -> SandboxResult:
        return self.run_code(code, stdin, timeout_s, memory_mb, language="python")

    def run_code(
        self, code: str, stdin: str, timeout_s: float, memory_mb: int, language: str = "python"
    ) -> SandboxResult:
        """Run `code` remotely; never raises for transport errors (status "sandbox_error")."""
        body = json.dumps(
            {
                "code": code,
                "language": language,
                "stdin": stdin,
                "run_timeout": timeout_s,
                "compile_timeout": timeout_s,
                "memory_limit_MB": int(memory_mb),
                "files": {},
                "fetch_files": [],
            }
        ).encode("utf-8")
        start = time.monotonic()
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 10.0))
            url = self._pick()
            try:
                payload = self._post(url, body, timeout_s + self.timeout_slack_s)
            except _Retryable as e:
                errors.append(f"{url}: {e}")
                continue
            except _Fatal as e:
                errors.append(f"{url}: {e}")
                break
            if payload.get("status") == "SandboxError":
                errors.append(f"{url}: SandboxError {str(payload.get('message', ''))[:200]}")
                continue
            return self._result(payload, time.monotonic() - start)
        return SandboxResult(
            "sandbox_error", None, "", "SandboxFusion request failed: " + "; ".join(errors),
            duration_s=time.monotonic() - start, isolation="sandbox_fusion",
        )  # fmt: skip

    @staticmethod
    def _post(url: str, body: bytes, timeout: float) -> dict:
        try:
            raw = post_json(url, body, timeout)
        except urllib.error.HTTPError as e:
            kind = _Retryable if e.code in _RETRY_HTTP else _Fatal
            raise kind(f"HTTP {e.code}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
            raise _Retryable(f"{type(e).__name__}: {getattr(e, 'reason', e)}") from None
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError:
            raise _Retryable("response is not JSON") from None
        if not isinstance(payload, dict) or "status" not in payload:
            raise _Retryable("response has no 'status'")
        return payload

    def _result(self, payload: dict, duration: float) -> SandboxResult:
        run = payload.get("run_result") or payload.get("compile_result") or {}
        cap = self.max_output_bytes
        stdout, stderr = str(run.get("stdout") or ""), str(run.get("stderr") or "")
        truncated = len(stdout.encode()) > cap or len(stderr.encode()) > cap
        stdout = stdout.encode()[:cap].decode("utf-8", errors="ignore")
        stderr = stderr.encode()[:cap].decode("utf-8", errors="ignore")
        code = run.get("return_code")
        timed_out = run.get("status") == "TimeLimitExceeded"
        if timed_out:
            status = "timeout"
        elif payload.get("status") == "Success":
            status = "success"
        else:
            status = "failed"
        return SandboxResult(
            status, code, stdout, stderr, timed_out, truncated, duration, isolation="sandbox_fusion"
        )


class _Retryable(Exception):
    pass


class _Fatal(Exception):
    pass
