"""Whether a server this process needs can be reached, asked once and answered in seconds.

Owns: `address_for(url)`, the (host, port) a request to `url` connects to first (the proxy that
`HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` name for it, unless `NO_PROXY` exempts its host), and
`reachable(address)`, one TCP connection within `PROBE_TIMEOUT_S`, its answer kept for the process.
Used before the Hugging Face Hub is asked for a model (`models.hub`) and before a run logs to W&B online
(`trainer.wandb_log`): their clients retry a refused or unresolved connection for minutes. And
`wait_for(url, wait_s)`, which asks again until the server answers or `wait_s` passes (a verifier's
service that may still be starting: `rewards.services`). And `post_json(url, body, timeout_s)`, one POST of a
JSON body and its whole reply (SandboxFusion, OpenRLHF's reward servers; their callers read its errors).
Does not own: what is done with the answer, or retrying.
"""

from __future__ import annotations

import socket
import time
import urllib.parse
import urllib.request

PROBE_TIMEOUT_S = 3.0
_probed: dict[str, bool] = {}  # "host:port" -> reachable, once per process


def address_for(url: str) -> tuple[str, int]:
    """(host, port) that a request to `url` connects to first: its proxy's where one is set for it."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    proxies = urllib.request.getproxies()  # the environment's, which the HTTP clients use too
    proxy = None if urllib.request.proxy_bypass(host) else proxies.get(u.scheme) or proxies.get("all")
    if proxy:
        p = urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)
        return p.hostname or host, p.port or (443 if p.scheme == "https" else 80)
    return host, u.port or (443 if u.scheme == "https" else 80)


def _connect(address: tuple[str, int], timeout: float) -> str | None:
    """None when a TCP connection to `address` opens within `timeout`, else why not."""
    try:
        socket.create_connection(address, timeout=timeout).close()
        return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


def reachable(address: tuple[str, int], timeout: float = PROBE_TIMEOUT_S) -> bool:
    key = f"{address[0]}:{address[1]}"
    if key not in _probed:
        _probed[key] = _connect(address, timeout) is None
    return _probed[key]


def wait_for(url: str, wait_s: float, on_wait=None, poll_s: float = 1.0) -> str | None:
    """None once a connection to where a request to `url` goes (`address_for`) opens, asking again every
    `poll_s` until `wait_s` has passed; else the last reason it did not (e.g. "Connection refused").
    `on_wait(reason)` is called once, after the first refusal, when there is time left to wait."""
    address = address_for(url)
    deadline = time.monotonic() + wait_s
    waited, timeout = False, PROBE_TIMEOUT_S  # the first attempt: the whole probe timeout (a far server)
    while True:
        reason = _connect(address, timeout)
        left = deadline - time.monotonic()
        if reason is None or left <= 0:
            return reason
        if not waited and on_wait is not None:
            on_wait(reason)
        waited = True
        time.sleep(min(poll_s, left))
        timeout = min(PROBE_TIMEOUT_S, max(deadline - time.monotonic(), 0.2))  # later ones: what is left


def forget() -> None:
    """Ask again next time (a server that was down may be back)."""
    _probed.clear()


def post_json(url: str, body: bytes, timeout_s: float) -> bytes:
    """POST `body` (JSON) to `url`; the reply's bytes. Raises what urllib raises (HTTPError for a status
    of 400 or more; URLError, TimeoutError, OSError for the connection), for the caller to classify."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return resp.read()
