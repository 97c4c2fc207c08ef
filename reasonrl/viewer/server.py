"""The viewer's local web server: the page (static files shipped in the package, no CDN) and a small
read-only JSON API over the runs.

Owns: routes (`/` and `/static/...`; `/api/runs`, `/api/metrics?run=I`, `/api/rollouts?run=I&...`,
`/api/evals?run=I`), query-string validation (a bad parameter is a 400 naming it), binding (127.0.0.1
by default) and the server's lifecycle. Only GET and HEAD are served; nothing is written anywhere.
Does not own: reading run files (`viewer.runs`).
"""

from __future__ import annotations

import json
import mimetypes
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from reasonrl.viewer.runs import RolloutQuery, Run, find_runs, query_rollouts

STATIC = Path(__file__).parent / "static"
MAX_PAGE = 500


class BadRequest(ValueError):
    pass


def _param(qs: dict, key: str, kind=str, default=None):
    values = qs.get(key)
    if not values or values[0] == "":
        return default
    try:
        return kind(values[0])
    except ValueError:
        raise BadRequest(f"query parameter {key}={values[0]!r} is not a valid {kind.__name__}") from None


def _run_names(paths: list[Path]) -> list[str]:
    """Each run's directory name, with its parent's prefixed where two runs share a name."""
    names = [p.name or str(p) for p in paths]
    return [f"{p.parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(paths, names)]


class ViewerApp:
    def __init__(self, paths: list[str | Path]):
        dirs = find_runs(paths)
        self.runs = [Run(path=p, name=n) for p, n in zip(dirs, _run_names(dirs))]

    def run(self, qs: dict) -> Run:
        i = _param(qs, "run", int, 0)
        if not 0 <= i < len(self.runs):
            raise BadRequest(f"query parameter run={i} is out of range (0..{len(self.runs) - 1})")
        return self.runs[i]

    def api(self, route: str, qs: dict):
        if route == "runs":
            return [{"index": i, "name": r.name, "path": str(r.path)} for i, r in enumerate(self.runs)]
        run = self.run(qs)
        if route == "metrics":
            return {"run": run.name, **run.metrics()}
        if route == "evals":
            return {"run": run.name, "tables": run.evals()}
        if route == "rollouts":
            limit = _param(qs, "limit", int, 50)
            offset = _param(qs, "offset", int, 0)
            if not 1 <= limit <= MAX_PAGE or offset < 0:
                raise BadRequest(f"query parameters need 1 <= limit <= {MAX_PAGE} and offset >= 0")
            q = RolloutQuery(step=_param(qs, "step", int), data_source=_param(qs, "data_source"),
                             min_reward=_param(qs, "min_reward", float), max_reward=_param(qs, "max_reward", float),
                             text=_param(qs, "q"), offset=offset, limit=limit)  # fmt: skip
            return {"run": run.name, **query_rollouts(run.groups(), q)}
        raise KeyError(route)


def _handler(app: ViewerApp):
    class Handler(BaseHTTPRequestHandler):
        server_version = "reasonrl-viewer"

        def log_message(self, format, *args):  # noqa: A002 - quiet: the CLI prints the address once
            pass

        def _send(self, status: int, body: bytes, ctype: str, head: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, status: int, obj, head: bool = False) -> None:
            body = json.dumps(obj, allow_nan=False, default=str).encode()
            self._send(status, body, "application/json", head)

        def do_HEAD(self):  # noqa: N802
            self.do_GET(head=True)

        def do_GET(self, head: bool = False):  # noqa: N802
            url = urlparse(self.path)
            path = url.path
            if path.startswith("/api/"):
                try:
                    self._json(200, app.api(path[5:], parse_qs(url.query)), head)
                except BadRequest as e:
                    self._json(400, {"error": str(e)}, head)
                except KeyError:
                    self._json(404, {"error": f"no API route {path}"}, head)
                return
            if path == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon", head)
                return
            if path in ("/", "/index.html"):
                target = (STATIC / "index.html").resolve()
            elif path.startswith("/static/"):
                target = (STATIC / path.removeprefix("/static/")).resolve()
            else:
                target = None
            if target is None or not target.is_relative_to(STATIC.resolve()) or not target.is_file():
                self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain", head)
                return
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            if ctype.startswith("text/") or ctype.endswith("javascript"):
                ctype += "; charset=utf-8"
            self._send(200, target.read_bytes(), ctype, head)

    return Handler


class Viewer:
    """A started viewer server (port 0 picks a free port); `url` is its address, `close()` stops it."""

    def __init__(self, paths: list[str | Path], host: str = "127.0.0.1", port: int = 0):
        from reasonrl.errors import InputError

        self.app = ViewerApp(paths)
        if not 0 <= port <= 65535:
            raise InputError(f"--port {port}: a port is 0-65535 (0 picks a free one)")
        try:
            self.httpd = ThreadingHTTPServer((host, port), _handler(self.app))
        except OSError as e:  # the port taken (another viewer?), an address not of this machine, ...
            raise InputError(f"cannot serve on {host}:{port}: {e.strerror or e}; choose another --port (0 picks "
                             "a free one) or --host") from None  # fmt: skip
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}/"
        self._thread: threading.Thread | None = None

    def start(self) -> Viewer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="reasonrl-viewer", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Viewer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
