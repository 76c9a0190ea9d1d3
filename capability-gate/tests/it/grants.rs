//! Authority grants: issue, attenuate, revoke; decisions as values; a grant decides through the
//! same rules as a policy's role (operator assertions included) and is audited like one.

use std::sync::Arc;

use capability::audit::{AuditedDispatch, Caller, MemorySink, Outcome, Verdict};
use capability::authz::{Assertions, Authorize, Ceiling, DenyReason, Effect};
use capability::gate::{
    Attenuation, AuthorityGrant, Clock, MemoryRevocations, PolicyDecision, RevocationStore,
};
use capability::mcp::McpManifest;
use capability::{CapabilityManifest, Policy, Server};
use serde_json::json;

use crate::common;
use common::{Rng, tool};

const NOW: u64 = 1_800_000_000;

/// No operator assertions.
fn none() -> Assertions {
    Assertions::none()
}

/// A clock stopped at one second.
struct At(u64);

impl Clock for At {
    fn now(&self) -> u64 {
        self.0
    }
}

fn root() -> AuthorityGrant {
    AuthorityGrant::issue(
        "ops-lead",
        Ceiling::Unrestricted,
        ["k8s:read", "k8s:write", "metrics:read"],
        "k8s/*",
        NOW + 3600,
    )
    .expect("valid")
}

#[test]
fn attenuation_narrows_and_never_widens() {
    let root = root();
    let child = root
        .attenuate(
            "incident-bot",
            Attenuation {
                ceiling: Some(Ceiling::ReadOnly),
                scopes: Some(vec!["k8s:read".into()]),
                pattern: Some("k8s/list_*".into()),
                expires_at: Some(NOW + 600),
            },
        )
        .expect("narrower");
    assert_eq!(child.ancestors().collect::<Vec<_>>(), [root.id()]);
    assert_eq!(child.issuer(), "incident-bot");

    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let restart = tool("k8s", "restart_pod", false, true, &["k8s:write"]);
    let unrevoked = MemoryRevocations::new();
    assert!(root.decide(&restart, NOW, &unrevoked, &none()).allowed);
    assert!(child.decide(&list, NOW, &unrevoked, &none()).allowed);
    let d = child.decide(&restart, NOW, &unrevoked, &none());
    assert!(!d.allowed);
    let id = child.id().to_owned();
    assert_eq!(
        d.reasons,
        [
            DenyReason::in_grant(&id, DenyReason::NotAllowed),
            DenyReason::in_grant(
                &id,
                DenyReason::CeilingExceeded {
                    ceiling: Ceiling::ReadOnly,
                    effect: Effect::DestructiveWrite
                }
            ),
            DenyReason::in_grant(
                &id,
                DenyReason::MissingScopes {
                    scopes: vec!["k8s:write".into()]
                }
            ),
        ]
    );
    let texts: Vec<String> = d.reasons.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            format!("grant {id}: its pattern does not cover the tool"),
            format!(
                "grant {id}: its side effect (destructive write) exceeds the ceiling (read-only)"
            ),
            format!("grant {id}: missing scopes `k8s:write`"),
        ]
    );
    let expired = child.decide(&list, NOW + 600, &unrevoked, &none());
    assert_eq!(
        expired.reasons,
        [DenyReason::Expired {
            grant: id.clone(),
            at: NOW + 600
        }]
    );
    assert_eq!(
        expired.reasons[0].to_string(),
        format!("grant {id} expired at {}", NOW + 600)
    );

    let widen = |a: Attenuation| child.attenuate("x", a).expect_err("widens").to_string();
    assert!(
        widen(Attenuation {
            ceiling: Some(Ceiling::NonDestructive),
            ..Default::default()
        })
        .contains("ceiling")
    );
    assert!(
        widen(Attenuation {
            scopes: Some(vec!["k8s:write".into()]),
            ..Default::default()
        })
        .contains("scope `k8s:write`")
    );
    assert!(
        widen(Attenuation {
            pattern: Some("k8s/*".into()),
            ..Default::default()
        })
        .contains("pattern")
    );
    assert!(
        widen(Attenuation {
            pattern: Some("*".into()),
            ..Default::default()
        })
        .contains("pattern")
    );
    assert!(
        widen(Attenuation {
            expires_at: Some(NOW + 601),
            ..Default::default()
        })
        .contains("expiry")
    );
    assert!(
        child
            .attenuate(
                "x",
                Attenuation {
                    pattern: Some("k8s/ list".into()),
                    ..Default::default()
                }
            )
            .is_err()
    );
}

#[test]
fn revoking_a_grant_revokes_its_descendants() {
    let root = root();
    let child = root.attenuate("a", Attenuation::default()).expect("same");
    let grandchild = child.attenuate("b", Attenuation::default()).expect("same");
    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let revocations = MemoryRevocations::new();
    assert!(grandchild.decide(&list, NOW, &revocations, &none()).allowed);
    revocations.revoke(child.id()).expect("in memory");
    assert!(
        root.decide(&list, NOW, &revocations, &none()).allowed,
        "the parent is not affected"
    );
    assert_eq!(revocations.is_revoked(&grandchild), Ok(true));
    let d = grandchild.decide(&list, NOW, &revocations, &none());
    assert!(!d.allowed);
    assert_eq!(
        d.reasons,
        [DenyReason::Revoked {
            grant: child.id().to_owned()
        }]
    );
    assert_eq!(
        d.reasons[0].to_string(),
        format!("grant {} is revoked", child.id())
    );
    // Revocation is asked first: its reason leads whatever else is wrong.
    let restart = tool("k8s", "restart_pod", false, true, &["k8s:delete"]);
    let d = grandchild.decide(&restart, NOW + 7200, &revocations, &none());
    assert_eq!(
        d.reasons[0],
        DenyReason::Revoked {
            grant: child.id().to_owned()
        }
    );
    assert!(d.reasons.len() > 1, "{:?}", d.reasons);
}

#[test]
fn decisions_are_values_for_the_audit_trail() {
    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let d = root().decide(&list, NOW, &MemoryRevocations::new(), &none());
    let json = serde_json::to_string(&d).expect("serializes");
    let back: PolicyDecision = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, d);
    assert_eq!(d.grant.as_deref(), Some(root_id_len(&d)));

    // A denial's reasons are typed data in the JSON, the grant's id with each.
    let grant = root();
    let d = grant.decide(
        &tool("k8s", "drop_db", false, true, &["db:write"]),
        NOW,
        &MemoryRevocations::new(),
        &none(),
    );
    let json = serde_json::to_value(&d).expect("serializes");
    assert_eq!(
        json["reasons"],
        json!([{"reason": "grant", "grant": grant.id(),
                "because": {"reason": "missing_scopes", "scopes": ["db:write"]}}])
    );
    let back: PolicyDecision = serde_json::from_value(json).expect("deserializes");
    assert_eq!(back, d);

    let policy = Policy::from_toml_str(
        "version = \"v3\"\n[roles.r]\nceiling = \"read-only\"\nallow = [\"k8s/*\"]\n",
    )
    .expect("policy");
    let d = PolicyDecision::of_policy(&policy, "r", &list, NOW);
    assert!(!d.allowed, "the role lacks k8s:read");
    assert_eq!(d.policy_version.as_deref(), Some("v3"));
    assert_eq!(d.role.as_deref(), Some("r"));
    assert_eq!(
        d.reasons,
        [DenyReason::MissingScopes {
            scopes: vec!["k8s:read".into()]
        }]
    );
}

fn root_id_len(d: &PolicyDecision) -> &str {
    let id = d.grant.as_deref().unwrap_or_default();
    assert_eq!(id.len(), 16);
    id
}

const SCOPES: &[&str] = &[
    "k8s:read",
    "k8s:write",
    "metrics:read",
    "db:read",
    "fs:write",
];
const PATTERNS: &[&str] = &[
    "*",
    "k8s/*",
    "k8s/list_*",
    "k8s/restart_pod",
    "metrics/*",
    "k8s/l*",
    "db/*",
];
const CEILINGS: &[Ceiling] = &[
    Ceiling::ReadOnly,
    Ceiling::NonDestructive,
    Ceiling::Unrestricted,
];

fn random_attenuation(rng: &mut Rng) -> Attenuation {
    Attenuation {
        ceiling: rng.chance(50).then(|| *rng.pick(CEILINGS)),
        scopes: rng.chance(50).then(|| {
            SCOPES
                .iter()
                .filter(|_| rng.chance(50))
                .map(|s| (*s).to_owned())
                .collect()
        }),
        pattern: rng.chance(50).then(|| (*rng.pick(PATTERNS)).to_owned()),
        expires_at: rng.chance(50).then(|| NOW + rng.next() % 7200),
    }
}

#[test]
fn property_an_attenuated_grant_never_authorizes_what_its_parent_denies() {
    let providers = ["k8s", "metrics", "db", "fs"];
    let names = ["list_pods", "restart_pod", "query", "lookup", "write"];
    let mut checked = 0;
    let mut allowed = 0;
    for seed in 1..=300u64 {
        let mut rng = Rng::seeded(seed);
        let scopes: Vec<&str> = SCOPES.iter().copied().filter(|_| rng.chance(70)).collect();
        let pattern: &str = rng.pick::<&str>(PATTERNS);
        let Ok(mut grant) =
            AuthorityGrant::issue("root", *rng.pick(CEILINGS), scopes, pattern, NOW + 3600)
        else {
            continue;
        };
        let revocations = MemoryRevocations::new();
        for depth in 0..4 {
            let Ok(child) = grant.attenuate(format!("agent-{depth}"), random_attenuation(&mut rng))
            else {
                continue;
            };
            if rng.chance(10) {
                revocations.revoke(grant.id()).expect("in memory");
            }
            for _ in 0..20 {
                let read_only = rng.chance(50);
                // A read-only tool cannot ask for a mutating scope: the manifest rules refuse it.
                let scopes: Vec<&str> = SCOPES
                    .iter()
                    .copied()
                    .filter(|s| !(read_only && (s.ends_with(":write"))))
                    .filter(|_| rng.chance(30))
                    .collect();
                let (provider, name) = (*rng.pick(&providers), *rng.pick(&names));
                let t = tool(provider, name, read_only, rng.chance(50), &scopes);
                let now = NOW + rng.next() % 7200;
                let parent = grant.decide(&t, now, &revocations, &none());
                let decided = child.decide(&t, now, &revocations, &none());
                if decided.allowed {
                    allowed += 1;
                    assert!(
                        parent.allowed,
                        "seed {seed}: the child allows {} but the parent denies: {:?}",
                        t.qualified_name(),
                        parent.reasons
                    );
                }
                checked += 1;
            }
            grant = child;
        }
    }
    // Not vacuous: thousands of pairs, hundreds of them allowed by the attenuated grant.
    assert!(
        checked > 3_000 && allowed > 100,
        "{checked} checked, {allowed} allowed"
    );
}

// ----- A grant decides as a role does: the same rules, the same operator assertions -----

/// A trusted browser claims its screenshot tool is read-only (the operator says it writes a
/// file); an untrusted file server claims its reader is read-only (not believed, but the
/// operator vouches for it).
fn asserted_policy() -> Policy {
    Policy::from_toml_str(
        r#"
        version = "p1"
        [roles.reader]
        ceiling = "read-only"
        allow = ["*"]
        scopes = ["fs:read"]

        [assertions."browser/take_screenshot"]
        read_only = false
        destructive = false

        [assertions."files/read_text_file"]
        read_only = true
        "#,
    )
    .expect("policy")
}

fn mcp_tool(name: &str, server: &Server) -> CapabilityManifest {
    let t = json!({"name": name, "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true}});
    CapabilityManifest::from_mcp_tool(&t, server).expect("valid")
}

/// The reasons of a grant's decision with its grant ids taken off, to compare with a role's.
fn unwrapped(grant: &AuthorityGrant, reasons: &[DenyReason]) -> Vec<DenyReason> {
    reasons
        .iter()
        .map(|r| match r {
            DenyReason::Grant { grant: id, because } if id == grant.id() => (**because).clone(),
            other => panic!("not a reason of grant {}: {other:?}", grant.id()),
        })
        .collect()
}

#[test]
fn a_grant_honours_operator_assertions_exactly_as_a_policy_does() {
    let policy = asserted_policy();
    let grant = AuthorityGrant::issue("ops-lead", Ceiling::ReadOnly, ["fs:read"], "*", NOW + 3600)
        .expect("valid");
    let revocations = MemoryRevocations::new();
    let screenshot = mcp_tool("take_screenshot", &Server::trusted("browser"));
    let reader = mcp_tool("read_text_file", &Server::untrusted("files"));
    assert!(screenshot.read_only() && !reader.read_only(), "as claimed");

    for (tool, allowed) in [(&screenshot, false), (&reader, true)] {
        let role = policy.decide("reader", tool);
        let by_grant = grant.decide(tool, NOW, &revocations, policy.assertions());
        let what = tool.qualified_name();
        assert_eq!(role.is_allowed(), allowed, "the role, {what}: {role}");
        assert_eq!(
            by_grant.allowed, allowed,
            "the grant, {what}: {:?}",
            by_grant.reasons
        );
        assert_eq!(
            unwrapped(&grant, &by_grant.reasons),
            role.reasons(),
            "{what}"
        );
        // And through the grant's decider, as a dispatch asks it.
        let ctx = grant.context("s", &revocations, &At(NOW), policy.assertions());
        assert_eq!(ctx.authorize(tool).is_ok(), allowed, "{what}");
    }
    let denied = grant.decide(&screenshot, NOW, &revocations, policy.assertions());
    assert_eq!(
        denied.reasons[0].to_string(),
        format!(
            "grant {}: its side effect (write) exceeds the ceiling (read-only)",
            grant.id()
        )
    );
}

/// Scopes, patterns and ceilings shared by the role and the grant of the agreement property.
const AGREE_SCOPES: &[&str] = &["k8s:read", "k8s:write", "fs:read", "fs:write"];
const AGREE_PATTERNS: &[&str] = &["*", "k8s/*", "*/list_*", "files/*", "k8s/l*", "*_1"];

#[test]
fn property_a_grant_and_a_role_with_the_same_rules_agree_under_assertions() {
    let providers = ["k8s", "files", "browser"];
    let names = [
        "list_pods",
        "restart_pod",
        "read_1",
        "write_1",
        "list_files",
    ];
    let hints = ["read_only", "destructive", "idempotent", "open_world"];
    let (mut checked, mut allowed, mut changed_by_assertion) = (0, 0, 0);
    for seed in 1..=200u64 {
        let mut rng = Rng::seeded(seed);
        let ceiling = *rng.pick(CEILINGS);
        let scopes: Vec<&str> = AGREE_SCOPES
            .iter()
            .copied()
            .filter(|_| rng.chance(60))
            .collect();
        let pattern = *rng.pick(AGREE_PATTERNS);
        let mut text = format!(
            "[roles.r]\nceiling = \"{ceiling}\"\nallow = [\"{pattern}\"]\nscopes = [{}]\n",
            scopes
                .iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut tools = Vec::new();
        for (i, provider) in providers.iter().enumerate() {
            for name in names {
                if rng.chance(50) {
                    continue;
                }
                let mut annotations = serde_json::Map::new();
                for key in [
                    "readOnlyHint",
                    "destructiveHint",
                    "idempotentHint",
                    "openWorldHint",
                ] {
                    if rng.chance(60) {
                        annotations.insert(key.into(), json!(rng.chance(50)));
                    }
                }
                let server = if rng.chance(50) {
                    Server::trusted(*provider)
                } else {
                    Server::untrusted(*provider)
                };
                let t = json!({"name": name, "inputSchema": {"type": "object"},
                               "annotations": annotations});
                tools.push(CapabilityManifest::from_mcp_tool(&t, &server).expect("valid"));
                if rng.chance(40) {
                    text += &format!("[assertions.\"{provider}/{name}\"]\n");
                    for hint in hints {
                        if rng.chance(50) {
                            text += &format!("{hint} = {}\n", rng.chance(50));
                        }
                    }
                }
                if i == 0 && rng.chance(50) {
                    // A built tool with scopes, too.
                    let read_only = rng.chance(50);
                    let needs: Vec<&str> = AGREE_SCOPES
                        .iter()
                        .copied()
                        .filter(|s| !(read_only && s.ends_with(":write")) && rng.chance(30))
                        .collect();
                    tools.push(tool(
                        provider,
                        &format!("{name}_b"),
                        read_only,
                        rng.chance(50),
                        &needs,
                    ));
                }
            }
        }
        let policy = Policy::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let grant =
            AuthorityGrant::issue("root", ceiling, scopes, pattern, NOW + 3600).expect("valid");
        let revocations = MemoryRevocations::new();
        for t in &tools {
            let role = policy.decide("r", t);
            let by_grant = grant.decide(t, NOW, &revocations, policy.assertions());
            let what = format!("seed {seed}, {}:\n{text}", t.qualified_name());
            assert_eq!(by_grant.allowed, role.is_allowed(), "{what}");
            assert_eq!(
                unwrapped(&grant, &by_grant.reasons),
                role.reasons(),
                "{what}"
            );
            let unasserted = grant.decide(t, NOW, &revocations, &none());
            changed_by_assertion += usize::from(unasserted.allowed != by_grant.allowed);
            allowed += usize::from(role.is_allowed());
            checked += 1;
        }
    }
    // Not vacuous: many pairs, many allowed, and assertions that changed the answer.
    assert!(
        checked > 1_000 && allowed > 100 && changed_by_assertion > 20,
        "{checked} checked, {allowed} allowed, {changed_by_assertion} changed by an assertion"
    );
}

// ----- A grant-authorized call is audited like any other -----

#[test]
fn an_audited_dispatch_records_grant_authorized_calls_allowed_and_denied() {
    let policy = asserted_policy();
    let grant = root();
    let child = grant
        .attenuate(
            "incident-bot",
            Attenuation {
                ceiling: Some(Ceiling::ReadOnly),
                ..Attenuation::default()
            },
        )
        .expect("narrower");
    let revocations = MemoryRevocations::new();
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(capability::audit::Budget {
        max_calls: 10,
        max_denials: 10,
    });
    let caller = Caller::new("incident-bot").step("triage");
    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let restart = tool("k8s", "restart_pod", false, true, &["k8s:write"]);
    let clock = At(NOW);

    let ctx = child.context("session-9", &revocations, &clock, policy.assertions());
    let mut ran = 0;
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || {
        ran += 1;
        Ok(7)
    });
    assert!(matches!(out, Outcome::Done(7)), "{out:?}");
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &restart, &json!({}), || {
        ran += 1;
        Ok(0)
    });
    let Outcome::Denied(denial) = out else {
        panic!("denied: {out:?}");
    };
    assert_eq!(ran, 1, "the denied call did not run");
    assert_eq!(denial.role(), format!("grant:{}", child.id()));

    revocations.revoke(grant.id()).expect("in memory");
    let ctx = child.context("session-9", &revocations, &clock, policy.assertions());
    let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || {
        ran += 1;
        Ok(7)
    });
    assert!(matches!(out, Outcome::Denied(_)), "revoked: {out:?}");
    assert_eq!(ran, 1);

    // The call that ran is an intent and an outcome; each refusal is one record.
    let records: Vec<_> = sink
        .records()
        .into_iter()
        .filter(|r| r.phase != Some(capability::audit::Phase::Intent))
        .collect();
    assert_eq!(records.len(), 3);
    assert_eq!(sink.records().len(), 4);
    for r in &records {
        assert_eq!(
            r.role,
            format!("grant:{}", child.id()),
            "the record names the grant"
        );
        assert_eq!(r.session, "session-9");
        assert_eq!(r.agent, "incident-bot");
    }
    assert_eq!(records[0].verdict, Verdict::Allowed);
    assert_eq!(records[0].tool, "list_pods");
    assert_eq!(records[0].success, Some(true));
    assert_eq!(records[1].verdict, Verdict::Denied);
    assert_eq!(records[1].tool, "restart_pod");
    assert_eq!(
        messages(&records[1].reasons),
        [format!(
            "grant {}: its side effect (destructive write) exceeds the ceiling (read-only)",
            child.id()
        )]
    );
    assert_eq!(records[2].verdict, Verdict::Denied);
    assert_eq!(
        messages(&records[2].reasons),
        [format!("grant {} is revoked", grant.id())]
    );
}

#[test]
fn a_grant_context_reads_its_clock_at_each_decision() {
    let grant = root();
    let revocations = MemoryRevocations::new();
    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let before = At(NOW + 3599);
    let after = At(NOW + 3600);
    let none = none();
    assert!(
        grant
            .context("s", &revocations, &before, &none)
            .decide(&list)
            .is_allowed()
    );
    let ctx = grant.context("s", &revocations, &after, &none);
    assert_eq!(
        ctx.decide(&list).reasons(),
        [DenyReason::Expired {
            grant: grant.id().to_owned(),
            at: NOW + 3600
        }]
    );
    assert_eq!(ctx.session(), "s");
    assert_eq!(Authorize::principal(&ctx), format!("grant:{}", grant.id()));
}

/// A revocation store that cannot be reached.
#[derive(Debug)]
struct Unreachable;

impl RevocationStore for Unreachable {
    fn revoke(&self, _: &str) -> Result<(), capability::gate::StoreError> {
        Err(capability::gate::StoreError::new(
            "test",
            "connection refused",
        ))
    }

    fn revoked_among(&self, _: &[&str]) -> Result<Vec<String>, capability::gate::StoreError> {
        Err(capability::gate::StoreError::new(
            "test",
            "connection refused",
        ))
    }
}

#[test]
fn a_grant_whose_revocations_cannot_be_checked_is_not_believed() {
    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let d = root().decide(&list, NOW, &Unreachable, &none());
    assert!(!d.allowed);
    assert!(
        matches!(&d.reasons[..], [DenyReason::RevocationsUnavailable { error }] if error.contains("connection refused")),
        "{:?}",
        d.reasons
    );
    assert!(d.reasons[0].to_string().contains("no grant is believed"));
    assert!(
        Unreachable.revoke("g").is_err(),
        "a failed revocation is reported"
    );
}

/// The messages of a record's reasons.
fn messages(reasons: &[capability::audit::Reason]) -> Vec<String> {
    reasons.iter().map(|r| r.message().to_owned()).collect()
}
