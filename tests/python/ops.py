"""What the Python SDK clients of the tests share (`stdio_client.py`, `oauth_client.py`): one JSON
line per operation on stdout, the first real exception of an exception group, and the
operations themselves.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp import Client


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def leaf(error: BaseException) -> BaseException:
    """The first non-group exception of an (anyio task group's) exception group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def perform(client: Client, op: dict[str, Any]) -> dict[str, Any] | None:
    """Runs `op` (`list`; `call` with `name` and `arguments`; `resources`; `read` with `uri`;
    `prompts`; `prompt` with `name` and `arguments`); its line, or None for an op this client
    does not know. An error of the server is raised."""
    kind = op.get("op")
    if kind == "list":
        listed = await client.list_tools()
        return {"op": "list", "tools": [tool.name for tool in listed.tools]}
    if kind == "call":
        result = await client.call_tool(op["name"], op.get("arguments") or {})
        return {
            "op": "call",
            "name": op["name"],
            "result": result.model_dump(by_alias=True, mode="json", exclude_unset=True),
        }
    if kind == "resources":
        listed = await client.list_resources()
        return {"op": "resources", "resources": [[r.uri, r.name] for r in listed.resources]}
    if kind == "prompts":
        listed = await client.list_prompts()
        return {"op": "prompts", "prompts": [p.name for p in listed.prompts]}
    if kind == "read":
        read = await client.read_resource(op["uri"])
        return {"op": "read", "uri": op["uri"],
                "result": read.model_dump(by_alias=True, mode="json", exclude_unset=True)}
    if kind == "prompt":
        got = await client.get_prompt(op["name"], op.get("arguments") or {})
        return {"op": "prompt", "name": op["name"],
                "result": got.model_dump(by_alias=True, mode="json", exclude_unset=True)}
    return None
