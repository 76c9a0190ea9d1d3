//! Many servers behind one listing: shown names, decisions on the servers' own names (so a
//! policy's `provider/tool` patterns stay as written), routes back, names two servers would
//! share withheld from everyone whatever the order, drift and duplicates per server kept.

use capability::Server;
use capability::authz::Policy;
use capability::mcp::{Fleet, Listing, Lockfile, WithheldReason};
use serde_json::{Value, json};

fn tool(name: &str, read_only: bool) -> Value {
    json!({"name": name, "description": format!("{name}."), "inputSchema": {"type": "object"},
           "annotations": {"readOnlyHint": read_only, "destructiveHint": !read_only}})
}

/// ADR-105's matrix, on the servers' own names.
const POLICY: &str = r#"
[roles.nemotron]
ceiling = "read-only"
allow = ["prometheus/*", "grafana/*", "k8s/*"]

[roles.hermes]
ceiling = "read-only"
allow = ["database/*", "prometheus/*"]

[roles.openclaw]
ceiling = "unrestricted"
allow = ["*"]
"#;

fn fleet(prefixes: [&str; 4]) -> Fleet {
    let read = |server: &str, tools: &[Value]| {
        Listing::read(&Server::trusted(server), tools, None).expect("listing")
    };
    Fleet::new([
        (
            read("k8s", &[tool("list_pods", true), tool("delete_pod", false)]),
            prefixes[0].to_owned(),
        ),
        (
            read("prometheus", &[tool("query", true)]),
            prefixes[1].to_owned(),
        ),
        (
            read(
                "grafana",
                &[tool("query", true), tool("list_dashboards", true)],
            ),
            prefixes[2].to_owned(),
        ),
        (
            read(
                "database",
                &[tool("query", true), tool("drop_table", false)],
            ),
            prefixes[3].to_owned(),
        ),
    ])
    .expect("fleet")
}

fn shown(fleet: &Fleet, role: &str) -> Vec<String> {
    let ctx = Policy::from_toml_str(POLICY)
        .expect("policy")
        .context(role, "s")
        .expect("role");
    fleet
        .for_caller(&ctx)
        .visible()
        .map(|t| t.shown.clone())
        .collect()
}

#[test]
fn each_role_sees_its_matrix_under_the_shown_names() {
    let fleet = fleet(["k8s_", "prometheus_", "grafana_", "database_"]);
    assert_eq!(
        shown(&fleet, "nemotron"),
        [
            "k8s_list_pods",
            "prometheus_query",
            "grafana_query",
            "grafana_list_dashboards"
        ]
    );
    assert_eq!(
        shown(&fleet, "hermes"),
        ["prometheus_query", "database_query"]
    );
    assert_eq!(
        shown(&fleet, "openclaw"),
        [
            "k8s_list_pods",
            "k8s_delete_pod",
            "prometheus_query",
            "grafana_query",
            "grafana_list_dashboards",
            "database_query",
            "database_drop_table"
        ]
    );
    let route = fleet.route("database_drop_table").expect("routed");
    assert_eq!((route.server, route.tool), ("database", "drop_table"));
    assert_eq!(route.listed.manifest().provider(), Some("database"));
    assert!(
        fleet.route("drop_table").is_none(),
        "only shown names route"
    );
    assert!(fleet.collisions().is_empty());
}

#[test]
fn a_name_two_servers_would_share_is_withheld_from_everyone_in_any_order() {
    // Without prefixes, prometheus, grafana and database all have `query`.
    let bare = fleet(["k8s_", "", "", ""]);
    assert_eq!(bare.collisions().len(), 1);
    assert_eq!(bare.collisions()[0].shown, "query");
    assert_eq!(
        bare.collisions()[0].tools,
        ["prometheus/query", "grafana/query", "database/query"]
    );
    for role in ["nemotron", "hermes", "openclaw"] {
        assert!(!shown(&bare, role).contains(&"query".to_owned()), "{role}");
    }
    let ctx = Policy::from_toml_str(POLICY)
        .expect("policy")
        .context("openclaw", "s")
        .expect("role");
    let view = bare.for_caller(&ctx);
    let route = bare.route("query").expect("routed");
    assert!(
        !route.listed.is_visible(),
        "a call of a taken name is refused at its route: {:?}",
        route.listed.reasons()
    );
    let hidden = view.tool("query").expect("listed");
    assert!(matches!(
        &hidden.listed.reasons()[0],
        WithheldReason::NameTaken { shown, by } if shown == "query" && by.len() == 2
    ));
    assert!(
        hidden.listed.reasons()[0]
            .to_string()
            .contains("another `prefix`")
    );

    // The same servers in another order: the same verdict.
    let read = |server: &str, tools: &[Value]| {
        Listing::read(&Server::trusted(server), tools, None).expect("listing")
    };
    let reversed = Fleet::new([
        (read("database", &[tool("query", true)]), String::new()),
        (read("prometheus", &[tool("query", true)]), String::new()),
    ])
    .expect("fleet");
    let seen = reversed.for_caller(&ctx);
    assert_eq!(seen.visible().count(), 0);
}

#[test]
fn a_prefix_that_makes_a_name_of_another_server_collides_too() {
    // `k8s_` + `x` and `` + `k8s_x`: one shown name, two tools.
    let read = |server: &str, tools: &[Value]| {
        Listing::read(&Server::trusted(server), tools, None).expect("listing")
    };
    let fleet = Fleet::new([
        (read("k8s", &[tool("x", true)]), "k8s_".to_owned()),
        (read("other", &[tool("k8s_x", true)]), String::new()),
    ])
    .expect("fleet");
    assert_eq!(fleet.collisions()[0].tools, ["k8s/x", "other/k8s_x"]);
}

#[test]
fn drift_and_duplicate_names_stay_per_server_and_a_server_twice_is_refused() {
    let server = Server::untrusted("git");
    let mut lock = Lockfile::default();
    lock.pin(&server, &[tool("git_status", true)]).expect("pin");
    let git = Listing::read(
        &server,
        &[tool("git_status", true), tool("git_reset", false)],
        Some(&lock),
    )
    .expect("listing");
    let twins = Listing::read(
        &Server::trusted("notes"),
        &[tool("read", true), tool("read", true)],
        None,
    )
    .expect("listing");
    let fleet =
        Fleet::new([(git.clone(), "git.".into()), (twins, "notes.".into())]).expect("fleet");
    let ctx = Policy::from_toml_str(POLICY)
        .expect("policy")
        .context("openclaw", "s")
        .expect("role");
    let view = fleet.for_caller(&ctx);
    let names: Vec<&str> = view.visible().map(|t| t.shown.as_str()).collect();
    assert_eq!(
        names,
        ["git.git_status"],
        "drifted and duplicate tools stay hidden"
    );
    assert!(
        fleet.collisions().is_empty(),
        "a duplicate within a server is not a collision"
    );
    let error = Fleet::new([(git.clone(), "a_".into()), (git, "b_".into())]).expect_err("twice");
    assert!(
        error.to_string().contains("`git` is in the fleet twice"),
        "{error}"
    );
}
