//! Generates the registry benchmark's fleet: 2,000 derived tools and 200 agents.

use std::fmt::Write;

const TOOLS: usize = 2000;
const AGENTS: usize = 200;

fn main() {
    let mut code = String::new();
    for i in 0..TOOLS {
        let read_only = i % 2 == 0;
        let flags = if read_only {
            format!("read_only, idempotent, scopes = [\"svc{}:read\"]", i % 40)
        } else {
            format!(
                "destructive = {}, scopes = [\"svc{}:write\"]",
                i % 3 == 0,
                i % 40
            )
        };
        let _ = writeln!(
            code,
            "/// Generated tool {i}.\n#[derive(capability::Capability)]\n\
             #[capability({flags}, provider = \"p{}\")]\npub struct Tool{i} {{ pub id: u64, pub name: String }}",
            i % 25
        );
    }
    for a in 0..AGENTS {
        // Advisors bind read-only (even) tools; operators bind any.
        let advisor = a % 2 == 0;
        let tools: Vec<String> = (0..10)
            .map(|k| {
                let t = (a * 10 + k * 2) % TOOLS;
                format!("Tool{}", if advisor { t } else { t + 1 })
            })
            .collect();
        let attr = if advisor {
            format!(
                "capability::advisor_agent(tools({}), target = \"analysis\")",
                tools.join(", ")
            )
        } else {
            format!("capability::agent(tools({}))", tools.join(", "))
        };
        let _ = writeln!(code, "#[{attr}]\npub struct Agent{a};");
    }
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let path = std::path::Path::new(&out).join("fleet.rs");
    std::fs::write(&path, code).expect("write the generated fleet");
    println!("cargo::rerun-if-changed=build.rs");
}
