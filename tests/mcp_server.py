"""An MCP server for the tests, in plain JSON-RPC (the protocol, no SDK): tools add (a + b, or x + 1; its name is
argv[1] where given), fail (the server says it failed), pid, slow (sleeps s seconds) and answer (writes an
answer). `python mcp_server.py [NAME]` serves over stdio, one request at a time; `http_server(token)` serves
streamable HTTP (plain JSON replies) on a local port from a thread, each request needing the bearer token
(`python mcp_server.py --http TOKEN`: from a process of its own, its URL printed first)."""

from __future__ import annotations

import json
import os
import sys
import time


def tools(add: str) -> list[dict]:
    number = {"type": "integer"}
    return [
        {"name": add, "description": "Add two numbers.", "inputSchema": {
            "type": "object", "properties": {"a": number, "b": number}, "required": ["a", "b"]}},
        {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "pid", "description": "This server's process.", "inputSchema": {"type": "object"}},
        {"name": "slow", "description": "Sleep.", "inputSchema": {"type": "object"}},
        {"name": "answer", "description": "Says the answer.", "inputSchema": {"type": "object"}},
    ]  # fmt: skip


def _text(t: str, error: bool = False) -> dict:
    return {"content": [{"type": "text", "text": t}], "isError": error}


def answer(req: dict, add: str = "add") -> dict | None:
    """The JSON-RPC response to `req`, or None for a notification."""
    method, id_ = req.get("method"), req.get("id")
    if id_ is None:
        return None
    result, error = None, None
    if method == "initialize":
        result = {"protocolVersion": req["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "test", "version": "1"}}  # fmt: skip
    elif method == "tools/list":
        result = {"tools": tools(add)}
    elif method == "tools/call":
        name, args = req["params"]["name"], req["params"].get("arguments") or {}
        if name == add:  # (a + b; or x + 1, for a caller of add_one)
            result = _text(str(args["a"] + args["b"]) if "a" in args else str(int(args["x"]) + 1))
        elif name == "fail":
            result = _text("the service is down", error=True)
        elif name == "pid":
            result = _text(str(os.getpid()))
        elif name == "slow":
            time.sleep(float(args.get("s", 0)))
            result = {"content": [{"type": "image", "data": "", "mimeType": "image/png"},
                                  {"type": "text", "text": "slept"}], "isError": False}  # fmt: skip
        else:
            result = _text("it is \\boxed{7}")
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"no method {method}"}
    return {"jsonrpc": "2.0", "id": id_, **({"error": error} if error else {"result": result})}


def http_server(token: str):
    """A streamable-HTTP MCP server on 127.0.0.1 (a free port) in a daemon thread; returns (url, server:
    call `shutdown()`). Requests without `Authorization: Bearer <token>` get 401."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: dict | None = None, headers: dict | None = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(code)
            for k, v in {**({"Content-Type": "application/json"} if body else {}), **(headers or {})}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if self.headers.get("Authorization") != f"Bearer {token}":
                return self._send(401, {"error": "unauthorized"})
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            got = answer(req)
            if got is None:
                return self._send(202)
            first = req.get("method") == "initialize"
            return self._send(200, got, {"Mcp-Session-Id": "s1"} if first else None)

        def do_GET(self):  # no stream of the server's own messages
            self._send(405)

        def do_DELETE(self):
            self._send(200)

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # (a round's calls arrive at once)

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/mcp", server


def main() -> None:
    if sys.argv[1:2] == ["--http"]:  # `--http TOKEN`: serve HTTP until killed, the URL on the first line
        url, server = http_server(sys.argv[2])
        print(url, flush=True)
        server.serve_forever()  # (beside the thread's: both serve)
        return
    add = sys.argv[1] if len(sys.argv) > 1 else "add"
    for line in sys.stdin:
        got = answer(json.loads(line), add)
        if got is not None:
            sys.stdout.write(json.dumps(got) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
