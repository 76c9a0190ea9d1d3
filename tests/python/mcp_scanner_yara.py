"""Cisco's MCP scanner (PyPI `cisco-ai-mcp-scanner`), its static YARA mode, offline, on tool lists.

The scanner's package imports its whole engine at import time (litellm, fastapi, the MCP SDK,
tree-sitter grammars), and litellm may fetch its model price list from the network when it is
imported. Its YARA analysis needs none of that: `YaraAnalyzer` compiles the rule files shipped in
the wheel (`mcpscanner/data/yara_rules/*.yara`) with yara-python and matches them against a
tool's text. This script does exactly what the scanner's `Scanner._analyze_tool` does with the
YARA analyzer (`mcpscanner/core/scanner.py`, 4.8.7): match the rules against the description,
then against the JSON of the tool without its description (`json.dumps`), taking the rule files
from the installed wheel without importing the package.

    python mcp_scanner_yara.py <tools.json>...

Each file is a tool list (`{"tools": [...]}`), a `tools/list` result, or a corpus file
(`{"servers": [{"name": ..., "tools": [...]}]}`). One JSON line per tool:
    {"file": ..., "server": ..., "tool": ..., "matches": [{"rule": ..., "threat_type": ..., "on": "description"|"parameters"}]}
"""

import importlib.util
import json
import pathlib
import sys

import yara


def rules():
    spec = importlib.util.find_spec("mcpscanner")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("cisco-ai-mcp-scanner is not installed")
    directory = pathlib.Path(list(spec.submodule_search_locations)[0]) / "data" / "yara_rules"
    sources = {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.iterdir())
               if p.name.endswith((".yara", ".yar"))}
    if not sources:
        sys.exit(f"no YARA rules in {directory}")
    return yara.compile(sources=sources)


def servers(path):
    data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    if "servers" in data:
        return [(s.get("name", ""), s.get("tools", [])) for s in data["servers"]]
    if "result" in data:
        data = data["result"]
    return [(data.get("server", {}).get("name", "") if isinstance(data.get("server"), dict) else "",
             data.get("tools", []))]


def main(paths):
    compiled = rules()
    for path in paths:
        for server, tools in servers(path):
            for tool in tools:
                found = []
                description = tool.get("description", "")
                if description:
                    for m in compiled.match(data=description):
                        found.append({"rule": m.rule, "threat_type": m.meta.get("threat_type", ""),
                                      "on": "description"})
                rest = {k: v for k, v in tool.items() if k != "description"}
                for m in compiled.match(data=json.dumps(rest)):
                    found.append({"rule": m.rule, "threat_type": m.meta.get("threat_type", ""),
                                  "on": "parameters"})
                print(json.dumps({"file": str(path), "server": server, "tool": tool.get("name", ""),
                                  "matches": found}))


if __name__ == "__main__":
    main(sys.argv[1:])
