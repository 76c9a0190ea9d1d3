//! The official MCP conformance suite through the gateway: its runner
//! (`@modelcontextprotocol/conformance`, pinned in `tests/conformance/`) runs the server
//! scenarios each revision requires (`--requirements 2025-11-25` and `2026-07-28`) against the
//! conformance project's own reference server, straight and through `capability gateway
//! --listen` with a role that allows everything. Every scenario that passes straight must pass
//! through the gateway: a governance layer that breaks what its policy allows is one users take
//! out. And a policy that refuses something still refuses it. The runner speaks HTTP only: over
//! stdio, the same scenarios' requests are made by the official TypeScript SDK's client
//! (`tests/conformance/sdk-scenarios.mjs`), straight and through `capability gateway --role`,
//! and must get the same answers.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;

use proxy_common::{Listening, scratch};
use support::conformance::{self, Reference, Summary};

const TOKEN: &str = "the-conformance-runners-token";

const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// The gateway in front of the reference server, for the token's role: `all` (everything,
/// every server request) or `tools_only` (no server request allowed).
fn policy(dir: &Path, url: &str, role: &str) -> std::path::PathBuf {
    let hash = capability_rules::sha256_hex(TOKEN.as_bytes());
    let policy = format!(
        r#"version = "conformance"

[servers.everything]
url = "{url}"
trust = "trusted"
prefix = ""

[roles.all]
ceiling = "unrestricted"
allow = ["*"]
resources = ["*"]
prompts = ["*"]
server_requests = ["everything/sampling", "everything/elicitation", "everything/roots"]

[roles.tools_only]
ceiling = "unrestricted"
allow = ["*"]
resources = ["*"]
prompts = ["*"]

[bearer_tokens]
"sha256:{hash}" = "{role}"

# The runner sends about 170 requests a second from one token.
[http]
rate_per_second = 100000
rate_burst = 100000
"#
    );
    let path = dir.join(format!("policy-{role}.toml"));
    std::fs::write(&path, policy).expect("policy");
    path
}

/// A gateway of its own for one run (its rates and sessions start afresh).
async fn gateway(dir: &Path, policy: &Path, name: &str) -> Listening {
    Listening::start_args(&proxy_common::gateway_listen(
        policy,
        "127.0.0.1:0",
        &dir.join(format!("{name}.jsonl")),
    ))
    .await
}

#[tokio::test(flavor = "current_thread")]
async fn every_scenario_that_passes_straight_passes_through_the_gateway() {
    let Some(suite) = conformance::require("conformance") else {
        return;
    };
    let dir = scratch("conformance", "");
    let server = Reference::start(&suite);
    let all = policy(&dir, &server.url, "all");
    // The four runs (each revision straight and through a gateway of its own) at once: most of
    // a run is waiting (the 2025-11-25 `server-sse-polling` scenario waits 15 s through the
    // gateway, which resumes the server's stream after the 5 s `retry` the server asks for, as
    // a client must, by when the reference server has dropped the call's answer; straight, the
    // runner comes back at once and gets it). The runs share nothing but the reference server,
    // whose sessions are the runs' own.
    let mut gateways = Vec::new();
    for revision in REVISIONS {
        gateways.push(gateway(&dir, &all, &format!("trail-{revision}")).await);
    }
    let run = |revision: &'static str, url: &str, bearer: Option<&'static str>, out: String| {
        let (suite, url, out) = (suite.clone(), url.to_owned(), dir.join(out));
        tokio::task::spawn_blocking(move || conformance::run(&suite, &url, revision, bearer, &out))
    };
    let runs: Vec<_> = REVISIONS
        .into_iter()
        .zip(&gateways)
        .map(|(revision, gw)| {
            (
                revision,
                run(
                    revision,
                    &server.url,
                    None,
                    format!("straight-{revision}.json"),
                ),
                run(
                    revision,
                    &gw.url,
                    Some(TOKEN),
                    format!("gateway-{revision}.json"),
                ),
            )
        })
        .collect();
    let mut broken = Vec::new();
    for (revision, straight, through) in runs {
        let straight = straight.await.expect("the straight run");
        let through = through.await.expect("the run through the gateway");
        let ((s, total), (g, _)) = (straight.counts(), through.counts());
        eprintln!(
            "conformance {revision}: {s}/{total} scored scenarios pass straight to the reference \
             server, {g}/{total} through the gateway"
        );
        for scenario in straight.passed() {
            if !through.did_pass(&scenario) {
                broken.push(format!(
                    "{revision} {scenario}:\n      {}",
                    through.failures(&scenario)
                ));
            }
        }
    }
    for gw in gateways {
        gw.stop().await;
    }
    assert!(
        broken.is_empty(),
        "scenarios that pass straight but fail through the gateway:\n  {}",
        broken.join("\n  ")
    );
}

/// The same suite through a role that allows no server request: the server's sampling request
/// made while serving a call never reaches the client, and the refusal is on record.
#[tokio::test(flavor = "current_thread")]
async fn a_policy_that_refuses_server_requests_still_refuses_them() {
    let Some(suite) = conformance::require("conformance_refusal") else {
        return;
    };
    let dir = scratch("conformance-refusal", "");
    let server = Reference::start(&suite);
    let tools_only = policy(&dir, &server.url, "tools_only");
    let gw = gateway(&dir, &tools_only, "trail").await;
    // The scenarios a server request is in, and a call that asks none (so a refusal is the
    // policy's, not a broken hop's).
    let through: Summary = conformance::run_only(
        &suite,
        &gw.url,
        "2025-11-25",
        Some(TOKEN),
        &dir.join("gateway.json"),
        &[
            "tools-call-sampling",
            "tools-call-elicitation",
            "tools-call-simple-text",
        ],
    );
    gw.stop().await;
    assert_eq!(
        through.counts().1,
        3,
        "the three scenarios ran: {:?}",
        through.0
    );
    for scenario in ["tools-call-sampling", "tools-call-elicitation"] {
        assert!(
            !through.did_pass(scenario),
            "{scenario} passed: {:?}",
            through.0
        );
    }
    assert!(through.did_pass("tools-call-simple-text"));
    let records = proxy_common::records(&dir.join("trail.jsonl"));
    let refused: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| {
            r["verdict"] == "denied"
                && r["method"]
                    .as_str()
                    .is_some_and(|m| m == "sampling/createMessage" || m == "elicitation/create")
        })
        .collect();
    assert!(
        refused.len() >= 2,
        "the refusals are on record: {records:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn over_stdio_the_sdk_client_gets_through_the_gateway_what_it_gets_straight() {
    let Some(suite) = conformance::require("conformance_stdio") else {
        return;
    };
    let dir = scratch("conformance-stdio", "");
    let server = Reference::start(&suite);
    let all = policy(&dir, &server.url, "all");
    let straight = conformance::sdk_scenarios(&suite, &["--http", &server.url]);
    let trail = dir.join("stdio.jsonl");
    let (policy, trail) = (all.display().to_string(), trail.display().to_string());
    let through = conformance::sdk_scenarios(
        &suite,
        &[
            "--stdio",
            proxy_common::BIN,
            "gateway",
            "--policy",
            &policy,
            "--role",
            "all",
            "--audit",
            &trail,
        ],
    );
    assert!(
        straight.len() >= 25,
        "the scenarios ran straight: {straight:?}"
    );
    let passed_straight = straight
        .iter()
        .filter(|(_, l)| l.get("error").is_none())
        .count();
    // The gateway serves one listing of each server across revisions: a list through it holds
    // every entry the server lists straight to a client of 2025-11-25, as it is, besides those
    // only the server's 2026-07-28 listing has (which work for an older client through the
    // bridge).
    let answered_alike = |straight: &serde_json::Value, through: &serde_json::Value| {
        let lists = ["tools-list", "resources-list", "prompts-list"];
        match (&straight["result"], &through["result"]) {
            (serde_json::Value::Array(s), serde_json::Value::Array(t))
                if lists.iter().any(|l| straight["scenario"] == *l) =>
            {
                s.iter().all(|entry| t.contains(entry))
            }
            _ => straight == through,
        }
    };
    let same: Vec<&String> = straight
        .iter()
        .filter(|(name, line)| {
            through
                .iter()
                .any(|(n, l)| n == name && answered_alike(line, l))
        })
        .map(|(name, _)| name)
        .collect();
    eprintln!(
        "conformance over stdio (the SDK's client): {passed_straight}/{} scenarios answered \
         straight, {}/{} answered the same through the gateway",
        straight.len(),
        same.len(),
        straight.len()
    );
    let differ: Vec<String> = straight
        .iter()
        .filter(|(name, _)| !same.contains(&name))
        .map(|(name, line)| {
            let got = through
                .iter()
                .find(|(n, _)| n == name)
                .map_or("nothing".to_owned(), |(_, l)| l.to_string());
            format!("{name}:\n      straight: {line}\n      through:  {got}")
        })
        .collect();
    assert!(
        differ.is_empty(),
        "scenarios answered otherwise through the gateway over stdio:\n  {}",
        differ.join("\n  ")
    );
}
