"""An OAuth client of the official MCP Python SDK (`mcp`, pinned in requirements.txt), driven by the
Rust integration tests: the Python twin of `tests/mcp-servers/ts-oauth-client.mjs`.

It connects over Streamable HTTP to an MCP server that is an OAuth resource server, with the SDK's
own client_credentials provider (`ClientCredentialsOAuthProvider`, client_secret_basic), so the SDK
does the whole discovery itself: the 401's `WWW-Authenticate: Bearer resource_metadata=...`, the
protected resource metadata (RFC 9728), the authorization server metadata (RFC 8414), then a token
request with `resource` (RFC 8707). It runs a list of operations and prints one JSON line per
operation on stdout. Errors of an operation are printed, not raised, so a test can assert on a
refusal.

    python oauth_client.py <url> <ops.json>

ops.json:
    {"client_id": "viewer-client", "client_secret": "s1", "scope": "mcp:read k8s:read",
     "issuer": "http://127.0.0.1:<port>",     the only authorization server the secret goes to
     "mode": "auto",                          optional: the SDK's Client(mode=...), "auto" (default,
                                              probes server/discover, falls back to initialize)
                                              or "legacy" (initialize only)
     "ops": [{"op": "list"}, {"op": "call", "name": "echo", "arguments": {"message": "hi"}}]}

Output:
    {"op":"list","tools":["echo", ...]}
    {"op":"call","name":"echo","result":<CallToolResult>}
    {"op":"call","name":"echo","error":{"code":..,"message":..,"data":..,"status":..}}
(`status`: the HTTP status the MCP endpoint refused the request with, e.g. 403, or null; the SDK
itself reports such a refusal as the JSON-RPC error -32603 "Server returned an error response".)
A failure to connect (including every OAuth failure while connecting) prints
{"op":"connect","error":{"message":..,"status":<HTTP status or null>,"name":..,
"oauth_error":<the token endpoint's error code, e.g. "invalid_client", or null>}} and exits 1;
otherwise the exit status is 0.

Scope: unlike the TypeScript SDK, whose client_credentials provider always requests the configured
`scope`, this SDK (2.3.0) requests the scope it discovers: the 401's WWW-Authenticate `scope`, else
the protected resource metadata's `scopes_supported`, else the authorization server's
`scopes_supported`; the configured `scope` is only used when none of those is given.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.auth import OAuthFlowError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import Implementation

from ops import emit, leaf, perform


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory: nothing outlives the process."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def usage(message: str) -> None:
    sys.stderr.write(f"oauth_client: {message}\n")
    sys.exit(2)


def connect_error(error: BaseException, status: int | None) -> dict[str, Any]:
    error = leaf(error)
    oauth_error = None
    if isinstance(error, OAuthFlowError):
        # Discovery or the token endpoint failed, not the MCP endpoint (as in the TypeScript client).
        status = None
    if isinstance(error, httpx2.HTTPStatusError):
        status = error.response.status_code
    if isinstance(error, OAuthTokenError):
        # "Token exchange failed (401): {"error":"invalid_client",...}"
        body = re.search(r"\{.*\}", str(error), re.DOTALL)
        if body:
            try:
                oauth_error = json.loads(body.group(0)).get("error")
            except (ValueError, AttributeError):
                pass
    return {
        "message": str(error) or type(error).__name__,
        "status": status,
        "name": type(error).__name__,
        "oauth_error": oauth_error,
    }


def op_error(error: BaseException, status: int | None) -> dict[str, Any]:
    error = leaf(error)
    if isinstance(error, httpx2.HTTPStatusError):
        status = error.response.status_code
    if isinstance(error, MCPError):
        return {"code": error.code, "message": error.message, "data": error.data, "status": status}
    return {"code": None, "message": str(error) or type(error).__name__, "data": None, "status": status}


class Statuses:
    """Remembers the last HTTP error status the MCP endpoint answered: the SDK turns an HTTP
    refusal into a JSON-RPC error (-32603 "Server returned an error response") without it."""

    def __init__(self, url: str) -> None:
        self.url = httpx2.URL(url)
        self.last: int | None = None

    async def hook(self, response: httpx2.Response) -> None:
        request = response.request
        if request.url.copy_with(query=None, fragment=None) == self.url and response.status_code >= 400:
            self.last = response.status_code


async def run(url: str, spec: dict[str, Any]) -> int:
    provider = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=MemoryStorage(),
        client_id=spec["client_id"],
        client_secret=spec["client_secret"],
        scope=spec.get("scope"),
        issuer=spec["issuer"],
    )
    statuses = Statuses(url)
    connected = False
    try:
        async with httpx2.AsyncClient(
            auth=provider,
            timeout=httpx2.Timeout(30, read=300),
            event_hooks={"response": [statuses.hook]},
        ) as http:
            async with Client(
                streamable_http_client(url, http_client=http),
                client_info=Implementation(name="capability-py-oauth-client", version="0.0.0"),
                mode=spec.get("mode", "auto"),
                cache=None,
            ) as client:
                connected = True
                for op in spec.get("ops", []):
                    kind = op.get("op")
                    statuses.last = None
                    try:
                        done = await perform(client, op)
                        if done is None:
                            unknown = {"code": None, "message": f"unknown op {kind}", "data": None, "status": None}
                            done = {"op": kind, "error": unknown}
                        emit(done)
                    except Exception as e:  # noqa: BLE001 - every failure of an operation is reported
                        line: dict[str, Any] = {"op": kind}
                        if "name" in op:
                            line["name"] = op["name"]
                        line["error"] = op_error(e, statuses.last)
                        emit(line)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        if not connected:
            emit({"op": "connect", "error": connect_error(e, statuses.last)})
            return 1
        # The connection broke down after the operations ran (or while closing): report, do not fail.
        sys.stderr.write(f"oauth_client: after the operations: {type(leaf(e)).__name__}: {leaf(e)}\n")
    return 0


def main() -> None:
    if len(sys.argv) != 3:
        usage("usage: python oauth_client.py <url> <ops.json>")
    url, ops_path = sys.argv[1], sys.argv[2]
    try:
        with open(ops_path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        usage(f"cannot read {ops_path}: {e}")
    for key in ("client_id", "client_secret", "issuer"):
        if not isinstance(spec.get(key), str):
            usage(f'{ops_path}: "{key}" must be a string')
    sys.exit(anyio.run(run, url, spec))


if __name__ == "__main__":
    main()
