"""A stdio client of the official MCP Python SDK (`mcp`, pinned in requirements.txt), driven by the
Rust integration tests: it spawns an MCP server (for the tests, `capability gateway`), runs a list
of operations and prints one JSON line per operation on stdout, the Python twin of
`tests/mcp-servers/ts-client.mjs` over stdio. Errors of an operation are printed, not raised.

    python stdio_client.py <ops.json> <command> [args...]

ops.json: [{"op": "list"}, {"op": "call", "name": "time_get_current_time", "arguments": {...}}]

Output:
    {"op":"list","tools":["git_git_status", ...]}
    {"op":"call","name":..,"result":<CallToolResult>}
    {"op":"call","name":..,"error":{"code":..,"message":..,"data":..}}
A failure to connect prints {"op":"connect","error":{"message":..}} and exits 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation

from ops import emit, leaf, perform


async def run(ops: list[dict[str, Any]], command: str, args: list[str]) -> int:
    server = StdioServerParameters(command=command, args=args)
    connected = False
    try:
        async with Client(
            stdio_client(server),
            client_info=Implementation(name="capability-py-stdio-client", version="0.0.0"),
            cache=None,
        ) as client:
            connected = True
            for op in ops:
                kind = op.get("op")
                try:
                    done = await perform(client, op)
                    if done is None:
                        done = {"op": kind, "error": {"code": None, "message": f"unknown op {kind}", "data": None}}
                    emit(done)
                except Exception as e:  # noqa: BLE001 - every failure of an operation is reported
                    error = leaf(e)
                    if isinstance(error, MCPError):
                        detail = {"code": error.code, "message": error.message, "data": error.data}
                    else:
                        detail = {"code": None, "message": str(error) or type(error).__name__, "data": None}
                    emit({"op": kind, "name": op.get("name"), "error": detail})
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        if not connected:
            emit({"op": "connect", "error": {"message": str(leaf(e)) or type(leaf(e)).__name__}})
            return 1
        sys.stderr.write(f"stdio_client: after the operations: {type(leaf(e)).__name__}: {leaf(e)}\n")
    return 0


def main() -> None:
    if len(sys.argv) < 3:
        sys.stderr.write("usage: python stdio_client.py <ops.json> <command> [args...]\n")
        sys.exit(2)
    with open(sys.argv[1], encoding="utf-8") as f:
        ops = json.load(f)
    sys.exit(anyio.run(run, ops, sys.argv[2], sys.argv[3:]))


if __name__ == "__main__":
    main()
