#!/usr/bin/env python3
"""What `#[tool_capabilities]` costs an rmcp server's build.

Generates two crates side by side in one scratch workspace, with their dependencies prebuilt:

- `router-rmcp`: an rmcp server with 100 `#[tool(...)]` methods in one `#[tool_router]` impl
  block (read-only and mutating mixed, each taking its own `Parameters<ArgsN>` with
  `Deserialize` + `JsonSchema`): rmcp's macros alone.
- `router-capability`: the same server with `#[tool_capabilities]` above `#[tool_router]` and a
  `#[capability(scopes = [..], provider = "..")]` on every method.

For each it measures, with `cargo build` (dev profile), the rebuild after touching the source, as
the median of N runs, and prints the ratio capability/rmcp. Target: at most 1.3x.

Usage: scripts/compile-cost-router.py [--runs N] [--dir DIR]
"""

import argparse
import subprocess
from pathlib import Path

from compile_cost_common import ROOT, run, touch_rebuild, workspace
TOOLS = 100


def tool_source(i: int, with_capability: bool) -> str:
    read_only = i % 2 == 0
    svc = f"svc{i % 7}"
    if read_only:
        annotations = "read_only_hint = true, idempotent_hint = true, open_world_hint = false"
        scope = f"{svc}:read"
    else:
        annotations = f"destructive_hint = {str(i % 3 == 0).lower()}"
        scope = f"{svc}:write"
    lines = [f"    /// Tool number {i}: does one thing to one resource."]
    lines.append(f"    #[tool(annotations({annotations}))]")
    if with_capability:
        lines.append(f'    #[capability(scopes = ["{scope}"], provider = "{svc}")]')
    lines.append(f"    async fn tool_{i}(&self, Parameters(args): Parameters<Args{i}>) -> String {{")
    lines.append("        args.name")
    lines.append("    }")
    return "\n".join(lines) + "\n"


def args_source(i: int) -> str:
    return (
        f"#[derive(Deserialize, JsonSchema)]\npub struct Args{i} {{\n"
        "    /// The resource.\n    pub name: String,\n    pub labels: Vec<String>,\n"
        "    pub dry_run: Option<bool>,\n}\n"
    )


def write_crate(dir: Path, name: str, with_capability: bool) -> None:
    (dir / "src").mkdir(parents=True, exist_ok=True)
    deps = (
        'serde = { version = "1", features = ["derive"] }\n'
        'schemars = "1"\n'
        'rmcp = { version = "3.11", default-features = false, features = ["server", "macros"] }\n'
    )
    if with_capability:
        deps += f'capability = {{ path = "{ROOT}" }}\n'
    (dir / "Cargo.toml").write_text(
        f'[package]\nname = "{name}"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f"[dependencies]\n{deps}"
    )
    head = (
        "#![allow(dead_code)]\nuse rmcp::handler::server::wrapper::Parameters;\n"
        "use rmcp::{tool, tool_router};\nuse schemars::JsonSchema;\nuse serde::Deserialize;\n"
    )
    if with_capability:
        head += "use capability::tool_capabilities;\n"
    body = "\n".join(args_source(i) for i in range(TOOLS))
    body += "\npub struct OpsServer;\n\n"
    if with_capability:
        body += "#[tool_capabilities]\n"
    body += "#[tool_router(vis = \"pub\")]\nimpl OpsServer {\n"
    body += "\n".join(tool_source(i, with_capability) for i in range(TOOLS))
    body += "}\n"
    (dir / "src" / "lib.rs").write_text(head + "\n" + body)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--dir", type=Path, default=ROOT / "target" / "compile-cost-router")
    args = parser.parse_args()

    work = args.dir
    env, cargo = workspace(work, {
        name: (lambda dir, name=name, ours=ours: write_crate(dir, name, ours))
        for name, ours in [("router-capability", True), ("router-rmcp", False)]
    })

    # Dependencies built once; everything timed below rebuilds the measured crate alone.
    run([cargo, "build", "--offline", "--workspace"], cwd=work, env=env)

    figures = {
        crate: touch_rebuild(args.runs, work, crate, env, cargo)
        for crate in ["router-rmcp", "router-capability"]
    }

    base = figures["router-rmcp"]
    ours = figures["router-capability"]
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"compile cost of #[tool_capabilities], {TOOLS} rmcp tools, median of {args.runs} runs, {rustc}")
    print(f"  touch rebuild: rmcp macros alone {base:.2f} s, with #[tool_capabilities] {ours:.2f} s: "
          f"{ours / base:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
