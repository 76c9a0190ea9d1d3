#!/usr/bin/env python3
"""The user-space instructions `capability gateway` runs per stdio `tools/call`, counted exactly.

On a shared machine the latency and CPU figures of `gateway_overhead` move by tens of percent
between runs; valgrind's callgrind counts instructions, which do not. The gateway runs under
`valgrind --tool=callgrind` in front of `server-everything` (role `operator`, audited to a JSON
Lines file); this script initializes, lists, makes 200 `echo` calls with counting off, then
CALLS calls with it on, and prints the instructions per call, with and without SHA-256's block
function (valgrind runs the portable SHA-256; natively the SHA instructions do that work, so it
is reported apart).

Needs valgrind (`apt-get install valgrind`) and the reference servers, which the tests and
benches install into `target/mcp-servers` (`cargo bench -p capability-cli --bench
gateway_overhead` once).

Usage: scripts/gateway-instructions.py [--calls N] [BINARY ...]   (default target/release/capability)
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = (
    ROOT
    / "target/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
SHA_BLOCK = "sha2::sha256::soft"


def count(binary: Path, calls: int, scratch: Path) -> tuple[int, int]:
    """Instructions over `calls` calls: all of them, and SHA-256's block function's."""
    policy = scratch / "policy.toml"
    policy.write_text(
        '[roles.operator]\nceiling = "unrestricted"\nallow = ["everything/*"]\n\n'
        f'[servers.everything]\ncommand = ["node", {json.dumps(str(EVERYTHING))}, "stdio"]\n'
        'trust = "trusted"\nprefix = ""\n'
    )
    out = scratch / f"callgrind.{binary.name}.out"
    gateway = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         str(binary), "gateway", "--policy", str(policy), "--role", "operator",
         "--audit", str(scratch / f"{binary.name}.jsonl")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )

    def send(message: dict) -> None:
        gateway.stdin.write((json.dumps(message, separators=(",", ":")) + "\n").encode())
        gateway.stdin.flush()

    def answer(id_: int) -> dict:
        while True:
            line = gateway.stdout.readline()
            if not line:
                sys.exit(f"{binary}: the gateway ended before answering {id_}")
            message = json.loads(line)
            if message.get("id") == id_:
                return message

    def echo(id_: int) -> None:
        send({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"message": "bench"}}})
        if "result" not in answer(id_):
            sys.exit(f"{binary}: call {id_} was not answered with a result")

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "instructions", "version": "1"}}})
    answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    answer(2)
    for n in range(200):
        echo(10 + n)
    control = ["callgrind_control", "-i"]
    subprocess.run(control + ["on", str(gateway.pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for n in range(calls):
        echo(1000 + n)
    subprocess.run(control + ["off", str(gateway.pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    gateway.stdin.close()
    gateway.wait()
    report = subprocess.run(["callgrind_annotate", str(out)], check=True,
                            capture_output=True, text=True).stdout
    total = sha = 0
    for line in report.splitlines():
        words = line.split()
        if not words or not words[0].replace(",", "").isdigit():
            continue
        value = int(words[0].replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = value
        elif SHA_BLOCK in line:
            sha += value
    return total, sha


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("binaries", nargs="*", type=Path,
                        default=[ROOT / "target/release/capability"])
    args = parser.parse_args()
    if not EVERYTHING.exists():
        sys.exit(f"{EVERYTHING} is missing: run the gateway_overhead bench once to install it")
    with tempfile.TemporaryDirectory() as scratch:
        for binary in args.binaries:
            total, sha = count(binary, args.calls, Path(scratch))
            print(f"{binary}: {total / args.calls:,.0f} instructions a call, "
                  f"{(total - sha) / args.calls:,.0f} without SHA-256's block function "
                  f"({args.calls} calls)")


if __name__ == "__main__":
    main()
