//! The loop over many servers: the model is shown the role's union under the shown names, a
//! call is routed to its server and recorded with the server as provider and the tool's own
//! name, a hidden tool of another server is refused on record like any other.

use crate::loop_support;

use std::cell::RefCell;

use capability_agent::driver::{AgentLoop, LoopOutcome, Shown, ToolExecutor};
use capability_audit::{Caller, Verdict};
use capability_core::authz::Policy;
use capability_mcp::{Fleet, Listing, Server};
use serde_json::{Value, json};

use loop_support::*;

const FLEET_POLICY: &str = r#"
version = "fleet/1"

[roles.nemotron]
ceiling = "read-only"
allow = ["prometheus/*", "k8s/*"]
"#;

/// Routes a shown name to its server, and remembers where each call went.
struct Routed<'a> {
    fleet: &'a Fleet,
    calls: RefCell<Vec<(String, String)>>,
}

impl ToolExecutor for Routed<'_> {
    fn call(&self, name: &str, _: &Value) -> Result<Value, String> {
        let route = self.fleet.route(name).ok_or("no such tool")?;
        self.calls
            .borrow_mut()
            .push((route.server.to_owned(), route.tool.to_owned()));
        Ok(json!({"server": route.server}))
    }
}

#[test]
fn the_model_sees_the_union_and_each_call_reaches_its_server_on_record() {
    let k8s = Listing::read(
        &Server::trusted("k8s"),
        &[tool("list_pods", true), tool("delete_pod", false)],
        None,
    )
    .expect("listing");
    let prometheus = Listing::read(&Server::trusted("prometheus"), &[tool("query", true)], None)
        .expect("listing");
    let fleet = Fleet::new([(k8s, "k8s_".into()), (prometheus, "prom_".into())]).expect("fleet");
    let ctx = Policy::from_toml_str(FLEET_POLICY)
        .expect("policy")
        .context("nemotron", "s-fleet")
        .expect("role");
    let shown = Shown::of_fleet(&fleet, &ctx);
    let names: Vec<&str> = shown.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["k8s_list_pods", "prom_query"]);

    let (sink, dispatch) = dispatch(5);
    let executor = Routed {
        fleet: &fleet,
        calls: RefCell::new(Vec::new()),
    };
    let mut model = Scripted::new([
        call("c1", "prom_query", json!({"namespace": "db"})),
        call("c2", "k8s_delete_pod", json!({"namespace": "db"})),
        call("c3", "k8s_list_pods", json!({"namespace": "db"})),
        answer("db-2 is out of disk"),
    ]);
    let mut messages = vec![capability_agent::Message::User("DiskFull".into())];
    let outcome = AgentLoop::new(&dispatch).run_shown(
        &mut model,
        &mut messages,
        &shown,
        &ctx,
        Caller::new("nemotron"),
        &executor,
    );
    assert!(matches!(outcome, LoopOutcome::Answer { .. }), "{outcome:?}");
    assert_eq!(model.shown[0], ["k8s_list_pods", "prom_query"]);
    assert_eq!(
        executor.calls.into_inner(),
        [
            ("prometheus".to_owned(), "query".to_owned()),
            ("k8s".to_owned(), "list_pods".to_owned())
        ],
        "routed; the hidden delete never ran"
    );
    let records = per_call(&sink);
    let on_record: Vec<(Option<&str>, &str, Verdict)> = records
        .iter()
        .map(|r| (r.provider.as_deref(), r.tool.as_str(), r.verdict))
        .collect();
    assert_eq!(
        on_record,
        [
            (Some("prometheus"), "query", Verdict::Allowed),
            (Some("k8s"), "delete_pod", Verdict::Denied),
            (Some("k8s"), "list_pods", Verdict::Allowed),
        ]
    );
}
