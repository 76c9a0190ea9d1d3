//! Authorization: may this caller call this tool?
//!
//! One decision answers it, for listing and for calling alike. It lives in `rules.rs` on the
//! bottom floor of this module and imports nothing above it: patterns, the side-effect ceiling,
//! scopes and operator assertions are applied there and nowhere else. Everything that decides
//! goes through it: a role of a [`Policy`], a [`ToolContext`], an authority grant (in
//! `capability-gate`), and anything later. [`PolicyIndex`] is its compiled twin for the hot
//! path, proven equal to it by a property test.
//!
//! [`Authorize`] is the seam: the audited dispatch, the governed MCP client and the command line
//! accept any decider through it.
//!
//! ```
//! use capability::authz::{Authorize, Ceiling, ToolContext};
//! use capability::CapabilityManifest;
//!
//! fn shown<'t>(who: &impl Authorize, tools: &'t [CapabilityManifest]) -> Vec<&'t str> {
//!     tools.iter().filter(|t| who.decide(t).is_allowed()).map(|t| t.name()).collect()
//! }
//!
//! let tools = [
//!     CapabilityManifest::builder("list_pods").read_only(true).build()?,
//!     CapabilityManifest::builder("restart_pod").build()?,
//! ];
//! let monitor = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
//! assert_eq!(shown(&monitor, &tools), ["list_pods"]);
//! # Ok::<(), capability::ManifestError>(())
//! ```
//!
#![doc = include_str!("../../../docs/policy.md")]

mod approvals;
mod context;
mod decision;
mod edge;
mod file;
mod index;
mod items;
mod pattern;
mod policy;
mod rules;
mod servers;

pub use approvals::{ApprovalSettings, DEFAULT_PROPOSAL_SECS, Hold};
pub use context::{Denial, ToolContext};
pub use decision::{Ceiling, Decision, DenyReason, Effect};
pub use edge::{AuthSettings, DEFAULT_ALGORITHMS, HttpSettings, SUPPORTED_ALGORITHMS};
pub use index::{PolicyIndex, RoleId};
pub use items::{Action, ItemPattern, ServerRequestKind, resolve_uri};
pub use pattern::Pattern;
pub use policy::{Policy, PolicyError};
pub use rules::{Assertions, Rules};
pub use servers::{ExchangeEntry, ServerEntry};

use crate::manifest::CapabilityManifest;

/// Anything that decides whether a caller may call a tool: a role of a policy
/// ([`ToolContext`]), an authority grant, a test double.
///
/// The audited dispatch, the governed MCP client and the command line take any `Authorize`, so
/// every decider is audited and enforced the same way. An implementation must be a pure
/// function of its state and the tool: listing and calling ask it the same question and must get
/// the same answer. (The one allowed exception is time: an authority grant's context reads its
/// clock, so a grant that expires between listing and calling is denied at the call.)
pub trait Authorize {
    /// The decision for one tool: allowed, or denied with every reason.
    fn decide(&self, tool: &CapabilityManifest) -> Decision;

    /// Who is asking, for the audit trail and for messages: the role, or the grant's holder.
    fn principal(&self) -> &str;

    /// The session the calls belong to.
    fn session(&self) -> &str;

    /// The version of the rules that decided (a policy's `version`), if known.
    fn policy_version(&self) -> Option<&str> {
        None
    }

    /// The decision for any action: a tool call by [`decide`](Self::decide); a resource, a
    /// prompt or a server's request by the decider's rules for them. The default, for a
    /// decider that has none (an authority grant, a test double), denies everything but tool
    /// calls: deny by default.
    fn decide_action(&self, action: &Action<'_>) -> Decision {
        match action {
            Action::CallTool(tool) => self.decide(tool),
            Action::ServerRequest { kind, .. } => {
                Decision::deny(DenyReason::ServerRequestNotAllowed {
                    method: kind.method().to_owned(),
                })
            }
            _ => Decision::deny(DenyReason::NotAllowed),
        }
    }

    /// Authorizes a call of this tool, before it happens: `Err` carries every reason.
    fn authorize(&self, tool: &CapabilityManifest) -> Result<(), Denial> {
        let decision = self.decide(tool);
        if decision.is_allowed() {
            Ok(())
        } else {
            Err(Denial::new(
                self.principal(),
                self.session(),
                tool,
                decision.into_reasons(),
            ))
        }
    }
}

impl<A: Authorize + ?Sized> Authorize for &A {
    fn decide(&self, tool: &CapabilityManifest) -> Decision {
        (**self).decide(tool)
    }

    fn principal(&self) -> &str {
        (**self).principal()
    }

    fn session(&self) -> &str {
        (**self).session()
    }

    fn policy_version(&self) -> Option<&str> {
        (**self).policy_version()
    }

    fn decide_action(&self, action: &Action<'_>) -> Decision {
        (**self).decide_action(action)
    }
}
