"""An MCP server over Streamable HTTP of revision 2026-07-28 (stateless: `server/discover`, each
request's `_meta`) for `capability-cli/tests/it/gateway_headers.rs`: it keeps the SEP-2243 headers
of every request it is sent and checks those of `tools/call` as a server must.

Tools:
- `deploy` (read-only): its `region` argument is marked `x-mcp-header: Region`; a call whose
  `Mcp-Method`, `Mcp-Name` or `Mcp-Param-Region` does not match its body is refused with HTTP
  400 and JSON-RPC error -32020, as SEP-2243 requires.
- `seen` (read-only): the headers of every `tools/call` received so far, as JSON.

Run: `python3 headers_server.py PORT` (prints `listening on port PORT` once it listens; with PORT 0, the port the system chose).
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REVISION = "2026-07-28"
TOOLS = [
    {"name": "deploy", "description": "deploy to a region",
     "inputSchema": {"type": "object", "properties": {
         "region": {"type": "string", "x-mcp-header": "Region"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "seen", "description": "the headers of the calls so far",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
]

LOCK = threading.Lock()
SEEN = []


def reply(id, result):
    return {"jsonrpc": "2.0", "id": id, "result": dict(result, resultType="complete")}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, message):
        body = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        self.do_GET()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length))
        method = message.get("method")
        if "id" not in message:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        id = message["id"]
        if method == "server/discover":
            return self.send(200, reply(id, {
                "supportedVersions": [REVISION],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "headers", "version": "1"}},
            }))
        if method == "tools/list":
            return self.send(200, reply(id, {"tools": TOOLS, "ttlMs": 0, "cacheScope": "public"}))
        if method != "tools/call":
            return self.send(404, {"jsonrpc": "2.0", "id": id,
                                   "error": {"code": -32601, "message": "Method not found"}})
        params = message.get("params", {})
        name = params.get("name")
        headers = {
            "method": self.headers.get("Mcp-Method"),
            "name": self.headers.get("Mcp-Name"),
            "region": self.headers.get("Mcp-Param-Region"),
        }
        if name == "seen":
            with LOCK:
                text = json.dumps(SEEN)
            return self.send(200, reply(id, {"content": [{"type": "text", "text": text}]}))
        region = (params.get("arguments") or {}).get("region")
        if headers != {"method": "tools/call", "name": name, "region": region}:
            return self.send(400, {"jsonrpc": "2.0", "id": id, "error": {
                "code": -32020, "message": "header mismatch: %s" % json.dumps(headers)}})
        with LOCK:
            SEEN.append(headers)
        return self.send(200, reply(id, {"content": [{"type": "text", "text": "deployed"}]}))


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("listening on port %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
