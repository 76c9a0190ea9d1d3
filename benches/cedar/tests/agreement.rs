//! Cedar (both forms), our policy (both paths) and the bit-mask floor agree on every
//! (role, tool) pair of the matrix, and the matrix is not trivial.

use capability_cedar_bench::{
    Fixture, cedar_like, data_driven, deny_glob, glob, per_role, per_role_policy, read_roles,
};

#[test]
fn every_contender_agrees_on_every_pair() {
    let fixture = Fixture::load();
    assert_eq!(fixture.tools.len(), 60);
    assert_eq!(fixture.roles.len(), 4);
    assert_eq!(fixture.pair_count(), 240);
    assert_eq!(fixture.requests.len(), 240);
    let answers = fixture
        .check_agreement()
        .unwrap_or_else(|problems| panic!("the contenders disagree:\n{problems}"));
    assert_eq!(answers.len(), 240);
    for role in &fixture.roles {
        let allowed = answers
            .iter()
            .filter(|a| a.role == role.name && a.decide)
            .count();
        let denied = answers
            .iter()
            .filter(|a| a.role == role.name && !a.decide)
            .count();
        assert!(
            allowed > 0 && denied > 0,
            "{}: {allowed} / {denied}",
            role.name
        );
        println!("{:<9} allowed {allowed:>2}, denied {denied:>2}", role.name);
    }
}

#[test]
fn every_contender_agrees_on_tools_that_try_to_escape_a_deny_pattern() {
    // Read-only tools the auditor (`allow = ["*"]`) may call unless a `deny` pattern catches
    // them: in another case, or without a provider.
    let escapes = [
        ("Notify", "List_channels", false),
        ("SSH", "list_hosts", false),
        ("k8s", "Exec_in_pod", false),
        ("", "list_channels", false),
        ("", "exec_sql", false),
        ("Audit", "Query_Events", true),
    ];
    let mut tools = capability_cedar_bench::tools();
    for (provider, name, _) in escapes {
        let mut builder = capability_core::CapabilityManifest::builder(name).read_only(true);
        if !provider.is_empty() {
            builder = builder.provider(provider);
        }
        tools.push(builder.build().expect("valid"));
    }
    let fixture = Fixture::load_with(tools);
    let answers = fixture
        .check_agreement()
        .unwrap_or_else(|problems| panic!("the contenders disagree:\n{problems}"));
    for (provider, name, allowed) in escapes {
        let tool = if provider.is_empty() {
            name.to_owned()
        } else {
            format!("{provider}/{name}")
        };
        let answer = answers
            .iter()
            .find(|a| a.role == "auditor" && a.tool == tool)
            .unwrap_or_else(|| panic!("(auditor, {tool}) in the matrix"));
        assert_eq!(answer.decide, allowed, "{answer:?}");
    }
}

#[test]
fn the_operator_assertions_change_decisions() {
    let fixture = Fixture::load();
    let answers = fixture.check_agreement().expect("agreement");
    let answer = |role: &str, tool: &str| {
        answers
            .iter()
            .find(|a| a.role == role && a.tool == tool)
            .unwrap_or_else(|| panic!("({role}, {tool}) in the matrix"))
            .decide
    };
    // Declared a write; asserted read-only: the analyst may read it.
    assert!(answer("analyst", "filesystem/read_text_file"));
    // Declared read-only; asserted a write: the auditor may not.
    assert!(!answer("auditor", "playwright/browser_take_screenshot"));
    assert!(answer("operator", "playwright/browser_take_screenshot"));
}

#[test]
fn the_matrix_exercises_every_kind_of_denial() {
    let fixture = Fixture::load();
    let answers = fixture.check_agreement().expect("agreement");
    let denied = |role: &str, tool: &str| {
        !answers
            .iter()
            .find(|a| a.role == role && a.tool == tool)
            .expect("in the matrix")
            .decide
    };
    assert!(denied("monitor", "k8s/restart_deployment"), "deny pattern");
    assert!(denied("monitor", "database/query"), "no allow pattern");
    assert!(denied("auditor", "k8s/scale_deployment"), "ceiling");
    assert!(
        denied("operator", "database/write_rows"),
        "a scope nobody holds"
    );
    assert!(
        !denied("monitor", "grafana/query_datasource"),
        "two scopes, both held"
    );
}

#[test]
fn our_glob_is_the_documented_one() {
    assert!(glob("*", "k8s/list_pods"));
    assert!(glob("k8s/*", "k8s/list_pods"));
    assert!(!glob("k8s/*", "ssh/k8s/x"));
    assert!(glob("*/exec*", "database/exec_sql"));
    assert!(glob("*_exec", "k8s/pod_exec"));
    assert!(!glob("*_exec", "k8s/exec_in_pod"));
    assert!(glob("k8s/get_po?", "k8s/get_pod"));
    assert!(!glob("k8s/get_po?", "k8s/get_po"));
    // `allow` patterns are exact: case counts, and a provider part needs a provider.
    assert!(!glob("k8s/restart*", "K8s/Restart_pod"));
    assert!(!glob("k8s/restart*", "restart_pod"));
}

#[test]
fn our_deny_reading_is_the_documented_one() {
    assert!(deny_glob("k8s/restart*", "k8s/restart_pod"));
    assert!(deny_glob("k8s/restart*", "K8s/Restart_pod"));
    assert!(deny_glob("K8S/RESTART*", "k8s/restart_pod"));
    assert!(deny_glob("k8s/restart*", "restart_pod"));
    assert!(deny_glob("*/exec*", "Exec_sql"));
    assert!(!deny_glob("k8s/restart*", "ssh/restart_pod"));
    assert!(!deny_glob("k8s/restart*", "list_pods"));
}

#[test]
#[should_panic(expected = "uses `?`")]
fn a_one_character_wildcard_is_refused_not_mistranslated() {
    cedar_like("k8s/get_po?");
}

#[test]
fn the_per_role_form_reads_like_the_policy() {
    let roles = read_roles(
        "[roles.watcher]\nceiling = \"non-destructive\"\nclosed_world_only = true\n\
         allow = [\"k8s/*\"]\ndeny = [\"k8s/exec*\"]\nscopes = [\"k8s:read\"]\n",
    );
    let text = per_role_policy(&roles);
    assert_eq!(
        text,
        "// watcher: ceiling non-destructive\n\
         permit (principal == Role::\"watcher\", action == Action::\"call\", resource)\n\
         when {\n  \
         resource.qualified like \"k8s/*\" &&\n  \
         !(resource.folded like \"k8s/exec*\") &&\n  \
         !(resource.bare && resource.folded like \"exec*\") &&\n  \
         (resource.effect == \"read\" || resource.effect == \"write\") &&\n  \
         !resource.open_world &&\n  \
         [\"k8s:read\"].containsAll(resource.scopes)\n\
         };\n\n"
    );
    let _: cedar_policy::PolicySet = text.parse().expect("valid Cedar");
}

#[test]
fn the_check_catches_a_mistranslation() {
    let mut fixture = Fixture::load();
    // In the per-role form only, the monitor loses its deny patterns and its ceiling and gains
    // `k8s:write`: Cedar then allows `k8s/scale_deployment`, which our policy denies.
    let mut roles = fixture.roles.clone();
    let monitor = roles
        .iter_mut()
        .find(|r| r.name == "monitor")
        .expect("monitor");
    monitor.deny.clear();
    monitor.ceiling = capability_core::authz::Ceiling::Unrestricted;
    monitor.scopes.push("k8s:write".to_owned());
    monitor.scopes.sort();
    fixture.per_role = per_role(&roles, &fixture.effective);
    let problems = fixture.check_agreement().expect_err("a disagreement");
    assert!(problems.contains("k8s/scale_deployment"), "{problems}");
    assert!(problems.contains("cedar_per_role: true"), "{problems}");

    // And in the data-driven form: the auditor admits everything.
    let mut fixture = Fixture::load();
    let mut roles = fixture.roles.clone();
    roles
        .iter_mut()
        .find(|r| r.name == "auditor")
        .expect("auditor")
        .deny
        .clear();
    fixture.data_driven = data_driven(&roles, &fixture.effective);
    let problems = fixture.check_agreement().expect_err("a disagreement");
    assert!(problems.contains("ssh/list_hosts"), "{problems}");
}
