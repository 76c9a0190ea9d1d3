//! What `capability gateway --check` reports: every server of the fleet started (or reached)
//! and listed, and what each role would see of it, without serving. Data only: the command
//! prints it (text, or this as JSON).

use std::path::Path;
use std::time::Duration;

use capability::Policy;
use capability::authz::{Action, Authorize, Hold};
use capability::mcp::{FleetTool, FleetView};
use serde::Serialize;

use crate::GatewayError;
use crate::fleet::read_fleet;
use crate::serve::items::Items;
use crate::spec::source::ServerSource;

/// The fleet as each role would see it (serialized: the `--check --json` report).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Checked {
    /// The policy's version.
    pub policy_version: Option<String>,
    /// Each server, in name order.
    pub servers: Vec<CheckedServer>,
    /// What each role would see.
    pub roles: Vec<RoleView>,
    /// Shown names that tools of several servers share (each withheld from every role).
    pub collisions: Vec<NameCollision>,
    /// Prompt names or URIs several servers claim (each withheld from every role).
    pub item_collisions: Vec<ItemCollision>,
    /// How many resources, templates and prompts the fleet lists in all.
    #[serde(skip)]
    pub item_counts: (usize, usize, usize),
}

impl Checked {
    /// Whether a name or a URI is shared: the check's finding (`capability gateway --check`
    /// exits 1).
    pub fn collides(&self) -> bool {
        !self.collisions.is_empty() || !self.item_collisions.is_empty()
    }
}

/// One server of the fleet.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct CheckedServer {
    /// Its operator's name.
    pub name: String,
    /// Where it is (`command`, `url` or `file`).
    #[serde(flatten)]
    pub source: ServerSource,
    /// `trusted` or `untrusted`.
    pub trust: &'static str,
    /// Its lockfile.
    pub lock: Option<String>,
    /// The prefix its tools are shown with.
    pub prefix: String,
    /// How many tools it lists.
    pub tools: usize,
}

/// What one role would see.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct RoleView {
    /// The role.
    pub role: String,
    /// The tools it is shown.
    pub visible: Vec<CheckedTool>,
    /// The tools withheld from it, each with its reasons.
    pub hidden: Vec<CheckedTool>,
    /// The resources it sees.
    pub resources: Vec<CheckedItem>,
    /// The resource templates it sees.
    pub templates: Vec<CheckedItem>,
    /// The prompts it sees.
    pub prompts: Vec<CheckedItem>,
}

/// One tool as a role would see it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct CheckedTool {
    /// Its shown name.
    pub shown: String,
    /// Its server.
    pub server: String,
    /// Its own name.
    pub tool: String,
    /// Whether each call is held: `signature` or `confirmation`.
    pub hold: Option<&'static str>,
    /// Why it is withheld (hidden tools only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
    /// What would show it, as the lines to write or the command to run (hidden tools whose
    /// server's claims are not believed, or whose descriptor drifted from its pin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// A resource, template or prompt as a role would see it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct CheckedItem {
    /// Its shown name or URI (`uri`, `uri_template` or `shown` in JSON).
    #[serde(skip)]
    pub shown: String,
    /// Its server.
    pub server: String,
    /// Its own name or URI.
    pub own: String,
    #[serde(flatten)]
    key: std::collections::BTreeMap<&'static str, String>,
}

/// A shown name several servers' tools share.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct NameCollision {
    /// The name.
    pub shown: String,
    /// The tools (`server/tool`).
    pub tools: Vec<String>,
}

/// A prompt name or URI several servers claim.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ItemCollision {
    /// `prompt` or `resource`.
    pub kind: &'static str,
    /// The name or URI.
    pub shown: String,
    /// Who claims it.
    pub by: Vec<String>,
}

/// Starts and lists every server of `policy` (read from `policy_path`), each answering within
/// `timeout`, and says what `role` (else every role) would see.
///
/// # Errors
///
/// [`GatewayError::Config`] for a role the policy lacks; a server that cannot be started,
/// reached or listed.
pub async fn check(
    policy: &Policy,
    policy_path: &Path,
    role: Option<&str>,
    timeout: Duration,
) -> Result<Checked, GatewayError> {
    let roles: Vec<String> = match role {
        Some(role) if policy.roles().any(|r| r == role) => vec![role.to_owned()],
        Some(role) => {
            let roles: Vec<&str> = policy.roles().collect();
            return Err(GatewayError::Config(format!(
                "role `{role}` is not in the policy (it has: {})",
                roles.join(", ")
            )));
        }
        None => policy.roles().map(str::to_owned).collect(),
    };
    let (fleet, servers) = read_fleet(policy, policy_path, timeout).await?;
    let items = Items::new(
        servers
            .iter()
            .map(|s| (s.name.clone(), s.prefix.clone(), s.items.clone())),
    );
    let views = roles
        .iter()
        .filter_map(|role| {
            let ctx = policy.context(role, "gateway-check")?;
            Some(role_view(
                role,
                &fleet.for_caller(&ctx),
                &items,
                &ctx,
                policy,
            ))
        })
        .collect();
    Ok(Checked {
        policy_version: policy.version().map(str::to_owned),
        servers: servers
            .into_iter()
            .map(|s| CheckedServer {
                name: s.name,
                source: s.source,
                trust: if s.trusted { "trusted" } else { "untrusted" },
                lock: s.lock.map(|l| l.display().to_string()),
                prefix: s.prefix,
                tools: s.tools,
            })
            .collect(),
        roles: views,
        collisions: fleet
            .collisions()
            .iter()
            .map(|c| NameCollision {
                shown: c.shown.clone(),
                tools: c.tools.clone(),
            })
            .collect(),
        item_collisions: items
            .collisions()
            .iter()
            .map(|c| ItemCollision {
                kind: c.kind,
                shown: c.shown.clone(),
                by: c.by.clone(),
            })
            .collect(),
        item_counts: items.counts(),
    })
}

fn role_view(
    role: &str,
    view: &FleetView,
    items: &Items,
    ctx: &capability::authz::ToolContext,
    policy: &Policy,
) -> RoleView {
    let tool = |t: &FleetTool, reasons: Option<Vec<String>>| {
        let hold = policy.hold(role, Some(view.server_of(t)), t.manifest().name());
        let fix = reasons.as_ref().and_then(|_| {
            let entry = policy
                .servers()
                .iter()
                .find(|e| e.name() == view.server_of(t));
            let at = crate::fleet::fix::ServerAt {
                name: view.server_of(t),
                lock: entry.and_then(|e| e.lock()),
                command: entry.and_then(|e| e.command()),
            };
            crate::fleet::fix::fix(t.manifest(), t.listed.reasons(), &at)
        });
        CheckedTool {
            shown: t.shown.clone(),
            server: view.server_of(t).to_owned(),
            tool: t.manifest().name().to_owned(),
            hold: hold.map(|h| match h {
                Hold::Signature => "signature",
                Hold::Confirmation => "confirmation",
            }),
            reasons,
            fix,
        }
    };
    let may = |action: Action<'_>| ctx.decide_action(&action).is_allowed();
    let item = |key: &'static str, shown: &str, server: &str, own: &str| CheckedItem {
        shown: shown.to_owned(),
        server: server.to_owned(),
        own: own.to_owned(),
        key: [(key, shown.to_owned())].into(),
    };
    RoleView {
        role: role.to_owned(),
        visible: view.visible().map(|t| tool(t, None)).collect(),
        hidden: view
            .hidden()
            .map(|t| {
                let reasons = t.listed.reasons().iter().map(ToString::to_string).collect();
                tool(t, Some(reasons))
            })
            .collect(),
        resources: items
            .resources(|server, uri| may(Action::Resource { server, uri }))
            .iter()
            .map(|s| item("uri", &s.item.uri, s.server, s.own))
            .collect(),
        templates: items
            .templates(|server, uri| may(Action::Resource { server, uri }))
            .iter()
            .map(|s| item("uri_template", &s.item.uri_template, s.server, s.own))
            .collect(),
        prompts: items
            .prompts(|server, name| may(Action::Prompt { server, name }))
            .iter()
            .map(|s| item("shown", &s.item.name, s.server, s.own))
            .collect(),
    }
}
