//! Authority grants: issue, attenuate, revoke; and decisions as values.

use capability::Policy;
use capability::authz::Ceiling;
use capability::gate::{Attenuation, AuthorityGrant, PolicyDecision, Revocations};

mod common;
use common::{Rng, tool};

const NOW: u64 = 1_800_000_000;

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
    let none = Revocations::new();
    assert!(root.decide(&restart, NOW, &none).allowed);
    assert!(child.decide(&list, NOW, &none).allowed);
    let d = child.decide(&restart, NOW, &none);
    assert!(!d.allowed);
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("covers `k8s/list_*` only")),
        "{:?}",
        d.reasons
    );
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("exceeds its ceiling (read-only)")),
        "{:?}",
        d.reasons
    );
    assert!(!child.decide(&list, NOW + 600, &none).allowed, "expired");

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
    let mut revocations = Revocations::new();
    assert!(grandchild.decide(&list, NOW, &revocations).allowed);
    revocations.revoke(child.id());
    assert!(
        root.decide(&list, NOW, &revocations).allowed,
        "the parent is not affected"
    );
    assert!(revocations.is_revoked(&grandchild));
    let d = grandchild.decide(&list, NOW, &revocations);
    assert!(!d.allowed);
    assert_eq!(d.reasons[0], format!("grant {} is revoked", child.id()));
}

#[test]
fn decisions_are_values_for_the_audit_trail() {
    let list = tool("k8s", "list_pods", true, false, &["k8s:read"]);
    let d = root().decide(&list, NOW, &Revocations::new());
    let json = serde_json::to_string(&d).expect("serializes");
    let back: PolicyDecision = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, d);
    assert_eq!(d.grant.as_deref(), Some(root_id_len(&d)));

    let policy = Policy::from_toml_str(
        "version = \"v3\"\n[roles.r]\nceiling = \"read-only\"\nallow = [\"k8s/*\"]\n",
    )
    .expect("policy");
    let d = PolicyDecision::of_policy(&policy, "r", &list, NOW);
    assert!(!d.allowed, "the role lacks k8s:read");
    assert_eq!(d.policy_version.as_deref(), Some("v3"));
    assert_eq!(d.role.as_deref(), Some("r"));
    assert_eq!(d.reasons, ["missing scopes `k8s:read`"]);
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
        let mut revocations = Revocations::new();
        for depth in 0..4 {
            let Ok(child) = grant.attenuate(format!("agent-{depth}"), random_attenuation(&mut rng))
            else {
                continue;
            };
            if rng.chance(10) {
                revocations.revoke(grant.id());
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
                let parent = grant.decide(&t, now, &revocations);
                let decided = child.decide(&t, now, &revocations);
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
