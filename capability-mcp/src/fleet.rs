//! Many servers behind one listing: each server's tools shown under its prefix, decided on the
//! servers' own names.
//!
//! [`Fleet::new`] takes each server's [`Listing`] (read once per tool list) and its prefix, and
//! does the rest of the caller-independent work: the shown names (`<prefix><name>`) and the
//! names two servers' tools would share. A shown name claimed by tools of two servers is
//! withheld from everyone ([`WithheldReason::NameTaken`], reported by [`Fleet::collisions`]):
//! which one a call would reach must never depend on order. The [scan](mod@crate::scan)'s fleet
//! rules run here too, on the shown names: a description naming another server's tool and
//! telling the agent what to do with it, and two servers' tools whose names or titles differ
//! only by look-alike characters, are withheld from everyone ([`WithheldReason::Flagged`]);
//! every finding is on the tool ([`ListedTool::findings`]). [`Fleet::for_caller`] adds one
//! caller's decision, made on the tool's own manifest (provider = its server, name = its own),
//! so a policy's `provider/tool` patterns are written for the servers' names, not the shown
//! ones. [`Fleet::route`] takes a shown name back to its server and tool.

use std::collections::{BTreeMap, HashMap};

use capability_core::authz::Authorize;
use capability_core::manifest::CapabilityManifest;

use crate::listing::Listing;
use crate::scan::{self, Finding};
use crate::visibility::{ListedTool, Visibility, WithheldReason};

/// One server of a fleet.
#[derive(Clone, Debug)]
struct Member {
    listing: Listing,
    prefix: String,
}

/// Where a shown name goes.
#[derive(Clone, Copy, Debug)]
pub struct Route<'a> {
    /// The server (its operator's name).
    pub server: &'a str,
    /// The tool's own name, as the server lists it.
    pub tool: &'a str,
    /// The tool, with the reasons no caller sees it (drift, the scan, a duplicate or taken
    /// name).
    pub listed: &'a ListedTool,
}

/// A shown name that tools of several servers would have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collision {
    /// The shown name.
    pub shown: String,
    /// The tools (`server/tool`), in server order.
    pub tools: Vec<String>,
}

/// The listings of several servers, as one (see the module docs).
///
/// ```
/// use capability::authz::{Ceiling, ToolContext};
/// use capability::mcp::{Fleet, Listing};
/// use capability::Server;
/// use serde_json::json;
///
/// let read = |name: &str| json!({"name": name, "inputSchema": {"type": "object"},
///                                "annotations": {"readOnlyHint": true}});
/// let k8s = Listing::read(&Server::trusted("k8s"), &[read("list_pods")], None)?;
/// let prom = Listing::read(&Server::trusted("prometheus"), &[read("query")], None)?;
/// let fleet = Fleet::new([(k8s, "k8s_".to_owned()), (prom, "prom_".to_owned())])?;
///
/// let reader = ToolContext::new("reader", "s-1", Ceiling::ReadOnly);
/// let seen = fleet.for_caller(&reader);
/// let shown: Vec<&str> = seen.visible().map(|t| t.shown.as_str()).collect();
/// assert_eq!(shown, ["k8s_list_pods", "prom_query"]);
/// let route = fleet.route("prom_query").unwrap();
/// assert_eq!((route.server, route.tool), ("prometheus", "query"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Fleet {
    members: Vec<Member>,
    /// Shown name to (member, tool index); a taken name maps to its first claimant.
    by_shown: HashMap<String, (usize, usize)>,
    /// Per member, its listing's tools with the fleet's reasons (a taken name, the scan's
    /// fleet rules) and findings added.
    tools: Vec<Vec<ListedTool>>,
    collisions: Vec<Collision>,
}

/// Why a fleet cannot be put together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError(String);

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FleetError {}

impl Fleet {
    /// The fleet of these servers' listings, each shown under its prefix, in this order. Two
    /// listings of one server name are an error (its patterns and pins would be ambiguous).
    pub fn new(members: impl IntoIterator<Item = (Listing, String)>) -> Result<Fleet, FleetError> {
        let members: Vec<Member> = members
            .into_iter()
            .map(|(listing, prefix)| Member { listing, prefix })
            .collect();
        for (i, member) in members.iter().enumerate() {
            let name = member.listing.server();
            if members[..i].iter().any(|m| m.listing.server() == name) {
                return Err(FleetError(format!(
                    "the server `{name}` is in the fleet twice"
                )));
            }
        }
        // Every distinct (server, tool name) under each shown name, in server order.
        let mut claims: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
        for (m, member) in members.iter().enumerate() {
            let mut seen_here: HashMap<&str, ()> = HashMap::new();
            for (t, tool) in member.listing.tools().iter().enumerate() {
                let name = tool.manifest().name();
                if seen_here.insert(name, ()).is_some() {
                    continue; // a duplicate within one server: its listing withholds it
                }
                claims
                    .entry(format!("{}{name}", member.prefix))
                    .or_default()
                    .push((m, t));
            }
        }
        let mut by_shown = HashMap::with_capacity(claims.len());
        let mut taken: Vec<HashMap<usize, WithheldReason>> = vec![HashMap::new(); members.len()];
        let mut collisions = Vec::new();
        let label = |(m, t): (usize, usize)| {
            let member: &Member = &members[m];
            format!(
                "{}/{}",
                member.listing.server(),
                member.listing.tools()[t].manifest().name()
            )
        };
        for (shown, claimants) in claims {
            by_shown.insert(shown.clone(), claimants[0]);
            if claimants.len() > 1 {
                let tools: Vec<String> = claimants.iter().map(|&c| label(c)).collect();
                for &(m, t) in &claimants {
                    let mine = label((m, t));
                    let by = tools.iter().filter(|o| **o != mine).cloned().collect();
                    taken[m].insert(
                        t,
                        WithheldReason::NameTaken {
                            shown: shown.clone(),
                            by,
                        },
                    );
                }
                collisions.push(Collision { shown, tools });
            }
        }
        let mut tools: Vec<Vec<ListedTool>> = members
            .iter()
            .enumerate()
            .map(|(m, member)| {
                member
                    .listing
                    .tools()
                    .iter()
                    .enumerate()
                    .map(|(t, listed)| match taken[m].remove(&t) {
                        Some(reason) => listed.clone().withheld(reason),
                        None => listed.clone(),
                    })
                    .collect()
            })
            .collect();
        for (m, t, findings) in fleet_findings(&members) {
            tools[m][t] = tools[m][t].clone().flagged(findings);
        }
        Ok(Fleet {
            members,
            by_shown,
            tools,
            collisions,
        })
    }

    /// The shown names that tools of several servers would have (each withheld), sorted.
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }

    /// The servers, in the fleet's order.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|m| m.listing.server())
    }

    /// Every tool of every server as it listed it (drifted and withheld ones too: a descriptor
    /// the scan flags is one an operator wants on record), with its server, in the fleet's
    /// order.
    pub fn manifests(&self) -> impl Iterator<Item = (&str, &CapabilityManifest)> {
        self.members.iter().flat_map(|m| {
            let server = m.listing.server();
            m.listing
                .tools()
                .iter()
                .map(move |listed| (server, listed.manifest()))
        })
    }

    /// Where the shown name `shown` goes; `None` when no server's tool is shown under it.
    pub fn route(&self, shown: &str) -> Option<Route<'_>> {
        let &(m, t) = self.by_shown.get(shown)?;
        let member = &self.members[m];
        let listed = &self.tools[m][t];
        Some(Route {
            server: member.listing.server(),
            tool: listed.manifest().name(),
            listed,
        })
    }

    /// What `decider` may see of the whole fleet: every server's tools in the fleet's order,
    /// each decided on its own manifest, with its shown name.
    pub fn for_caller(&self, decider: &(impl Authorize + ?Sized)) -> FleetView {
        let mut tools = Vec::new();
        for (m, member) in self.members.iter().enumerate() {
            for listed in &self.tools[m] {
                tools.push(FleetTool {
                    shown: format!("{}{}", member.prefix, listed.manifest().name()),
                    server: m,
                    listed: listed.decided_by(decider),
                });
            }
        }
        FleetView {
            servers: self.servers().map(str::to_owned).collect(),
            tools,
        }
    }
}

/// The findings of the scan's fleet rules, per member and tool, on the shown names.
fn fleet_findings(members: &[Member]) -> Vec<(usize, usize, Vec<Finding>)> {
    let shown: Vec<Vec<String>> = members
        .iter()
        .map(|member| {
            member
                .listing
                .tools()
                .iter()
                .map(|t| format!("{}{}", member.prefix, t.manifest().name()))
                .collect()
        })
        .collect();
    let entries: Vec<scan::fleet::Member<'_>> = members
        .iter()
        .zip(&shown)
        .map(|(member, shown)| scan::fleet::Member {
            server: member.listing.server(),
            tools: member
                .listing
                .tools()
                .iter()
                .zip(shown)
                .map(|(listed, shown)| scan::fleet::Entry {
                    name: listed.manifest().name(),
                    shown,
                    title: listed.manifest().title(),
                    scan: listed.scan(),
                })
                .collect(),
        })
        .collect();
    let mut out: Vec<(usize, usize, Vec<Finding>)> = Vec::new();
    for (m, t, finding) in scan::fleet::cross(&entries) {
        match out.last_mut() {
            Some((m2, t2, findings)) if (*m2, *t2) == (m, t) => findings.push(finding),
            _ => out.push((m, t, vec![finding])),
        }
    }
    out
}

/// One tool of a fleet, as one caller sees it.
#[derive(Clone, Debug)]
pub struct FleetTool {
    /// The name the caller sees.
    pub shown: String,
    server: usize,
    /// The tool: its manifest (its server as provider, its own name) and every reason it is
    /// withheld.
    pub listed: ListedTool,
}

/// What one caller may see of a fleet.
#[derive(Clone, Debug)]
pub struct FleetView {
    servers: Vec<String>,
    tools: Vec<FleetTool>,
}

impl FleetView {
    /// Every tool of every server, in the fleet's order.
    pub fn tools(&self) -> &[FleetTool] {
        &self.tools
    }

    /// The tools the caller is shown.
    pub fn visible(&self) -> impl Iterator<Item = &FleetTool> {
        self.tools.iter().filter(|t| t.listed.is_visible())
    }

    /// The tools withheld from the caller, each with every reason.
    pub fn hidden(&self) -> impl Iterator<Item = &FleetTool> {
        self.tools.iter().filter(|t| !t.listed.is_visible())
    }

    /// The tool shown as `shown`, visible or not.
    pub fn tool(&self, shown: &str) -> Option<&FleetTool> {
        self.tools.iter().find(|t| t.shown == shown)
    }

    /// Every tool of the fleet as one [`Visibility`] (manifests under their own names and
    /// servers; no lockfile review), in the fleet's order: index `i` is [`tools`](Self::tools)`[i]`.
    pub fn visibility(&self) -> Visibility {
        Visibility::from_tools(self.tools.iter().map(|t| t.listed.clone()).collect())
    }

    /// The server of `tool`.
    pub fn server_of(&self, tool: &FleetTool) -> &str {
        &self.servers[tool.server]
    }
}

impl FleetTool {
    /// Its manifest.
    pub fn manifest(&self) -> &CapabilityManifest {
        self.listed.manifest()
    }
}
