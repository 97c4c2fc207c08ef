"""A stand-in OpenAI-compatible chat-completions server (http.server in a thread) for the judge's tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandIn:
    """Chat-completions stand-in. `script` is consumed one action per request, the last one repeats:
    ("reply", text) | ("status", code) | ("sleep", seconds, text) | ("raw", bytes) | ("cut", text): a reply
    cut at max_tokens (finish_reason "length") | ("hangup",): the connection closed without a reply."""

    def __init__(self):
        self.script: list[tuple] = [("reply", "Final verdict: YES")]
        self.requests: list[dict] = []
        self.inflight = self.max_inflight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append(
                        {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                    )
                    action = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                self.counted = True
                try:
                    self._act(action)
                finally:
                    self._leave()

            def _leave(self):
                """Out of the in-flight count, once: before the reply is written (a client that has its
                reply may send its next request before this thread would get past the write)."""
                if self.counted:
                    self.counted = False
                    with outer.lock:
                        outer.inflight -= 1

            def _act(self, action):
                kind = action[0]
                if kind == "hangup":
                    self.close_connection = True
                    return
                if kind == "status":
                    self.send_response(action[1])
                    self.end_headers()
                    return
                if kind == "trickle":  # slow-loris: headers, then one byte now and then, for a long time
                    self.send_response(200)
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    for _ in range(int(action[1] / 0.2)):
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:
                            return
                        time.sleep(0.2)
                    return
                if kind == "sleep":
                    time.sleep(action[1])
                text = action[-1]
                finish = "length" if kind == "cut" else "stop"
                raw = (
                    text
                    if kind == "raw"
                    else json.dumps(
                        {
                            "choices": [
                                {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
                            ]
                        }
                    ).encode()
                )
                self._leave()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):  # keep test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # client hung up on a slow reply: expected
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
