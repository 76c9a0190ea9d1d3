//! The grant of one agent in one session, and a call it refused.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::pattern::Pattern;
use super::rules::{Assertions, Ceiling, Decision, DenyReason, RoleRules, Rules};
use super::{Action, Authorize};
use crate::manifest::{Capability, CapabilityManifest};

/// The grant of one agent in one session: its role, side-effect ceiling and scopes. It
/// authorizes each call before the call happens.
///
/// Build one from a policy with [`Policy::context`](crate::Policy::context) (the role's tool
/// patterns and the policy's operator assertions then apply too), or by hand with
/// [`ToolContext::new`] for a grant that is not in a policy file.
///
/// ```
/// use capability::Capability;
/// use capability::authz::{Ceiling, DenyReason, ToolContext};
///
/// /// Restart a pod.
/// #[derive(Capability)]
/// #[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
/// struct RestartPod;
///
/// let ctx = ToolContext::new("monitor", "session-7", Ceiling::ReadOnly).with_scopes(["k8s:read"]);
/// let denial = ctx.authorize_tool::<RestartPod>().unwrap_err();
/// assert!(matches!(denial.reasons()[0], DenyReason::CeilingExceeded { .. }));
/// assert_eq!(
///     denial.to_string(),
///     "role `monitor` (session `session-7`) may not call `k8s/restart_pod`: its side effect \
///      (destructive write) exceeds the role's ceiling (read-only); missing scopes `k8s:write`"
/// );
/// ```
#[derive(Clone, Debug)]
pub struct ToolContext {
    session: String,
    rules: Arc<RoleRules>,
    assertions: Arc<Assertions>,
    policy_version: Option<Arc<str>>,
}

impl ToolContext {
    /// A grant outside any policy: every tool name is allowed, within the ceiling and scopes.
    pub fn new(role: impl Into<String>, session: impl Into<String>, ceiling: Ceiling) -> Self {
        ToolContext {
            session: session.into(),
            rules: Arc::new(RoleRules {
                name: role.into(),
                rules: Rules::new(ceiling).allow(Pattern::any()),
                approve: Vec::new(),
                confirm: Vec::new(),
            }),
            assertions: Arc::new(Assertions::default()),
            policy_version: None,
        }
    }

    pub(crate) fn from_policy(
        session: String,
        rules: Arc<RoleRules>,
        assertions: Arc<Assertions>,
        policy_version: Option<Arc<str>>,
    ) -> Self {
        ToolContext {
            session,
            rules,
            assertions,
            policy_version,
        }
    }

    /// Grants these scopes (in addition to those already granted).
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Arc::make_mut(&mut self.rules).rules.add_scopes(scopes);
        self
    }

    /// Holds only those of its scopes that are also in `held`: for a caller whose credentials
    /// carry scopes (an OAuth access token's `scope`), the role is the most it may hold and the
    /// token narrows it.
    ///
    /// ```
    /// use capability::authz::{Ceiling, ToolContext};
    ///
    /// let ctx = ToolContext::new("oncall", "s-1", Ceiling::Unrestricted)
    ///     .with_scopes(["k8s:read", "k8s:write"])
    ///     .within_scopes(&["k8s:read".to_owned(), "mcp:admin".to_owned()]);
    /// assert_eq!(ctx.scopes(), ["k8s:read"], "never more than the role holds");
    /// ```
    pub fn within_scopes(mut self, held: &[String]) -> Self {
        Arc::make_mut(&mut self.rules).rules.retain_scopes(held);
        self
    }

    /// Allows closed-world tools only (`open_world` false).
    pub fn closed_world_only(mut self, yes: bool) -> Self {
        Arc::make_mut(&mut self.rules).rules.closed_world_only = yes;
        self
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.rules.name
    }

    /// The session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The side-effect ceiling.
    pub fn ceiling(&self) -> Ceiling {
        self.rules.rules.ceiling()
    }

    /// The granted scopes, sorted.
    pub fn scopes(&self) -> &[String] {
        self.rules.rules.held_scopes()
    }

    /// The decision for a tool, whatever it is.
    pub fn decide(&self, tool: &CapabilityManifest) -> Decision {
        Authorize::decide(self, tool)
    }

    /// Authorizes a call of this tool, before it happens.
    pub fn authorize(&self, tool: &CapabilityManifest) -> Result<(), Denial> {
        Authorize::authorize(self, tool)
    }

    /// Authorizes a call of a typed tool, before it happens.
    pub fn authorize_tool<T: Capability + ?Sized>(&self) -> Result<(), Denial> {
        self.authorize(T::manifest())
    }
}

/// A call that was not authorized: who, which tool, and every reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    role: String,
    session: String,
    tool: String,
    reasons: Vec<DenyReason>,
    /// What was asked: `call` a tool, `read` a resource, `get` a prompt, `send` a request.
    #[serde(default = "call_verb", skip_serializing_if = "is_call")]
    verb: String,
}

fn call_verb() -> String {
    "call".to_owned()
}

fn is_call(verb: &str) -> bool {
    verb == "call"
}

impl Authorize for ToolContext {
    fn decide(&self, tool: &CapabilityManifest) -> Decision {
        self.rules.rules.decide(&self.assertions, tool)
    }

    fn principal(&self) -> &str {
        &self.rules.name
    }

    fn session(&self) -> &str {
        &self.session
    }

    fn policy_version(&self) -> Option<&str> {
        self.policy_version.as_deref()
    }

    fn decide_action(&self, action: &Action<'_>) -> Decision {
        self.rules.rules.decide_action(&self.assertions, action)
    }
}

impl Denial {
    /// A refusal of `tool` for `principal` in `session`, with every reason.
    pub fn new(
        principal: &str,
        session: &str,
        tool: &CapabilityManifest,
        reasons: Vec<DenyReason>,
    ) -> Denial {
        Denial {
            role: principal.to_owned(),
            session: session.to_owned(),
            tool: tool.qualified_name(),
            reasons,
            verb: call_verb(),
        }
    }

    /// A refusal of any action (a tool call, a resource read, a prompt, a server's request) for
    /// `principal` in `session`, with every reason.
    ///
    /// ```
    /// use capability::authz::{Action, Denial, DenyReason};
    ///
    /// let read = Action::Resource { server: "fs", uri: "file:///etc/passwd" };
    /// let denial = Denial::for_action("viewer", "s-1", &read, vec![DenyReason::NotAllowed]);
    /// assert_eq!(denial.tool(), "fs/file:///etc/passwd");
    /// assert_eq!(denial.to_string(),
    ///     "role `viewer` (session `s-1`) may not read `fs/file:///etc/passwd`: no `allow` \
    ///      pattern of the role matches it");
    /// ```
    pub fn for_action(
        principal: &str,
        session: &str,
        action: &Action<'_>,
        reasons: Vec<DenyReason>,
    ) -> Denial {
        let (tool, verb) = match action {
            Action::CallTool(tool) => return Denial::new(principal, session, tool, reasons),
            Action::Resource { server, uri } => (format!("{server}/{uri}"), "read"),
            Action::Prompt { server, name } => (format!("{server}/{name}"), "get"),
            Action::ServerRequest { server, kind } => {
                (format!("{server}/{}", kind.method()), "receive")
            }
        };
        Denial {
            role: principal.to_owned(),
            session: session.to_owned(),
            tool,
            reasons,
            verb: verb.to_owned(),
        }
    }

    /// The role: whoever decided ([`Authorize::principal`]), `grant:<id>` for an authority
    /// grant.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The tool, as `provider/name`.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Every reason, as typed data.
    pub fn reasons(&self) -> &[DenyReason] {
        &self.reasons
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "role `{}` (session `{}`) may not {} `{}`: ",
            self.role, self.session, self.verb, self.tool
        )?;
        for (i, reason) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            reason.fmt(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for Denial {}
