//! The shared fixture of the Cedar comparison: 60 tools, the four roles of
//! `examples/policy.toml`, and the same role x tool matrix expressed three ways:
//!
//! - our [`Policy`] ([`Policy::decide`], and the compiled [`PolicyIndex`]);
//! - Cedar, "data-driven": one policy, with the rules held in entity attributes;
//! - Cedar, "per-role": one policy per role, with the rules written as policy text;
//!
//! plus a hand-written bit-mask check, the floor of what a decision can cost.
//!
//! The Cedar forms and the bit masks are built from an independent reading of the policy file
//! (the TOML itself, and a glob matcher of this crate), not from `capability-core`'s own
//! compiled data: only the operator assertions come from [`Policy::effective_manifest`]. So
//! [`Fixture::check_agreement`] is a real cross-check, not `capability-core` against itself.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::str::FromStr;

use capability_core::authz::{Ceiling, Effect, PolicyIndex, RoleId};
use capability_core::{CapabilityManifest, Policy};
use cedar_policy::{
    Authorizer, Context, Decision as CedarDecision, Entities, EntityId, EntityTypeName, EntityUid,
    PolicySet, Request,
};
use serde_json::{Value, json};

/// The policy under test: `examples/policy.toml` of the main workspace.
pub const POLICY_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policy.toml");

/// The one Cedar action of the comparison.
pub const ACTION: &str = r#"Action::"call""#;

// ---------------------------------------------------------------------------------------------
// The tools
// ---------------------------------------------------------------------------------------------

/// What a tool declares about its side effects (before any operator assertion).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Declared {
    /// `read_only = true` (and idempotent).
    Read,
    /// `read_only = false`, `destructive = false`: an additive write.
    Write,
    /// `read_only = false`, `destructive = true`.
    Destructive,
    /// Nothing declared: the MCP defaults apply (not read-only, destructive, open world).
    Nothing,
}

use Declared::{Destructive as D, Nothing as N, Read as R, Write as W};

/// `open_world` as declared: `OPEN` leaves it undeclared (the default, true); `CLOSED`
/// declares `open_world = false`.
const OPEN: bool = true;
const CLOSED: bool = false;

/// The 60 tools: provider, name, declared effect, open world, required scopes.
///
/// Scopes are those the policy grants, plus a few nobody holds (`k8s:secrets`, `ssh:read`,
/// `metrics:write`, `traces:write`, `db:write`, `rag:write`, `vault:read`, `audit:write`), so
/// that even the unrestricted operator is denied some tools. The last two tools are the ones
/// the policy has operator assertions about: their declared hints are the wrong ones, and only
/// the assertion gives the right decision.
#[rustfmt::skip]
const TOOLS: [(&str, &str, Declared, bool, &[&str]); 60] = [
    // Kubernetes: reads for everyone who watches, mutations for the operator only.
    ("k8s", "list_pods",            R, CLOSED, &["k8s:read"]),
    ("k8s", "get_pod",              R, CLOSED, &["k8s:read"]),
    ("k8s", "describe_deployment",  R, CLOSED, &["k8s:read"]),
    ("k8s", "get_logs",             R, OPEN,   &["k8s:read"]),
    ("k8s", "list_events",          R, OPEN,   &["k8s:read"]),
    ("k8s", "get_secret",           R, CLOSED, &["k8s:secrets"]),
    ("k8s", "restart_deployment",   D, OPEN,   &["k8s:write"]),
    ("k8s", "delete_pod",           D, OPEN,   &["k8s:delete"]),
    ("k8s", "scale_deployment",     W, OPEN,   &["k8s:write"]),
    ("k8s", "apply_manifest",       N, OPEN,   &["k8s:write"]),
    ("k8s", "patch_configmap",      W, OPEN,   &["k8s:write"]),
    ("k8s", "exec_in_pod",          D, OPEN,   &["k8s:exec"]),
    ("k8s", "pod_exec",             D, OPEN,   &["k8s:exec"]),
    // SSH: the operator's, nobody else's.
    ("ssh", "run_command",          D, OPEN,   &["ssh:exec"]),
    ("ssh", "read_file",            R, OPEN,   &["ssh:read"]),
    ("ssh", "list_hosts",           R, CLOSED, &[]),
    ("ssh", "write_file",           W, OPEN,   &["ssh:exec"]),
    // Prometheus: read by monitor and analyst.
    ("prometheus", "query",         R, CLOSED, &["metrics:read"]),
    ("prometheus", "query_range",   R, CLOSED, &["metrics:read"]),
    ("prometheus", "list_alerts",   R, OPEN,   &["metrics:read"]),
    ("prometheus", "get_targets",   R, OPEN,   &["metrics:read"]),
    ("prometheus", "create_silence", W, OPEN,  &["metrics:write"]),
    ("prometheus", "reload_config", W, OPEN,   &[]),
    // Grafana.
    ("grafana", "search_dashboards", R, OPEN,  &["grafana:read"]),
    ("grafana", "get_dashboard",    R, CLOSED, &["grafana:read"]),
    ("grafana", "query_datasource", R, OPEN,   &["grafana:read", "metrics:read"]),
    ("grafana", "list_alert_rules", R, OPEN,   &["grafana:read"]),
    ("grafana", "create_annotation", W, OPEN,  &["grafana:write"]),
    ("grafana", "delete_dashboard", D, OPEN,   &["grafana:write"]),
    // SigNoz.
    ("signoz", "search_traces",     R, OPEN,   &["traces:read"]),
    ("signoz", "get_trace",         R, OPEN,   &["traces:read"]),
    ("signoz", "query_logs",        R, OPEN,   &["traces:read"]),
    ("signoz", "list_services",     R, CLOSED, &["traces:read"]),
    ("signoz", "create_alert",      W, OPEN,   &["traces:write"]),
    // The database.
    ("database", "query",           R, CLOSED, &["db:read"]),
    ("database", "describe_table",  R, CLOSED, &["db:read"]),
    ("database", "list_tables",     R, CLOSED, &["db:read"]),
    ("database", "write_rows",      W, OPEN,   &["db:write"]),
    ("database", "exec_sql",        D, OPEN,   &["db:read"]),
    // The runbook index.
    ("rag", "search",               R, CLOSED, &["rag:read"]),
    ("rag", "get_document",         R, CLOSED, &["rag:read"]),
    ("rag", "query_runbooks",       R, OPEN,   &["rag:read"]),
    ("rag", "list_collections",     R, OPEN,   &["rag:read"]),
    ("rag", "write_document",       W, OPEN,   &["rag:write"]),
    // Files.
    ("files", "read_file",          R, CLOSED, &["fs:read"]),
    ("files", "list_directory",     R, CLOSED, &["fs:read"]),
    ("files", "search_files",       R, OPEN,   &["fs:read"]),
    ("files", "read_secret",        R, CLOSED, &["vault:read"]),
    ("files", "write_file",         W, OPEN,   &["fs:write"]),
    ("files", "delete_file",        D, OPEN,   &["fs:write"]),
    // Notifications.
    ("notify", "send_message",      W, OPEN,   &["notify:send"]),
    ("notify", "send_page",         W, OPEN,   &["notify:send"]),
    ("notify", "create_incident",   W, OPEN,   &["notify:send"]),
    ("notify", "list_channels",     R, OPEN,   &[]),
    // The audit log.
    ("audit", "query_events",       R, CLOSED, &["audit:read"]),
    ("audit", "get_event",          R, OPEN,   &["audit:read"]),
    ("audit", "search_log",         R, OPEN,   &["audit:read"]),
    ("audit", "write_entry",        W, OPEN,   &["audit:write"]),
    // Operator assertions: declared as a write, asserted read-only and closed-world (the analyst
    // may call it only thanks to the assertion) ...
    ("filesystem", "read_text_file", W, OPEN,  &["fs:read"]),
    // ... and declared read-only, asserted a (non-destructive) write: the auditor may not.
    ("playwright", "browser_take_screenshot", R, OPEN, &[]),
];

/// The 60 tools of the matrix, in a fixed order.
pub fn tools() -> Vec<CapabilityManifest> {
    TOOLS
        .iter()
        .map(|&(provider, name, declared, open, scopes)| {
            let mut builder = CapabilityManifest::builder(name)
                .provider(provider)
                .scopes(scopes.iter().copied());
            builder = match declared {
                Declared::Read => builder.read_only(true).idempotent(true),
                Declared::Write => builder.read_only(false).destructive(false),
                Declared::Destructive => builder.read_only(false).destructive(true),
                Declared::Nothing => builder,
            };
            if !open {
                builder = builder.open_world(false);
            }
            builder
                .build()
                .unwrap_or_else(|e| panic!("tool `{provider}/{name}` of the fixture: {e}"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The roles, read from the policy file independently of `capability-core`
// ---------------------------------------------------------------------------------------------

/// One role of the policy file, as written there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleSpec {
    /// The role name.
    pub name: String,
    /// The side-effect ceiling.
    pub ceiling: Ceiling,
    /// Whether the role may only call closed-world tools.
    pub closed_world_only: bool,
    /// `allow` patterns over `provider/name`.
    pub allow: Vec<String>,
    /// `deny` patterns over `provider/name`.
    pub deny: Vec<String>,
    /// Granted scopes, sorted and de-duplicated.
    pub scopes: Vec<String>,
}

impl RoleSpec {
    /// Whether the role's patterns admit `provider/name` (or a bare `name`): no `deny`
    /// pattern catches it ([`deny_glob`]), and some `allow` pattern matches it ([`glob`]).
    pub fn admits(&self, qualified: &str) -> bool {
        !self.deny.iter().any(|p| deny_glob(p, qualified))
            && self.allow.iter().any(|p| glob(p, qualified))
    }

    /// The effects (see [`effect_name`]) the ceiling permits.
    pub fn effects(&self) -> &'static [&'static str] {
        match self.ceiling {
            Ceiling::ReadOnly => &["read"],
            Ceiling::NonDestructive => &["read", "write"],
            Ceiling::Unrestricted => &["read", "write", "destructive-write"],
        }
    }
}

/// Reads the roles of a policy file, sorted by name. Panics on anything it does not
/// understand, so a new policy feature cannot be silently left out of the Cedar forms.
pub fn read_roles(text: &str) -> Vec<RoleSpec> {
    let table: toml::Table = text.parse().expect("the policy file is TOML");
    let Some(roles) = table.get("roles") else {
        return Vec::new();
    };
    let roles = roles.as_table().expect("`roles` is a table");
    let strings = |role: &str, key: &str, value: Option<&toml::Value>| -> Vec<String> {
        value
            .map(|v| {
                v.as_array()
                    .unwrap_or_else(|| panic!("roles.{role}.{key} is not an array"))
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .unwrap_or_else(|| panic!("roles.{role}.{key} has a non-string"))
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut specs: Vec<RoleSpec> = roles
        .iter()
        .map(|(name, role)| {
            let role = role
                .as_table()
                .unwrap_or_else(|| panic!("roles.{name} is not a table"));
            for key in role.keys() {
                assert!(
                    ["ceiling", "closed_world_only", "allow", "deny", "scopes"]
                        .contains(&key.as_str()),
                    "roles.{name}.{key}: a key the Cedar fixture does not know how to translate"
                );
            }
            let ceiling = match role.get("ceiling").and_then(toml::Value::as_str) {
                Some("read-only") => Ceiling::ReadOnly,
                Some("non-destructive") => Ceiling::NonDestructive,
                Some("unrestricted") => Ceiling::Unrestricted,
                other => panic!("roles.{name}.ceiling: unexpected {other:?}"),
            };
            let closed_world_only = match role.get("closed_world_only") {
                None => false,
                Some(v) => v
                    .as_bool()
                    .unwrap_or_else(|| panic!("roles.{name}.closed_world_only is not a bool")),
            };
            let scopes: BTreeSet<String> = strings(name, "scopes", role.get("scopes"))
                .into_iter()
                .collect();
            RoleSpec {
                name: name.clone(),
                ceiling,
                closed_world_only,
                allow: strings(name, "allow", role.get("allow")),
                deny: strings(name, "deny", role.get("deny")),
                scopes: scopes.into_iter().collect(),
            }
        })
        .collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

/// A glob over `provider/name`: `*` matches any run of characters (`/` included), `?` exactly
/// one. Written here, independently of `capability-core`'s matcher.
pub fn glob(pattern: &str, subject: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = subject.chars().collect();
    go(&p, &s)
}

/// How a `deny` pattern reads `provider/name` (or a bare `name`, without a provider): like
/// [`glob`], but regardless of ASCII case, and for a tool without a provider only the
/// pattern's tool part (after its `/`) is compared. Written here, independently of
/// `capability-core`'s matcher.
pub fn deny_glob(pattern: &str, qualified: &str) -> bool {
    let (pattern, qualified) = (pattern.to_ascii_lowercase(), qualified.to_ascii_lowercase());
    match pattern.split_once('/') {
        Some((_, tool_part)) if !qualified.contains('/') => glob(tool_part, &qualified),
        _ => glob(&pattern, &qualified),
    }
}

/// The effect of a tool as a Cedar string: `read`, `write` or `destructive-write`.
pub fn effect_name(read_only: bool, destructive: bool) -> &'static str {
    match Effect::of(read_only, destructive) {
        Effect::Read => "read",
        Effect::Write => "write",
        Effect::DestructiveWrite => "destructive-write",
    }
}

/// A tool as the policy sees it, after operator assertions.
#[derive(Clone, Debug)]
pub struct EffectiveTool {
    /// `provider/name`.
    pub qualified: String,
    /// See [`effect_name`].
    pub effect: &'static str,
    /// Effective `open_world`.
    pub open_world: bool,
    /// Required scopes, sorted.
    pub scopes: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// The Cedar forms
// ---------------------------------------------------------------------------------------------

/// One Cedar encoding of the policy: its policy text, the parsed set, and its entities.
pub struct CedarForm {
    /// `data-driven` or `per-role`.
    pub name: &'static str,
    /// The Cedar policy text.
    pub source: String,
    /// The parsed policy set.
    pub policies: PolicySet,
    /// The roles and tools, with the attributes this form reads.
    pub entities: Entities,
}

impl CedarForm {
    /// Cedar's answer to one request.
    #[inline]
    pub fn is_allowed(&self, authorizer: &Authorizer, request: &Request) -> bool {
        authorizer
            .is_authorized(request, &self.policies, &self.entities)
            .decision()
            == CedarDecision::Allow
    }

    /// Cedar's answer, or the evaluation errors it met (an error skips a policy, which would
    /// turn into a silent deny: the agreement check refuses that).
    pub fn checked(&self, authorizer: &Authorizer, request: &Request) -> Result<bool, String> {
        let response = authorizer.is_authorized(request, &self.policies, &self.entities);
        let errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(ToString::to_string)
            .collect();
        if errors.is_empty() {
            Ok(response.decision() == CedarDecision::Allow)
        } else {
            Err(errors.join("; "))
        }
    }
}

/// The data-driven policy: one `permit`, every rule in entity data.
pub const DATA_DRIVEN_POLICY: &str = r#"permit (principal, action == Action::"call", resource)
when {
  resource.admitted.contains(principal.name) &&
  principal.effects.contains(resource.effect) &&
  (!principal.closed_world_only || !resource.open_world) &&
  principal.scopes.containsAll(resource.scopes)
};
"#;

fn uid(kind: &str, id: &str) -> EntityUid {
    EntityUid::from_type_name_and_id(
        EntityTypeName::from_str(kind).expect("a valid entity type"),
        EntityId::new(id),
    )
}

/// The data-driven form over these roles and tools.
pub fn data_driven(roles: &[RoleSpec], tools: &[EffectiveTool]) -> CedarForm {
    let mut entities: Vec<Value> = roles
        .iter()
        .map(|role| {
            json!({
                "uid": { "type": "Role", "id": role.name },
                "attrs": {
                    "name": role.name,
                    "effects": role.effects(),
                    "closed_world_only": role.closed_world_only,
                    "scopes": role.scopes,
                },
                "parents": [],
            })
        })
        .collect();
    entities.extend(tools.iter().map(|tool| {
        // Cedar cannot apply a list of patterns held in data: they are resolved here, per
        // tool, as `PolicyIndex` resolves them when it is built.
        let admitted: Vec<&str> = roles
            .iter()
            .filter(|role| role.admits(&tool.qualified))
            .map(|role| role.name.as_str())
            .collect();
        json!({
            "uid": { "type": "Tool", "id": tool.qualified },
            "attrs": {
                "effect": tool.effect,
                "open_world": tool.open_world,
                "scopes": tool.scopes,
                "admitted": admitted,
            },
            "parents": [],
        })
    }));
    CedarForm {
        name: "data-driven",
        source: DATA_DRIVEN_POLICY.to_owned(),
        policies: DATA_DRIVEN_POLICY
            .parse()
            .expect("the data-driven policy parses"),
        entities: Entities::from_json_value(Value::Array(entities), None)
            .expect("the data-driven entities parse"),
    }
}

/// A Cedar string literal.
fn cedar_string(s: &str) -> String {
    assert!(
        s.chars().all(|c| c.is_ascii_graphic()),
        "`{s}`: only printable ASCII is translated to Cedar here"
    );
    // Cedar string escapes are Rust's for `"` and `\`.
    format!("{s:?}")
}

/// A Cedar `like` pattern for one of our globs. Cedar's `like` has `*` but no one-character
/// wildcard: a `?` cannot be translated, so it is refused rather than mistranslated.
pub fn cedar_like(pattern: &str) -> String {
    assert!(
        !pattern.contains('?'),
        "pattern `{pattern}` uses `?`, which Cedar's `like` cannot express; \
         the per-role Cedar form refuses to mistranslate it"
    );
    assert!(
        pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./*".contains(c)),
        "pattern `{pattern}` has a character this translation does not handle"
    );
    format!("\"{pattern}\"")
}

/// The per-role policy text: one `permit` per role, every rule written as a literal.
pub fn per_role_policy(roles: &[RoleSpec]) -> String {
    let mut text = String::new();
    for role in roles {
        let mut conditions = Vec::new();
        let allow: Vec<String> = role
            .allow
            .iter()
            .map(|p| format!("resource.qualified like {}", cedar_like(p)))
            .collect();
        conditions.push(match allow.len() {
            0 => "false".to_owned(),
            1 => allow[0].clone(),
            _ => format!("({})", allow.join(" || ")),
        });
        // A deny pattern ignores case (`folded` is the lower-case `provider/name`) and, for a
        // tool without a provider (`bare`), compares only its tool part.
        for p in &role.deny {
            let folded = p.to_ascii_lowercase();
            conditions.push(format!("!(resource.folded like {})", cedar_like(&folded)));
            if let Some((_, tool_part)) = folded.split_once('/') {
                conditions.push(format!(
                    "!(resource.bare && resource.folded like {})",
                    cedar_like(tool_part)
                ));
            }
        }
        match role.ceiling {
            Ceiling::ReadOnly => conditions.push(r#"resource.effect == "read""#.to_owned()),
            Ceiling::NonDestructive => conditions
                .push(r#"(resource.effect == "read" || resource.effect == "write")"#.to_owned()),
            Ceiling::Unrestricted => {}
        }
        if role.closed_world_only {
            conditions.push("!resource.open_world".to_owned());
        }
        let scopes: Vec<String> = role.scopes.iter().map(|s| cedar_string(s)).collect();
        conditions.push(format!(
            "[{}].containsAll(resource.scopes)",
            scopes.join(", ")
        ));
        let _ = write!(
            text,
            "// {name}: ceiling {ceiling}\n\
             permit (principal == Role::{id}, action == {ACTION}, resource)\n\
             when {{\n  {body}\n}};\n\n",
            name = role.name,
            ceiling = role.ceiling,
            id = cedar_string(&role.name),
            body = conditions.join(" &&\n  "),
        );
    }
    text
}

/// The per-role form over these roles and tools.
pub fn per_role(roles: &[RoleSpec], tools: &[EffectiveTool]) -> CedarForm {
    let source = per_role_policy(roles);
    let mut entities: Vec<Value> = roles
        .iter()
        .map(|role| json!({ "uid": { "type": "Role", "id": role.name }, "attrs": {}, "parents": [] }))
        .collect();
    entities.extend(tools.iter().map(|tool| {
        json!({
            "uid": { "type": "Tool", "id": tool.qualified },
            "attrs": {
                "qualified": tool.qualified,
                "folded": tool.qualified.to_ascii_lowercase(),
                "bare": !tool.qualified.contains('/'),
                "effect": tool.effect,
                "open_world": tool.open_world,
                "scopes": tool.scopes,
            },
            "parents": [],
        })
    }));
    CedarForm {
        name: "per-role",
        policies: source.parse().expect("the per-role policies parse"),
        source,
        entities: Entities::from_json_value(Value::Array(entities), None)
            .expect("the per-role entities parse"),
    }
}

// ---------------------------------------------------------------------------------------------
// The bit-mask floor
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct BitRole {
    effects: u8,
    closed_world_only: bool,
    scopes: u64,
}

#[derive(Clone, Copy, Debug)]
struct BitTool {
    effect: u8,
    open_world: bool,
    scopes: u64,
    admitted: u64,
}

/// The decision as a few `u64` operations on precomputed data: the floor.
#[derive(Clone, Debug)]
pub struct Bitmask {
    roles: Vec<BitRole>,
    tools: Vec<BitTool>,
}

impl Bitmask {
    fn new(roles: &[RoleSpec], tools: &[EffectiveTool]) -> Bitmask {
        assert!(
            roles.len() <= 64,
            "the bit-mask floor handles up to 64 roles"
        );
        let mut interned: BTreeMap<&str, u32> = BTreeMap::new();
        let scopes = roles
            .iter()
            .flat_map(|r| &r.scopes)
            .chain(tools.iter().flat_map(|t| &t.scopes));
        for scope in scopes {
            let next = u32::try_from(interned.len()).expect("few scopes");
            interned.entry(scope.as_str()).or_insert(next);
        }
        assert!(
            interned.len() <= 64,
            "the bit-mask floor handles up to 64 scopes"
        );
        let mask = |scopes: &[String]| {
            scopes
                .iter()
                .fold(0u64, |acc, s| acc | 1 << interned[s.as_str()])
        };
        let effect_bit = |effect: &str| match effect {
            "read" => 1u8,
            "write" => 2,
            "destructive-write" => 4,
            other => unreachable!("effect {other}"),
        };
        Bitmask {
            roles: roles
                .iter()
                .map(|r| BitRole {
                    effects: r.effects().iter().fold(0, |acc, e| acc | effect_bit(e)),
                    closed_world_only: r.closed_world_only,
                    scopes: mask(&r.scopes),
                })
                .collect(),
            tools: tools
                .iter()
                .map(|t| BitTool {
                    effect: effect_bit(t.effect),
                    open_world: t.open_world,
                    scopes: mask(&t.scopes),
                    admitted: roles
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.admits(&t.qualified))
                        .fold(0, |acc, (i, _)| acc | 1 << i),
                })
                .collect(),
        }
    }

    /// Whether role `role` (position in [`Fixture::roles`]) may call tool `tool`.
    #[inline]
    pub fn is_allowed(&self, role: usize, tool: usize) -> bool {
        let r = self.roles[role];
        let t = self.tools[tool];
        (t.admitted >> role) & 1 == 1
            && r.effects & t.effect != 0
            && !(r.closed_world_only && t.open_world)
            && t.scopes & !r.scopes == 0
    }
}

// ---------------------------------------------------------------------------------------------
// The fixture
// ---------------------------------------------------------------------------------------------

/// Everything the test and the benchmark share.
pub struct Fixture {
    /// Our policy, loaded from [`POLICY_PATH`].
    pub policy: Policy,
    /// The 60 tools.
    pub tools: Vec<CapabilityManifest>,
    /// The tools after operator assertions, in the same order.
    pub effective: Vec<EffectiveTool>,
    /// The roles, sorted by name (the order of [`Policy::roles`]).
    pub roles: Vec<RoleSpec>,
    /// One Cedar request per pair, role-major: pair `p` is role `p / tools`, tool `p % tools`.
    pub requests: Vec<Request>,
    /// Cedar, one policy reading rules from entity data.
    pub data_driven: CedarForm,
    /// Cedar, one policy per role with literal rules.
    pub per_role: CedarForm,
    /// The floor.
    pub bitmask: Bitmask,
    /// Cedar's authorizer.
    pub authorizer: Authorizer,
}

impl Fixture {
    /// Loads the policy, builds the tools, both Cedar forms, the requests and the bit masks.
    pub fn load() -> Fixture {
        Fixture::load_with(tools())
    }

    /// [`Fixture::load`] over other tools.
    pub fn load_with(tools: Vec<CapabilityManifest>) -> Fixture {
        let text = std::fs::read_to_string(POLICY_PATH)
            .unwrap_or_else(|e| panic!("cannot read {POLICY_PATH}: {e}"));
        let policy = Policy::from_toml_str(&text).unwrap_or_else(|e| panic!("{POLICY_PATH}: {e}"));
        let roles = read_roles(&text);
        // Our reading of the file must be `Policy`'s, as far as `Policy` lets us see it.
        let names: Vec<&str> = policy.roles().collect();
        let ours: Vec<&str> = roles.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ours, "the roles read from the TOML are the policy's");
        for role in &roles {
            let ctx = policy.context(&role.name, "bench").expect("a known role");
            assert_eq!(ctx.ceiling(), role.ceiling, "ceiling of `{}`", role.name);
            assert_eq!(
                ctx.scopes(),
                role.scopes.as_slice(),
                "scopes of `{}`",
                role.name
            );
        }

        let effective: Vec<EffectiveTool> = tools
            .iter()
            .map(|tool| {
                let e = policy.effective_manifest(tool);
                EffectiveTool {
                    qualified: tool.qualified_name(),
                    effect: effect_name(e.read_only(), e.destructive()),
                    open_world: e.open_world(),
                    scopes: e.required_scopes().to_vec(),
                }
            })
            .collect();
        let distinct: BTreeSet<&str> = effective.iter().map(|t| t.qualified.as_str()).collect();
        assert_eq!(distinct.len(), tools.len(), "tool names are unique");

        let action: EntityUid = ACTION.parse().expect("a valid action uid");
        let requests = roles
            .iter()
            .flat_map(|role| {
                let action = action.clone();
                effective.iter().map(move |tool| {
                    Request::new(
                        uid("Role", &role.name),
                        action.clone(),
                        uid("Tool", &tool.qualified),
                        Context::empty(),
                        None,
                    )
                    .expect("a request without a schema is always valid")
                })
            })
            .collect();

        Fixture {
            data_driven: data_driven(&roles, &effective),
            per_role: per_role(&roles, &effective),
            bitmask: Bitmask::new(&roles, &effective),
            policy,
            tools,
            effective,
            roles,
            requests,
            authorizer: Authorizer::new(),
        }
    }

    /// The number of (role, tool) pairs.
    pub fn pair_count(&self) -> usize {
        self.roles.len() * self.tools.len()
    }

    /// Every pair as (role position, tool position), role-major (the order of
    /// [`Fixture::requests`]).
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let n = self.tools.len();
        (0..self.pair_count()).map(move |p| (p / n, p % n))
    }

    /// The compiled index of our policy over the tools.
    pub fn index(&self) -> PolicyIndex<'_> {
        self.policy.index(&self.tools)
    }

    /// Every pair for [`PolicyIndex::is_allowed`].
    pub fn index_pairs(&self, index: &PolicyIndex<'_>) -> Vec<(RoleId, usize)> {
        self.pairs()
            .map(|(r, t)| {
                let id = index.role(&self.roles[r].name).expect("a known role");
                (id, t)
            })
            .collect()
    }

    /// Every pair for [`Policy::decide`].
    pub fn decide_pairs(&self) -> Vec<(&str, &CapabilityManifest)> {
        self.pairs()
            .map(|(r, t)| (self.roles[r].name.as_str(), &self.tools[t]))
            .collect()
    }

    /// Every contender's answer on every pair, or the first Cedar evaluation error.
    pub fn answers(&self) -> Result<Vec<Answers>, String> {
        let index = self.index();
        let index_pairs = self.index_pairs(&index);
        self.pairs()
            .zip(&self.requests)
            .zip(index_pairs)
            .map(|(((r, t), request), (role_id, _))| {
                let role = &self.roles[r].name;
                let tool = &self.effective[t].qualified;
                let cedar = |form: &CedarForm| {
                    form.checked(&self.authorizer, request)
                        .map_err(|e| format!("Cedar {} on ({role}, {tool}): {e}", form.name))
                };
                Ok(Answers {
                    role: role.clone(),
                    tool: tool.clone(),
                    decide: self.policy.decide(role, &self.tools[t]).is_allowed(),
                    index: index.is_allowed(role_id, t),
                    cedar_data_driven: cedar(&self.data_driven)?,
                    cedar_per_role: cedar(&self.per_role)?,
                    bitmask: self.bitmask.is_allowed(r, t),
                })
            })
            .collect()
    }

    /// Checks that every contender gives the same answer on every pair, and that every role
    /// has both allowed and denied tools (so that agreement means something). Returns the
    /// answers; the error lists every disagreeing pair with every answer.
    pub fn check_agreement(&self) -> Result<Vec<Answers>, String> {
        let answers = self.answers()?;
        let mut problems: Vec<String> = answers
            .iter()
            .filter(|a| !a.agree())
            .map(|a| format!("{a:?}"))
            .collect();
        for role in &self.roles {
            let mine = answers.iter().filter(|a| a.role == role.name);
            let allowed = mine.clone().filter(|a| a.decide).count();
            let denied = mine.filter(|a| !a.decide).count();
            if allowed == 0 || denied == 0 {
                problems.push(format!(
                    "role `{}` has {allowed} allowed and {denied} denied tools: the matrix must \
                     have both for every role",
                    role.name
                ));
            }
        }
        if problems.is_empty() {
            Ok(answers)
        } else {
            Err(problems.join("\n"))
        }
    }
}

/// Every contender's answer for one pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answers {
    /// The role.
    pub role: String,
    /// The tool, `provider/name`.
    pub tool: String,
    /// [`Policy::decide`].
    pub decide: bool,
    /// [`PolicyIndex::is_allowed`].
    pub index: bool,
    /// Cedar, data-driven form.
    pub cedar_data_driven: bool,
    /// Cedar, per-role form.
    pub cedar_per_role: bool,
    /// The bit-mask floor.
    pub bitmask: bool,
}

impl Answers {
    /// Whether every contender says the same.
    pub fn agree(&self) -> bool {
        [
            self.index,
            self.cedar_data_driven,
            self.cedar_per_role,
            self.bitmask,
        ]
        .iter()
        .all(|&a| a == self.decide)
    }
}
