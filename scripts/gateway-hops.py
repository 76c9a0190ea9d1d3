#!/usr/bin/env python3
"""Where a stdio `tools/call` spends its time, hop by hop: the relay against `capability gateway`.

`gateway_overhead` gives each path's p50; this script says where the difference lies. The
official TypeScript SDK client (`ts-latency.mjs`) calls `server-everything`'s `echo` through
the bench's plain byte relay and through the gateway in turn; while each is warm, `perf record`
traces every process's `read` and `write` system calls (kernel tracepoints, so the machine needs
no hardware counters) for a fraction of a second. Each call is then cut into four hops, timed
from the kernel's own timestamps:

  client -> server    the client's write of the request to the server's read of it
  server              the server's read of the request to its write of the answer
  server -> client    the server's write of the answer to the client's read of it
  client              the client's read of the answer to its write of the next request

and the median of each is printed, with the whole cycle's. The relay's and the gateway's
client -> server and server -> client hops differ by what the gateway does in between: the
client's line parsed, decided, its intent sealed and written before the server is written to;
the answer read strictly and written to the client; the outcome sealed and written after.

Needs `perf` (`apt-get install linux-perf`), root (system-wide tracepoints), Node.js, and what
the benches install (`cargo bench -p capability-cli --bench gateway_overhead` once: the release
binary, the bench's relay and `target/mcp-servers`).

Usage: scripts/gateway-hops.py [--calls N] [--rounds R] [BINARY ...]   (default
target/release/capability; several binaries are traced in turn, each round, to compare builds)
"""

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "target/mcp-servers"
EVERYTHING = SERVERS / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
CLIENT = SERVERS / "ts-latency.mjs"
GATEWAY = ROOT / "target/release/capability"
EVENTS = ",".join(
    f"syscalls:sys_{edge}_{call}" for call in ("read", "write") for edge in ("enter", "exit")
)
LINE = re.compile(r"\s*(.+?)\s+(\d+)/(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(\w+):\s*(.*)")
HOPS = ("client -> server", "server", "server -> client", "client")


def relay_binary() -> Path:
    """The bench's own executable, which relays with `--relay` (the newest build of it)."""
    found = [Path(p) for p in glob.glob(str(ROOT / "target/release/deps/gateway_overhead-*"))
             if not p.endswith(".d")]
    if not found:
        sys.exit("the gateway_overhead bench is not built: run "
                 "`cargo bench -p capability-cli --bench gateway_overhead` once")
    return max(found, key=lambda p: p.stat().st_mtime)


def descendants(pid: int) -> list[int]:
    """Every process under `pid`."""
    out = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        out.append(int(child))
        out.extend(descendants(int(child)))
    return out


def server_pid(client: int) -> int | None:
    """The `server-everything` process under the client (straight under it, or under the
    relay or the gateway)."""
    for pid in descendants(client):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"server-everything" in cmdline and b"--relay" not in cmdline:
            return pid
    return None


def trace(command: list[str], calls: int, scratch: Path) -> str:
    """`perf script` of half a second of the client's calls through `command`, once warm."""
    client = subprocess.Popen(["node", str(CLIENT), "--stdio", str(calls), *command],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The client starts the path, which starts the server; then 50 calls of warm-up.
        deadline = time.monotonic() + 30
        server = None
        while server is None and time.monotonic() < deadline:
            time.sleep(0.1)
            server = server_pid(client.pid)
        if server is None:
            sys.exit(f"{command[0]}: no server-everything process appeared")
        time.sleep(1.0)
        data = scratch / "perf.data"
        subprocess.run(["perf", "record", "-q", "-o", str(data), "-e", EVENTS, "--exclude-perf",
                        "-a", "--", "sleep", "0.5"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        script = subprocess.run(["perf", "script", "-i", str(data), "-F",
                                 "comm,pid,tid,cpu,time,event,trace"], check=True,
                                capture_output=True, text=True).stdout
        return f"#client {client.pid}\n#server {server}\n{script}"
    finally:
        client.wait(timeout=120)


def hops(script: str) -> tuple[dict[str, float], int]:
    """The median of each hop and of the cycle, over the calls fully inside the trace."""
    client = int(re.search(r"#client (\d+)", script).group(1))
    server = int(re.search(r"#server (\d+)", script).group(1))
    events = []
    pending_read: dict[int, int] = {}
    for line in script.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        _comm, pid, tid, at, event, rest = m.groups()
        pid, tid, at = int(pid), int(tid), float(at) * 1e6
        if pid not in (client, server):
            continue
        if event == "enter_read":
            pending_read[tid] = int(re.search(r"fd: (0x[0-9a-f]+)", rest).group(1), 16)
        elif event == "exit_read":
            fd = pending_read.pop(tid, None)
            ret = rest.strip()
            if fd is not None and ret.startswith("0x") and int(ret, 16) > 0:
                events.append((at, pid, "read", fd))
        elif event == "enter_write":
            fd = int(re.search(r"fd: (0x[0-9a-f]+)", rest).group(1), 16)
            events.append((at, pid, "write", fd))
    # The client's pipes to what it started are the descriptors it uses most (Node.js also
    # reads and writes eventfds of its own); the server's are its standard input and output.
    def busiest(kind: str) -> int:
        fds = [fd for _, pid, k, fd in events if pid == client and k == kind and fd > 2]
        if not fds:
            sys.exit(f"the client made no {kind} in the trace")
        return statistics.mode(fds)
    wanted = {(client, "write", busiest("write")): "C_write",
              (client, "read", busiest("read")): "C_read",
              (server, "read", 0): "S_read", (server, "write", 1): "S_write"}
    marks = [(at, wanted[(pid, kind, fd)]) for at, pid, kind, fd in events
             if (pid, kind, fd) in wanted]
    # Node reads its pipes on its main thread: the client's reads are its answers once the
    # calls run (one outstanding call at a time), so the cycle is C_write S_read S_write C_read.
    order = ["C_write", "S_read", "S_write", "C_read", "C_write"]
    spans: dict[str, list[float]] = {h: [] for h in HOPS}
    cycles = []
    i = 0
    while i + 4 < len(marks):
        if [k for _, k in marks[i:i + 5]] == order:
            for hop, (a, b) in zip(HOPS, zip(marks[i:i + 4], marks[i + 1:i + 5])):
                spans[hop].append(b[0] - a[0])
            cycles.append(marks[i + 4][0] - marks[i][0])
            i += 4
        else:
            i += 1
    if not cycles:
        sys.exit("no whole call found in the trace")
    medians = {h: statistics.median(v) for h, v in spans.items()}
    medians["cycle"] = statistics.median(cycles)
    return medians, len(cycles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6000,
                        help="calls each client makes (the trace takes half a second of them)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("binaries", nargs="*", type=Path, default=[GATEWAY])
    args = parser.parse_args()
    for needed in (EVERYTHING, CLIENT, *args.binaries):
        if not needed.exists():
            sys.exit(f"{needed} is missing: run `cargo bench -p capability-cli --bench "
                     "gateway_overhead` once")
    if os.geteuid() != 0:
        sys.exit("system-wide tracepoints need root")
    server = ["node", str(EVERYTHING), "stdio"]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        policy = scratch / "policy.toml"
        policy.write_text(
            '[roles.operator]\nceiling = "unrestricted"\nallow = ["everything/*"]\n\n'
            f'[servers.everything]\ncommand = ["node", "{EVERYTHING}", "stdio"]\n'
            'trust = "trusted"\nprefix = ""\n')
        paths = {"relay": [str(relay_binary()), "--relay", *server]}
        for binary in args.binaries:
            name = "gateway" if len(args.binaries) == 1 else str(binary)
            paths[name] = [str(binary), "gateway", "--policy", str(policy), "--role",
                           "operator", "--audit", str(scratch / "trail.jsonl")]
        for round_ in range(args.rounds):
            for name, command in paths.items():
                (scratch / "trail.jsonl").unlink(missing_ok=True)
                medians, n = hops(trace(command, args.calls, scratch))
                each = "  ".join(f"{h} {medians[h]:5.0f}" for h in HOPS)
                print(f"round {round_ + 1} {name:<8}  {each}  cycle {medians['cycle']:5.0f} us "
                      f"({n} calls)", flush=True)


if __name__ == "__main__":
    main()
