//! What may this caller see of this server: one function, [`Visibility::of`], used by the
//! governed client and by `capability check` alike, so the two can never disagree.
//!
//! Every listed tool is either visible or hidden with every reason, asked in this order:
//!
//! 1. **Drift against the lock.** While a lockfile is in use, a tool that does not match an
//!    approved pin (changed, added, renamed, or with flags edited in the lockfile) is hidden; a
//!    server the lockfile does not know has no approved tool.
//! 2. **The scan.** A tool whose descriptor the [scan](mod@crate::scan) flags (a hard finding:
//!    hidden Unicode, an injection phrase, a file of secrets, an encoded payload, a read-only
//!    claim its own words contradict, a credential) is hidden, pinned or not.
//! 3. **Duplicate names.** All tools that share a name are hidden: a call could reach either.
//! 4. **The decision.** The decider ([`Authorize`]: a role of a policy, a grant, ...) denies it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use capability_core::authz::{Authorize, DenyReason};
use capability_core::manifest::{CapabilityManifest, ManifestError};
use serde_json::Value;

use crate::import::from_mcp_tool;
use crate::lock::{DriftStatus, Lockfile, Review};
use crate::scan::{Finding, Rule, ToolScan};
use crate::server::Server;

/// Why a tool is withheld from a caller: hidden from its tool list, and its calls refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WithheldReason {
    /// The decider denies it (a policy's role: [`Policy::decide`](capability_core::authz::Policy::decide)).
    Policy(DenyReason),
    /// A lockfile is in use and the tool does not match an approved pin: it is new, renamed,
    /// its descriptor changed, or its flags were edited in the lockfile. It stays hidden until it
    /// is pinned again.
    Drift(DriftStatus),
    /// The [scan](mod@crate::scan) of its descriptor has a hard finding: the first of each rule.
    /// Its descriptor says something no agent should read (hidden characters, an injection,
    /// a file of secrets, an encoded command, a read-only claim its words contradict, a
    /// credential, another server's tool told what to do). It stays hidden, pinned or not,
    /// until the server changes it.
    Flagged {
        /// The rule's stable code (`CAP-SCAN-010`).
        code: &'static str,
        /// The rule.
        rule: Rule,
        /// Where: a JSON Pointer into the tool (`/description`), `(name)` for a property name.
        field: String,
        /// What was found, printable on one line (secrets masked), with what it spells or
        /// decodes to.
        excerpt: String,
    },
    /// The server lists more than one tool with this name, so a call could reach either.
    DuplicateName,
    /// The server does not list a tool with this name.
    NotListed,
    /// Behind one listing of many servers, its name as shown (its server's prefix and its
    /// name) is also the shown name of another server's tool: a call could reach either, so
    /// both are hidden. `by` names the others (`server/tool`).
    NameTaken {
        /// The name as shown.
        shown: String,
        /// The other tools shown under it.
        by: Vec<String>,
    },
}

impl fmt::Display for WithheldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WithheldReason::Policy(reason) => write!(f, "{reason}"),
            WithheldReason::Drift(status) => status.why_hidden(f),
            WithheldReason::Flagged {
                code,
                rule,
                field,
                excerpt,
            } => write!(
                f,
                "the scan of its descriptor flags it: {code} {} at {field}: {excerpt}",
                rule.name()
            ),
            WithheldReason::DuplicateName => {
                f.write_str("the server lists more than one tool with this name")
            }
            WithheldReason::NotListed => f.write_str("the server does not list it"),
            WithheldReason::NameTaken { shown, by } => write!(
                f,
                "its name as shown, `{shown}`, is also that of {}: give one of their servers \
                 another `prefix`",
                by.iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl WithheldReason {
    /// The reason a hard finding of the scan gives.
    pub fn flagged(finding: &Finding) -> WithheldReason {
        WithheldReason::Flagged {
            code: finding.rule.code(),
            rule: finding.rule,
            field: finding.place(),
            excerpt: finding.what(),
        }
    }

    /// One reason per rule with a hard finding (its first), in the order found.
    pub(crate) fn flags<'f>(
        findings: impl IntoIterator<Item = &'f Finding>,
    ) -> Vec<WithheldReason> {
        let mut rules: Vec<Rule> = Vec::new();
        let mut out = Vec::new();
        for finding in findings {
            if finding.severity == crate::scan::Severity::Hard && !rules.contains(&finding.rule) {
                rules.push(finding.rule);
                out.push(WithheldReason::flagged(finding));
            }
        }
        out
    }

    /// As a decision's reason, for the audit trail: a policy's reason as it is, the others as
    /// [`DenyReason::Withheld`] with their text.
    pub fn to_deny(&self) -> DenyReason {
        match self {
            WithheldReason::Policy(reason) => reason.clone(),
            other => DenyReason::Withheld {
                why: other.to_string(),
            },
        }
    }
}

/// A tool the server lists that the caller is not shown, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HiddenTool {
    name: String,
    reasons: Vec<WithheldReason>,
}

impl HiddenTool {
    /// The tool's name, as the server lists it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every reason it is withheld, in the order they are asked: drift, the scan, duplicate
    /// name, decision.
    pub fn reasons(&self) -> &[WithheldReason] {
        &self.reasons
    }
}

impl fmt::Display for HiddenTool {
    /// `name: reason; reason`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.name)?;
        write_reasons(f, &self.reasons)
    }
}

/// `reason; reason`.
pub(crate) fn write_reasons(f: &mut fmt::Formatter<'_>, reasons: &[WithheldReason]) -> fmt::Result {
    for (i, reason) in reasons.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{reason}")?;
    }
    Ok(())
}

/// One listed tool: its manifest, why it is hidden (nothing when it is visible), and what the
/// scan of its descriptor found.
#[derive(Clone, Debug)]
pub struct ListedTool {
    manifest: CapabilityManifest,
    reasons: Vec<WithheldReason>,
    scan: Arc<ToolScan>,
}

impl ListedTool {
    /// This tool with the reasons that do not depend on the caller (drift, a duplicate name)
    /// and `decider`'s decision.
    pub(crate) fn decided_by(&self, decider: &(impl Authorize + ?Sized)) -> ListedTool {
        let mut reasons: Vec<WithheldReason> = self
            .reasons
            .iter()
            .filter(|r| !matches!(r, WithheldReason::Policy(_)))
            .cloned()
            .collect();
        reasons.extend(
            decider
                .decide(&self.manifest)
                .into_reasons()
                .into_iter()
                .map(WithheldReason::Policy),
        );
        ListedTool {
            manifest: self.manifest.clone(),
            reasons,
            scan: self.scan.clone(),
        }
    }
}

impl ListedTool {
    /// This tool with one more reason to withhold it.
    pub(crate) fn withheld(mut self, reason: WithheldReason) -> ListedTool {
        self.reasons.push(reason);
        self
    }

    /// This tool with more findings (the fleet's rules'): the hard ones withhold it.
    pub(crate) fn flagged(mut self, findings: Vec<Finding>) -> ListedTool {
        if findings.is_empty() {
            return self;
        }
        self.reasons.extend(WithheldReason::flags(&findings));
        self.scan = Arc::new(self.scan.with(findings));
        self
    }

    /// What the scan of its descriptor found, hard and soft, in the order of its fields (and,
    /// in a [`Fleet`](crate::Fleet), what the fleet's rules found). The hard findings are also
    /// among its [`reasons`](Self::reasons) as [`WithheldReason::Flagged`]; the soft ones are
    /// for reports.
    pub fn findings(&self) -> &[Finding] {
        self.scan.findings()
    }

    /// The scan of its descriptor.
    pub fn scan(&self) -> &ToolScan {
        &self.scan
    }

    /// Its manifest: claims believed as pinned claims when it matches its pin, otherwise as far
    /// as the server is trusted.
    pub fn manifest(&self) -> &CapabilityManifest {
        &self.manifest
    }

    /// Whether the caller is shown it.
    pub fn is_visible(&self) -> bool {
        self.reasons.is_empty()
    }

    /// Every reason it is hidden; empty when it is visible.
    pub fn reasons(&self) -> &[WithheldReason] {
        &self.reasons
    }
}

/// What a caller may see of one server's tool list: each listed tool, in the server's order,
/// visible or hidden with every reason.
///
/// ```
/// use capability::authz::{Ceiling, ToolContext};
/// use capability::mcp::{Lockfile, Visibility, WithheldReason};
/// use capability::Server;
/// use serde_json::json;
///
/// let tools = vec![
///     json!({"name": "read", "inputSchema": {"type": "object"},
///            "annotations": {"readOnlyHint": true}}),
///     json!({"name": "read", "inputSchema": {"type": "object"}, "description": "A twin."}),
///     json!({"name": "peek", "inputSchema": {"type": "object"},
///            "annotations": {"readOnlyHint": true}}),
/// ];
/// let server = Server::untrusted("notes");
/// let mut lock = Lockfile::default();
/// lock.pin(&server, &tools[2..])?;
/// let reader = ToolContext::new("reader", "s-1", Ceiling::ReadOnly);
///
/// let seen = Visibility::of(&server, &tools, Some(&lock), &reader)?;
/// let shown: Vec<&str> = seen.visible().map(|m| m.name()).collect();
/// assert_eq!(shown, ["peek"], "pinned: its read-only claim is believed");
/// let hidden = seen.hidden();
/// assert_eq!(hidden[0].to_string(),
///     "read: it is not in the lockfile; pin it to approve it; the server lists more than \
///      one tool with this name; its side effect (destructive write) exceeds the role's \
///      ceiling (read-only)");
/// assert!(hidden[1].reasons().contains(&WithheldReason::DuplicateName));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Visibility {
    tools: Vec<ListedTool>,
    review: Option<Arc<Review>>,
}

impl Visibility {
    /// What the caller `decider` may see of `server`, which listed `tools` (MCP `Tool` objects,
    /// in its order), with or without a lockfile.
    ///
    /// - Without a lockfile, each manifest is read with the server's trust. With one, the list
    ///   is reviewed against it ([`Lockfile::review`]): a tool that matches its pin has its
    ///   claims believed (as pinned claims); every other one is hidden with a
    ///   [`WithheldReason::Drift`]. A server the lockfile does not know has no approved tool.
    /// - Every tool is [scanned](crate::scan); a hard finding hides it
    ///   ([`WithheldReason::Flagged`]), pinned or not.
    /// - Tools that share a name are all hidden ([`WithheldReason::DuplicateName`]).
    /// - Every tool is put to the decider; a denial adds its reasons
    ///   ([`WithheldReason::Policy`]).
    ///
    /// A hidden tool carries every reason that applies, in that order. A tool that is not a
    /// valid MCP tool, or a server name that is not a provider name, is an error naming it.
    pub fn of(
        server: &Server,
        tools: &[Value],
        lock: Option<&Lockfile>,
        decider: &(impl Authorize + ?Sized),
    ) -> Result<Visibility, ManifestError> {
        Ok(Visibility::undecided(server, tools, lock)?.for_decider(decider))
    }

    /// The list as nobody has decided it yet: drift, the scan and duplicate names only (what
    /// [`Listing::read`](crate::Listing::read) keeps).
    pub(crate) fn undecided(
        server: &Server,
        tools: &[Value],
        lock: Option<&Lockfile>,
    ) -> Result<Visibility, ManifestError> {
        // 1. Each tool's manifest, and its drift when a lockfile is in use; 2. its scan (the
        // review scans each tool once).
        let (manifests, drift, scans, review) = match lock {
            Some(lock) => {
                let review = lock.review(server, tools)?;
                let mut manifests = Vec::with_capacity(tools.len());
                let mut drift = Vec::with_capacity(tools.len());
                let mut scans = Vec::with_capacity(tools.len());
                for t in review.tools() {
                    manifests.push(t.manifest().clone());
                    drift.push(
                        (!t.status().is_approved())
                            .then(|| WithheldReason::Drift(t.status().clone())),
                    );
                    scans.push(t.scan_shared());
                }
                (manifests, drift, scans, Some(review))
            }
            None => {
                let manifests = tools
                    .iter()
                    .map(|tool| from_mcp_tool(tool, server))
                    .collect::<Result<Vec<_>, _>>()?;
                let drift = vec![None; manifests.len()];
                let scans = tools.iter().map(|t| Arc::new(ToolScan::of(t))).collect();
                (manifests, drift, scans, None)
            }
        };

        // 3. Names listed more than once.
        let mut count: HashMap<&str, usize> = HashMap::new();
        for manifest in &manifests {
            *count.entry(manifest.name()).or_default() += 1;
        }
        let duplicate: Vec<bool> = manifests
            .iter()
            .map(|m| count.get(m.name()).is_some_and(|n| *n > 1))
            .collect();

        // 4. The decision is each caller's (`for_decider`).
        let tools = manifests
            .into_iter()
            .zip(drift)
            .zip(scans)
            .zip(duplicate)
            .map(|(((manifest, drift), scan), duplicate)| {
                let mut reasons: Vec<WithheldReason> = drift.into_iter().collect();
                reasons.extend(WithheldReason::flags(scan.findings()));
                if duplicate {
                    reasons.push(WithheldReason::DuplicateName);
                }
                ListedTool {
                    manifest,
                    reasons,
                    scan,
                }
            })
            .collect();
        Ok(Visibility {
            tools,
            review: review.map(Arc::new),
        })
    }

    /// A visibility of these tools (of one or several servers), as decided already.
    pub(crate) fn from_tools(tools: Vec<ListedTool>) -> Visibility {
        Visibility {
            tools,
            review: None,
        }
    }

    /// The same list as another caller sees it: drift and duplicate names stay (they do not
    /// depend on who asks), the decision is `decider`'s. Equal to [`Visibility::of`] with
    /// `decider`, without reading the manifests and reviewing the lockfile again, so a server
    /// can compute the caller-independent part once per tool list.
    pub fn for_decider(&self, decider: &(impl Authorize + ?Sized)) -> Visibility {
        let tools = self
            .tools
            .iter()
            .map(|listed| listed.decided_by(decider))
            .collect();
        Visibility {
            tools,
            review: self.review.clone(),
        }
    }

    /// Every listed tool, in the server's order.
    pub fn tools(&self) -> &[ListedTool] {
        &self.tools
    }

    /// The manifests of the visible tools, in the server's order.
    pub fn visible(&self) -> impl Iterator<Item = &CapabilityManifest> {
        self.tools
            .iter()
            .filter(|t| t.is_visible())
            .map(|t| &t.manifest)
    }

    /// The hidden tools, in the server's order, each with every reason.
    pub fn hidden(&self) -> Vec<HiddenTool> {
        self.tools
            .iter()
            .filter(|t| !t.is_visible())
            .map(|t| HiddenTool {
                name: t.manifest.name().to_owned(),
                reasons: t.reasons.clone(),
            })
            .collect()
    }

    /// The lockfile's review of the server, when a lockfile is in use.
    pub fn review(&self) -> Option<&Review> {
        self.review.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use capability_core::authz::{Ceiling, ToolContext};
    use serde_json::json;

    use super::*;

    /// `for_decider` of a view computed for one caller is what `of` computes for another: the
    /// same tools, visible or hidden with the same reasons in the same order.
    #[test]
    fn for_decider_is_of_with_that_decider() {
        let tools = vec![
            json!({"name": "read", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "read", "inputSchema": {"type": "object"}, "description": "A twin."}),
            json!({"name": "peek", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "wipe", "inputSchema": {"type": "object"},
                   "annotations": {"destructiveHint": true}}),
            json!({"name": "new", "inputSchema": {"type": "object"}}),
        ];
        let server = Server::trusted("notes");
        let mut lock = Lockfile::default();
        lock.pin(&server, &tools[..4]).expect("pins");
        let reader = ToolContext::new("reader", "s-1", Ceiling::ReadOnly);
        let writer = ToolContext::new("writer", "s-2", Ceiling::Unrestricted);
        for lock in [None, Some(&lock)] {
            let for_reader = Visibility::of(&server, &tools, lock, &reader).expect("valid");
            let for_writer = Visibility::of(&server, &tools, lock, &writer).expect("valid");
            for (from, to, expected) in [
                (&for_reader, &writer, &for_writer),
                (&for_writer, &reader, &for_reader),
            ] {
                let again = from.for_decider(to);
                let pairs = |v: &Visibility| -> Vec<(String, Vec<WithheldReason>)> {
                    v.tools()
                        .iter()
                        .map(|t| (t.manifest().name().to_owned(), t.reasons().to_vec()))
                        .collect()
                };
                assert_eq!(pairs(&again), pairs(expected), "lock: {}", lock.is_some());
                let listing = crate::Listing::read(&server, &tools, lock).expect("valid");
                let peek = listing.tool("peek").expect("listed").decided_by(to);
                assert_eq!(peek.reasons(), expected.tools()[2].reasons());
            }
            // The two callers do see different things, so the test can tell them apart.
            assert_ne!(
                for_reader.visible().count(),
                for_writer.visible().count(),
                "lock: {}",
                lock.is_some()
            );
        }
    }
}
