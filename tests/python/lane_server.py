"""An MCP server over Streamable HTTP (revision 2025-11-25) for the tests of the gateway's HTTP
lane (`capability-cli/tests/it/gateway_http_lane.rs`): it says what it was sent, and behaves as a
careless or hostile server may.

Tools (all read-only):
- `said`: a text result holding the call's JSON-RPC id, `Mcp-Session-Id` and
  `MCP-Protocol-Version`, as the server received them, its arguments and `_meta`, and how many
  calls of each tool the server has had.
- `wait`: answers after `seconds`.
- `rejected`: HTTP 400 with a JSON-RPC error; `broken`: HTTP 500 with a text body.
- `progress`: on an event stream, progress for the call's token (1 then 2, the first written
  over two lines), progress for another token between them, then the result.
- `twice`: a result whose JSON writes `isError` twice (false, then true).
- `lines`: one `application/json` body of two JSON texts, one per line: a log notification,
  then the result (as the conformance project's reference server writes; JSON texts delimit
  themselves). `lines_broken`: the notification, then text that is not JSON.
- `ask`: answers on an event stream: a priming event without data, a log notification, a
  `roots/list` request of its own; once the client's answer to it is POSTed, the call's
  result holds that answer.
- `slow`: an event stream that says nothing until the call is cancelled
  (`notifications/cancelled` naming its id), then ends without an answer.
- `cancelled`: the request ids of every `notifications/cancelled` received so far.

Run: `python3 lane_server.py PORT` (prints `listening on port PORT` once it listens; with PORT 0, the port the system chose).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SESSION = "lane-session-1"
TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}}
    for name in ["said", "twice", "ask", "slow", "cancelled", "wait", "progress", "rejected",
                 "broken", "lines", "lines_broken"]
]

LOCK = threading.Condition()
ANSWERS = {}
CANCELLED = []
CALLS = {}


def result(id, text):
    return {"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}}


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

    def whole(self, message):
        body = json.dumps(message).encode() if isinstance(message, dict) else message
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Mcp-Session-Id", SESSION)
        self.end_headers()
        self.wfile.write(body)

    def stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def raw(self, chunk):
        self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        self.wfile.flush()

    def event(self, data):
        self.raw(("data: %s\n\n" % data).encode())

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length))
        method = message.get("method")
        if method is None:
            with LOCK:
                ANSWERS[json.dumps(message.get("id"))] = message
                LOCK.notify_all()
            return self.empty(202)
        if "id" not in message:
            if method == "notifications/cancelled":
                with LOCK:
                    CANCELLED.append(message["params"]["requestId"])
                    LOCK.notify_all()
            return self.empty(202)
        id = message["id"]
        if method == "initialize":
            return self.whole({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "lane", "version": "1"}}})
        if method == "tools/list":
            return self.whole({"jsonrpc": "2.0", "id": id, "result": {"tools": TOOLS}})
        if method == "ping":
            return self.whole({"jsonrpc": "2.0", "id": id, "result": {}})
        if method != "tools/call":
            return self.whole({"jsonrpc": "2.0", "id": id,
                               "error": {"code": -32601, "message": "Method not found"}})
        name = message["params"]["name"]
        with LOCK:
            CALLS[name] = CALLS.get(name, 0) + 1
        if name == "wait":
            time.sleep(float(message["params"]["arguments"]["seconds"]))
            return self.whole(result(id, "waited"))
        if name == "said":
            return self.whole(result(id, json.dumps({
                "id": id,
                "session": self.headers.get("Mcp-Session-Id"),
                "version": self.headers.get("MCP-Protocol-Version"),
                "arguments": message["params"].get("arguments"),
                "meta": message["params"].get("_meta"),
                "calls": CALLS,
            })))
        if name == "twice":
            return self.whole(
                ('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"isError":false,"isError":true}}'
                 % json.dumps(id)).encode())
        if name in ("lines", "lines_broken"):
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"level": "info", "data": "before the answer"}})
            after = json.dumps(result(id, "lined")) if name == "lines" else "not json at all"
            return self.whole(("%s\n%s\n" % (note, after)).encode())
        if name == "rejected":
            body = json.dumps({"jsonrpc": "2.0", "id": id,
                               "error": {"code": -32602, "message": "rejected: bad arguments"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if name == "broken":
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "4")
            self.end_headers()
            return self.wfile.write(b"oops")
        if name == "cancelled":
            with LOCK:
                return self.whole(result(id, json.dumps(CANCELLED)))
        self.stream()
        if name == "ask":
            self.raw(b"id: primed\ndata:\n\n")
            self.event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                   "params": {"level": "info", "data": "asking"}}))
            asked = "roots-" + json.dumps(id)
            self.event(json.dumps({"jsonrpc": "2.0", "id": asked, "method": "roots/list"}))
            with LOCK:
                LOCK.wait_for(lambda: json.dumps(asked) in ANSWERS, timeout=20)
                answer = ANSWERS.get(json.dumps(asked))
            self.event(json.dumps(result(id, json.dumps(answer))))
        elif name == "progress":
            token = message["params"].get("_meta", {}).get("progressToken")
            note = lambda t, n: {"jsonrpc": "2.0", "method": "notifications/progress",
                                 "params": {"progressToken": t, "progress": n, "total": 2}}
            self.raw(("data: %s\n\n" % json.dumps(note(token, 1), indent=1).replace("\n", "\ndata: ")).encode())
            self.event(json.dumps(note("someone-else", 1)))
            self.event(json.dumps(note(token, 2)))
            self.event(json.dumps(result(id, "done")))
        elif name == "slow":
            with LOCK:
                LOCK.wait_for(lambda: id in CANCELLED, timeout=30)
        self.end_stream()


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
