"""A local stand-in for the Hugging Face Hub's write API (repo create, preupload, commit), enough for
`huggingface_hub.HfApi.create_repo` + `upload_folder` pointed at it through HF_ENDPOINT / endpoint=.
Every file is answered "regular" upload mode, so contents arrive base64 in the commit (the real Hub
sends large files through LFS / Xet instead; that path is not exercised here)."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HubStandIn:
    def __init__(self):
        self.requests: list[tuple[str, str, str | None]] = []
        self.created: list[dict] = []
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict] = []
        self.validated: list = []  # model-card metadata sent to /api/validate-yaml
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, code: int, obj) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                hub.requests.append(("GET", self.path, self.headers.get("authorization")))
                self._reply(404, {"error": f"not in the stand-in: {self.path}"})

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hub.requests.append(("POST", self.path, self.headers.get("authorization")))
                path = self.path.split("?")[0]
                parts = path.split("/")
                if path == "/api/repos/create":
                    req = json.loads(body)
                    hub.created.append(req)
                    repo = f"{req.get('organization') or 'user'}/{req['name']}"
                    hub.repos.setdefault(repo, {})
                    return self._reply(200, {"url": f"{hub.url}/{repo}"})
                if path == "/api/validate-yaml":  # the model card's front matter, as the Hub checks it
                    import yaml

                    content = json.loads(body)["content"]
                    meta = yaml.safe_load(content.split("---")[1]) if content.startswith("---") else None
                    hub.validated.append(meta)
                    if not isinstance(meta, dict):
                        return self._reply(400, {"errors": [{"message": "no YAML metadata mapping"}]})
                    return self._reply(200, {"warnings": []})
                if len(parts) == 7 and parts[:3] == ["", "api", "models"] and parts[5] == "preupload":
                    files = json.loads(body)["files"]
                    return self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                        "shouldIgnore": False} for f in files]})  # fmt: skip
                if len(parts) == 7 and parts[:3] == ["", "api", "models"] and parts[5] == "commit":
                    repo = "/".join(parts[3:5])
                    lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
                    hub.commits.append({"repo": repo, "header": lines[0]["value"]})
                    for rec in lines[1:]:
                        if rec["key"] == "file":
                            v = rec["value"]
                            hub.repos.setdefault(repo, {})[v["path"]] = base64.b64decode(v["content"])
                    return self._reply(200, {"commitUrl": f"{hub.url}/{repo}/commit/{'a' * 40}",
                                             "commitOid": "a" * 40, "pullRequestUrl": None})  # fmt: skip
                self._reply(404, {"error": f"not in the stand-in: {path}"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
