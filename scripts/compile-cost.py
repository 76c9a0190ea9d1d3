#!/usr/bin/env python3
"""What the macros cost a downstream build.

Generates two crates side by side in one scratch workspace, with their dependencies prebuilt:

- `tools-capability`: 100 small tool structs, each with `#[derive(Serialize, Deserialize,
  Capability)]` and a `#[capability(...)]` attribute (read-only and mutating mixed), and 10
  agents (advisors and operators) binding them: what a crate of tools looks like with this
  library.
- `tools-serde`: the same 100 structs with `#[derive(Serialize, Deserialize)]` only.

For each it measures, with `cargo build` (dev profile), the rebuild after touching the source and
the rebuild after `cargo clean -p <crate>`, as the median of N runs, and prints the ratios
capability/serde. Targets: at most 1.4x on the touch rebuild and 2x on the clean rebuild.
It also reports the clean build time of `capability-derive` and its dependencies.

Usage: scripts/compile-cost.py [--runs N] [--dir DIR]
"""

import argparse
import shutil
import subprocess
from pathlib import Path

from compile_cost_common import ROOT, median_of, run, touch_rebuild, workspace
TOOLS = 100
AGENTS = 10


def tool_source(i: int, with_capability: bool) -> str:
    derives = "Serialize, Deserialize, Capability" if with_capability else "Serialize, Deserialize"
    lines = [f"/// Tool number {i}: does one thing to one resource."]
    lines.append(f"#[derive({derives})]")
    if with_capability:
        if i % 2 == 0:
            lines.append(
                f'#[capability(read_only, idempotent, provider = "svc{i % 7}", '
                f'scopes = ["svc{i % 7}:read"])]'
            )
        else:
            lines.append(
                f'#[capability(destructive = {str(i % 3 == 0).lower()}, provider = "svc{i % 7}", '
                f'scopes = ["svc{i % 7}:write"])]'
            )
    lines.append(f"pub struct Tool{i} {{")
    lines.append("    pub id: u64,")
    lines.append("    pub name: String,")
    lines.append("    pub labels: Vec<String>,")
    lines.append("    pub dry_run: Option<bool>,")
    lines.append("}")
    return "\n".join(lines) + "\n"


def agent_source(a: int) -> str:
    advisor = a % 2 == 0
    picks = [(a * 10 + k * 2) % TOOLS for k in range(8)]
    if advisor:
        tools = ", ".join(f"Tool{p}" for p in picks)  # even: read-only
        return f'#[advisor_agent(tools({tools}), target = "analysis")]\npub struct Agent{a};\n'
    tools = ", ".join(f"Tool{p + 1}" for p in picks)
    return f"#[agent(tools({tools}))]\npub struct Agent{a};\n"


def write_crate(dir: Path, name: str, with_capability: bool) -> None:
    (dir / "src").mkdir(parents=True, exist_ok=True)
    deps = 'serde = { version = "1", features = ["derive"] }\n'
    if with_capability:
        deps += f'capability = {{ path = "{ROOT}" }}\n'
    (dir / "Cargo.toml").write_text(
        f'[package]\nname = "{name}"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f"[dependencies]\n{deps}"
    )
    head = "#![allow(dead_code)]\nuse serde::{Deserialize, Serialize};\n"
    if with_capability:
        head += "use capability::{advisor_agent, agent, Capability};\n"
    body = "\n".join(tool_source(i, with_capability) for i in range(TOOLS))
    if with_capability:
        body += "\n" + "\n".join(agent_source(a) for a in range(AGENTS))
    (dir / "src" / "lib.rs").write_text(head + "\n" + body)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--dir", type=Path, default=ROOT / "target" / "compile-cost")
    args = parser.parse_args()

    work = args.dir
    shutil.rmtree(work, ignore_errors=True)
    env, cargo = workspace(work, {
        name: (lambda dir, name=name, ours=ours: write_crate(dir, name, ours))
        for name, ours in [("tools-capability", True), ("tools-serde", False)]
    })

    # Dependencies built once; everything timed below rebuilds the measured crate alone.
    derive_clean = run([cargo, "build", "--offline", "-p", "capability-derive"],
                       cwd=ROOT / "capability-derive",
                       env=dict(env, CARGO_TARGET_DIR=str(work / "derive-target")))
    derive_alone = median_of(
        args.runs,
        lambda: run([cargo, "clean", "--offline", "-p", "capability-derive"], cwd=ROOT,
                    env=dict(env, CARGO_TARGET_DIR=str(work / "derive-target"))),
        lambda: run([cargo, "build", "--offline", "-p", "capability-derive"], cwd=ROOT,
                    env=dict(env, CARGO_TARGET_DIR=str(work / "derive-target"))),
    )
    run([cargo, "build", "--offline", "--workspace"], cwd=work, env=env)

    figures = {}
    for crate in ["tools-serde", "tools-capability"]:
        build = [cargo, "build", "--offline", "-p", crate]
        touch = touch_rebuild(args.runs, work, crate, env, cargo)
        clean = median_of(
            args.runs,
            lambda: run([cargo, "clean", "--offline", "-p", crate], cwd=work, env=env),
            lambda: run(build, cwd=work, env=env),
        )
        figures[crate] = (touch, clean)

    st, sc = figures["tools-serde"]
    ct, cc = figures["tools-capability"]
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"compile cost, {TOOLS} tools and {AGENTS} agents, median of {args.runs} runs, {rustc}")
    print(f"  touch rebuild: serde-only {st:.2f} s, with capability {ct:.2f} s: {ct / st:.2f}x (target <= 1.4x)")
    print(f"  clean rebuild: serde-only {sc:.2f} s, with capability {cc:.2f} s: {cc / sc:.2f}x (target <= 2x)")
    print(f"  capability-derive: {derive_clean:.1f} s from scratch with its dependencies, "
          f"{derive_alone:.2f} s for the crate alone")
    deps = subprocess.run([cargo, "tree", "--offline", "-p", "capability-derive", "-e", "normal", "--prefix", "none"],
                          cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
    names = sorted({line.split(" ")[0] for line in deps if line.strip()} - {"capability-derive"})
    print(f"  capability-derive depends on {len(names)} crates: {', '.join(names)}")


if __name__ == "__main__":
    main()
