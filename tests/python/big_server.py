"""An MCP server (revision 2025-11-25) whose one tool answers with a result as large as it is
asked: for the tests of how large a message the proxy and the gateway pass on and how much of
one they hold.

`big` takes `size` (the length of the result's text), `pad` (ignored: a large call) and, over
HTTP, `as`: `json` (one JSON body with a Content-Length), `chunked` (a JSON body without one)
or `sse` (one server-sent event); over HTTP the result is written as it is sent, never held.

Run: `python3 big_server.py PORT` (Streamable HTTP, no stream of its own; it prints
`listening on port PORT` once it listens) or `python3 big_server.py --stdio`.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = [
    {
        "name": "big",
        "description": "A text result of `size` bytes.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "as": {"type": "string"},
                "pad": {"type": "string"},
            },
            "required": ["size"],
        },
        "annotations": {"readOnlyHint": True},
    }
]

CHUNK = b"x" * (1024 * 1024)


def answer(message):
    """The answer to a request other than a call."""
    method = message.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "big", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"],
                "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def stdio():
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        if message["method"] == "tools/call":
            size = int(message["params"].get("arguments", {}).get("size", 0))
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "result": {"content": [{"type": "text", "text": "x" * size}]}}
        else:
            reply = answer(message)
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.empty(405)

    def do_DELETE(self):
        self.empty(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length))
        if "id" not in message:
            return self.empty(202)
        if message.get("method") == "tools/call":
            return self.big(message["id"], message["params"].get("arguments", {}))
        self.whole(json.dumps(answer(message)).encode())

    def whole(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Mcp-Session-Id", "big-session")
        self.end_headers()
        self.wfile.write(body)

    def big(self, id, arguments):
        size = int(arguments["size"])
        shape = arguments.get("as", "json")
        head = ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"'
                % json.dumps(id)).encode()
        tail = b'"}]}}'
        if shape == "sse":
            head, tail = b"event: message\ndata: " + head, tail + b"\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if shape == "sse" else "application/json")
        if shape == "json":
            self.send_header("Content-Length", str(len(head) + size + len(tail)))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunked = shape != "json"

        def send(data):
            if chunked:
                self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            else:
                self.wfile.write(data)

        try:
            send(head)
            left = size
            while left > 0:
                part = CHUNK[: min(left, len(CHUNK))]
                send(part)
                left -= len(part)
            send(tail)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            # The client stopped reading: what it was sent is all it gets.
            self.close_connection = True


def main():
    if sys.argv[1] == "--stdio":
        return stdio()
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
