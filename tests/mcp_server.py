"""A stdio MCP server for the tests, in plain JSON-RPC (the protocol, no SDK): tools add (a + b, or x + 1;
its name is argv[1] where given), fail (the server says it failed), pid, slow (sleeps s seconds) and answer
(writes an answer); one request at a time."""

import json
import os
import sys
import time

ADD = sys.argv[1] if len(sys.argv) > 1 else "add"  # (the add tool's name)
TOOLS = [
    {
        "name": ADD,
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "pid", "description": "This server's process.", "inputSchema": {"type": "object"}},
    {"name": "slow", "description": "Sleep.", "inputSchema": {"type": "object"}},
    {"name": "answer", "description": "Says the answer.", "inputSchema": {"type": "object"}},
]


def reply(id_, result=None, error=None):
    msg = {"jsonrpc": "2.0", "id": id_, **({"error": error} if error else {"result": result})}
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def text(t, error=False):
    return {"content": [{"type": "text", "text": t}], "isError": error}


for line in sys.stdin:
    req = json.loads(line)
    method, id_ = req.get("method"), req.get("id")
    if id_ is None:  # a notification
        continue
    if method == "initialize":
        reply(
            id_,
            {
                "protocolVersion": req["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "test", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(id_, {"tools": TOOLS})
    elif method == "tools/call":
        name, args = req["params"]["name"], req["params"].get("arguments") or {}
        if name == ADD:  # (a + b; or x + 1, for a caller of add_one)
            reply(id_, text(str(args["a"] + args["b"]) if "a" in args else str(int(args["x"]) + 1)))
        elif name == "fail":
            reply(id_, text("the service is down", error=True))
        elif name == "pid":
            reply(id_, text(str(os.getpid())))
        elif name == "slow":
            time.sleep(float(args.get("s", 0)))
            reply(
                id_,
                {
                    "content": [
                        {"type": "image", "data": "", "mimeType": "image/png"},
                        {"type": "text", "text": "slept"},
                    ],
                    "isError": False,
                },
            )
        else:
            reply(id_, text("it is \\boxed{7}"))
    elif method == "ping":
        reply(id_, {})
    else:
        reply(id_, error={"code": -32601, "message": "no method " + method})
