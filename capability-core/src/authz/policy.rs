//! The role permission matrix: roles with a ceiling, tool patterns and scopes, and operator
//! assertions about specific tools, loaded from TOML.

use std::path::Path;
use std::sync::Arc;

use toml::Spanned;

use super::approvals::{ApprovalSettings, Hold};
use super::context::ToolContext;
use super::edge::{AuthSettings, HttpSettings};
use super::file::PolicyFile;
use super::items::{Action, ItemPattern, ServerRequestKind};
use super::pattern::Pattern;
use super::rules::{Assertions, Decision, DenyReason, RoleRules, Rules};
use super::servers::ServerEntry;
use crate::manifest::CapabilityManifest;
use crate::toml_file::{self, TomlError};

/// A policy file that could not be loaded: where, and why.
pub type PolicyError = TomlError;

/// What a policy is called in messages about a file without a name.
const WHAT: &str = "policy";

/// A role permission matrix (ADR-105 D2).
///
/// Each role has a side-effect ceiling, `allow` and `deny` patterns over `provider/tool` names
/// (globs: `*` matches any run of characters, `/` included; `?` one character), and the scopes
/// it holds. Deny beats allow; a tool that no `allow` pattern matches is denied; an unknown role
/// is denied, never defaulted to another. `allow` patterns match exactly (letter case counts,
/// and `k8s/*` needs the provider `k8s`); `deny` patterns cannot be escaped: they ignore ASCII
/// case, and their provider part also matches a tool without a provider (see
/// [`Pattern`](super::Pattern)). Role names may not be empty or have white space around them. Operator assertions (`[assertions."provider/tool"]`)
/// say what a specific tool really does, and win over its code or server. The optional
/// `[bearer_tokens]` table gives callers over HTTP a role by the SHA-256 of their bearer token
/// (`"sha256:<64 hex>" = "<role>"`, so the file holds no secret; see
/// [`Policy::bearer_tokens`]).
///
/// ```
/// use capability::{CapabilityManifest, Policy};
///
/// let policy = Policy::from_toml_str(r#"
///     version = "2026-11"
///
///     [roles.auditor]
///     ceiling = "read-only"
///     allow = ["*"]
///     deny = ["ssh/*"]
///     scopes = ["k8s:read"]
///
///     [assertions."browser/take_screenshot"]
///     read_only = false      # it writes a file, whatever the server says
/// "#)?;
///
/// let list = CapabilityManifest::builder("list_pods").provider("k8s").read_only(true)
///     .scope("k8s:read").build()?;
/// let restart = CapabilityManifest::builder("restart_pod").provider("k8s")
///     .scope("k8s:write").build()?;
/// assert!(policy.decide("auditor", &list).is_allowed());
/// assert!(!policy.decide("auditor", &restart).is_allowed());
/// assert!(!policy.decide("intern", &list).is_allowed(), "unknown roles are denied");
///
/// let tools = [list, restart];
/// let shown: Vec<&CapabilityManifest> = policy.visible_tools("auditor", &tools);
/// assert_eq!(shown.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Policy {
    version: Option<String>,
    /// The `[servers]` table, in name order.
    servers: Vec<ServerEntry>,
    /// Sorted by name.
    pub(super) roles: Vec<Arc<RoleRules>>,
    pub(super) assertions: Arc<Assertions>,
    /// The `[bearer_tokens]` table: (SHA-256 hex of a token, role), in hash order.
    bearer_tokens: Vec<(String, String)>,
    /// The `[auth]` table, if any.
    auth: Option<AuthSettings>,
    /// The `[http]` table, or its defaults.
    http: HttpSettings,
    /// The `[approvals]` table, if any.
    approvals: Option<ApprovalSettings>,
}

impl Policy {
    /// Loads a policy from TOML text. A syntax error, an unknown key, a bad value, a bad pattern
    /// or scope: each gives an error with its line and column.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        let at = |offset: usize, message: String| TomlError::at(WHAT, text, offset, message);
        let file: PolicyFile = toml_file::parse(WHAT, text)?;
        let mut roles = Vec::with_capacity(file.roles.len());
        for (name, role) in file.roles {
            check_role_name(name.get_ref()).map_err(|message| at(name.span().start, message))?;
            let scopes = role
                .scopes
                .iter()
                .map(|scope| {
                    capability_rules::check_scope(scope.get_ref())
                        .map(|()| scope.get_ref().clone())
                        .map_err(|v| at(scope.span().start, v.to_string()))
                })
                .collect::<Result<Vec<String>, TomlError>>()?;
            let patterns = |list: Vec<Spanned<String>>| {
                list.into_iter()
                    .map(|p| {
                        let start = p.span().start;
                        Pattern::new(p.into_inner()).map_err(|message| at(start, message))
                    })
                    .collect::<Result<Vec<Pattern>, TomlError>>()
            };
            let mut rules = Rules::new(role.ceiling)
                .closed_world_only(role.closed_world_only)
                .scopes(capability_rules::normalize_scopes(
                    scopes.iter().map(String::as_str),
                ));
            rules.allow = patterns(role.allow)?;
            rules.deny = patterns(role.deny)?;
            let approve_at = role.approve.first().map(|p| p.span().start);
            let approve = patterns(role.approve)?;
            let confirm = patterns(role.confirm)?;
            let items = |list: Vec<Spanned<String>>, requests: bool| {
                list.into_iter()
                    .map(|p| {
                        let start = p.span().start;
                        let pattern = ItemPattern::new(p.into_inner()).map_err(|m| at(start, m))?;
                        if requests
                            && !ServerRequestKind::ALL
                                .iter()
                                .any(|k| pattern.matches_kind(k.as_str()))
                        {
                            return Err(at(
                                start,
                                format!(
                                    "`{}` names no server request: write `server/sampling`, \
                                     `server/elicitation` or `server/roots`",
                                    pattern.as_str()
                                ),
                            ));
                        }
                        Ok(pattern)
                    })
                    .collect::<Result<Vec<ItemPattern>, TomlError>>()
            };
            rules.items.resources = items(role.resources, false)?;
            rules.items.deny_resources = items(role.deny_resources, false)?;
            rules.items.prompts = items(role.prompts, false)?;
            rules.items.deny_prompts = items(role.deny_prompts, false)?;
            rules.items.server_requests = items(role.server_requests, true)?;
            if let (Some(start), None) = (approve_at, &file.approvals) {
                return Err(at(
                    start,
                    format!(
                        "role `{}` holds calls back for approval, but the policy has no \
                         `[approvals]` table to say who approves them",
                        name.get_ref()
                    ),
                ));
            }
            roles.push(Arc::new(RoleRules {
                name: name.into_inner(),
                rules,
                approve,
                confirm,
            }));
        }
        // Sorted by name already (a map), and kept so: lookups are binary searches.
        roles.sort_by(|a, b| a.name.cmp(&b.name));
        let mut assertions = Assertions::default();
        for (key, assertion) in file.assertions {
            let (provider, name) = match key.get_ref().split_once('/') {
                Some((provider, name)) => (provider, name),
                None => ("", key.get_ref().as_str()),
            };
            let valid = capability_rules::check_tool_name(name).is_ok()
                && (provider.is_empty() || capability_rules::check_provider(provider).is_ok());
            if !valid {
                return Err(at(
                    key.span().start,
                    format!(
                        "`{}` does not name a tool; write `provider/tool` or `tool`, \
                         without patterns",
                        key.get_ref()
                    ),
                ));
            }
            assertions.insert(provider, name, assertion);
        }
        let servers = ServerEntry::from_file(file.servers, &at)?;
        let mut bearer_tokens = Vec::with_capacity(file.bearer_tokens.len());
        for (key, role) in file.bearer_tokens {
            let hex = key
                .get_ref()
                .strip_prefix("sha256:")
                .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| {
                    at(
                        key.span().start,
                        format!(
                            "`{}` is not a token's hash: write `sha256:` and the 64 hex digits \
                             of the token's SHA-256 (`printf %s \"$TOKEN\" | sha256sum`)",
                            key.get_ref().escape_debug()
                        ),
                    )
                })?;
            if roles
                .binary_search_by(|r| r.name.as_str().cmp(role.get_ref()))
                .is_err()
            {
                return Err(at(
                    role.span().start,
                    format!("bearer token of role `{}`: no such role", role.get_ref()),
                ));
            }
            let hex = hex.to_ascii_lowercase();
            if bearer_tokens.iter().any(|(h, _)| *h == hex) {
                return Err(at(
                    key.span().start,
                    format!("the token sha256:{hex} is listed twice"),
                ));
            }
            bearer_tokens.push((hex, role.into_inner()));
        }
        let is_role = |name: &str| {
            roles
                .binary_search_by(|r| r.name.as_str().cmp(name))
                .is_ok()
        };
        let auth = file.auth.map(|a| a.check(is_role, &at)).transpose()?;
        let approvals = file.approvals.map(|a| a.check(is_role, &at)).transpose()?;
        let http = match file.http {
            Some(http) => http.check(&at)?,
            None => HttpSettings::default(),
        };
        Ok(Policy {
            version: file.version,
            servers,
            roles,
            assertions: Arc::new(assertions),
            bearer_tokens,
            auth,
            http,
            approvals,
        })
    }

    /// Loads a policy from a TOML file; errors name the file.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let path = path.as_ref();
        let text = toml_file::read(WHAT, path, false)?.unwrap_or_default();
        Policy::from_toml_str(&text).map_err(|error| error.in_file(path))
    }

    /// The `version` the policy file declares, if any.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The `[bearer_tokens]` table: for each token a caller may present (over Streamable HTTP,
    /// `Authorization: Bearer <token>`), the SHA-256 of the token in lowercase hex and the role
    /// it gives. The file holds hashes, never tokens; each role is a role of the policy.
    ///
    /// ```
    /// use capability::Policy;
    ///
    /// // printf %s "test" | sha256sum
    /// let policy = Policy::from_toml_str(r#"
    ///     [roles.viewer]
    ///     ceiling = "read-only"
    ///     allow = ["*"]
    ///
    ///     [bearer_tokens]
    ///     "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" = "viewer"
    /// "#)?;
    /// let (hash, role) = policy.bearer_tokens().next().expect("one token");
    /// assert_eq!(role, "viewer");
    /// assert!(hash.starts_with("9f86d0"));
    /// # Ok::<(), capability::authz::PolicyError>(())
    /// ```
    pub fn bearer_tokens(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.bearer_tokens
            .iter()
            .map(|(hash, role)| (hash.as_str(), role.as_str()))
    }

    /// The `[auth]` table: this server as an OAuth 2.1 resource server (issuer, audience, and
    /// which token gets which role), if the policy has one. See
    /// [`AuthSettings`](super::AuthSettings).
    pub fn auth(&self) -> Option<&AuthSettings> {
        self.auth.as_ref()
    }

    /// The `[http]` table: the HTTP edge's limits (origins, sessions, body size, rate), with
    /// their defaults when the policy has none. See [`HttpSettings`](super::HttpSettings).
    pub fn http(&self) -> &HttpSettings {
        &self.http
    }

    /// The roles, sorted by name.
    pub fn roles(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.roles.iter().map(|r| r.name.as_str())
    }

    fn role(&self, role: &str) -> Option<&Arc<RoleRules>> {
        self.roles
            .binary_search_by(|r| r.name.as_str().cmp(role))
            .ok()
            .map(|i| &self.roles[i])
    }

    /// The one decision function: may `role` call `tool`? Used for listing and for dispatch.
    pub fn decide(&self, role: &str, tool: &CapabilityManifest) -> Decision {
        match self.role(role) {
            Some(role) => role.rules.decide(&self.assertions, tool),
            None => Decision::deny(DenyReason::UnknownRole {
                role: role.to_owned(),
            }),
        }
    }

    /// The one decision for any action of `role`: a tool call, a resource, a prompt, a
    /// server's request (see [`Rules::decide_action`]). An unknown role is denied.
    ///
    /// ```
    /// use capability::Policy;
    /// use capability::authz::{Action, DenyReason, ServerRequestKind};
    ///
    /// let policy = Policy::from_toml_str(r#"
    ///     [roles.viewer]
    ///     ceiling = "read-only"
    ///     resources = ["memory/memory://*"]
    ///     prompts = ["everything/simple_*"]
    ///     server_requests = ["everything/elicitation"]
    /// "#)?;
    /// let read = Action::Resource { server: "memory", uri: "memory://graph" };
    /// assert!(policy.decide_action("viewer", &read).is_allowed());
    /// let prompt = Action::Prompt { server: "everything", name: "complex_prompt" };
    /// assert_eq!(policy.decide_action("viewer", &prompt).reasons(), [DenyReason::NotAllowed]);
    /// let sampling = Action::ServerRequest { server: "everything", kind: ServerRequestKind::Sampling };
    /// assert!(!policy.decide_action("viewer", &sampling).is_allowed());
    /// assert!(!policy.decide_action("intern", &read).is_allowed());
    /// # Ok::<(), capability::authz::PolicyError>(())
    /// ```
    pub fn decide_action(&self, role: &str, action: &Action<'_>) -> Decision {
        match self.role(role) {
            Some(role) => role.rules.decide_action(&self.assertions, action),
            None => Decision::deny(DenyReason::UnknownRole {
                role: role.to_owned(),
            }),
        }
    }

    /// The tools `role` may call, in their order: filter a tool list with this before
    /// converting it to an LLM provider's schema, so a role never sees what it may not call.
    /// An unknown role sees nothing.
    pub fn visible_tools<'t>(
        &self,
        role: &str,
        tools: &'t [CapabilityManifest],
    ) -> Vec<&'t CapabilityManifest> {
        match self.role(role) {
            Some(role) => tools
                .iter()
                .filter(|tool| role.rules.decide(&self.assertions, tool).is_allowed())
                .collect(),
            None => Vec::new(),
        }
    }

    /// The grant of `role` for one session, to authorize each call; `None` for an unknown role.
    pub fn context(&self, role: &str, session: impl Into<String>) -> Option<ToolContext> {
        self.role(role).map(|rules| {
            ToolContext::from_policy(
                session.into(),
                Arc::clone(rules),
                Arc::clone(&self.assertions),
                self.version.as_deref().map(Arc::from),
            )
        })
    }

    /// The operator assertions of the policy (`[assertions."provider/tool"]`). Give them to
    /// anything else that decides about the same tools (an authority grant) so it applies them
    /// as the policy's roles do.
    pub fn assertions(&self) -> &Assertions {
        &self.assertions
    }

    /// The effective hints of a tool, with the operator's assertion about it applied.
    pub(crate) fn effective_flags(&self, tool: &CapabilityManifest) -> capability_rules::Flags {
        self.assertions.flags(tool)
    }

    /// The manifest as the policy sees it: with the operator's assertion about it applied, if
    /// there is one.
    pub fn effective_manifest(&self, tool: &CapabilityManifest) -> CapabilityManifest {
        match self.assertions.get(tool.provider(), tool.name()) {
            Some(assertion) => tool.with_assertion(assertion),
            None => tool.clone(),
        }
    }
}

/// A role name is refused when it is empty or has white space around it: `[roles." monitor"]`
/// would be a second role that a caller asking for `monitor` never gets, and nobody reading
/// the file sees the difference.
fn check_role_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        Err("a role name cannot be empty".to_owned())
    } else if name.trim() != name {
        Err(format!(
            "role name `{}` has white space around it; write `{}`",
            name.escape_debug(),
            name.trim().escape_debug()
        ))
    } else {
        Ok(())
    }
}

impl Policy {
    /// The `[servers]` table: the operator's names for MCP servers, in name order.
    pub fn servers(&self) -> &[ServerEntry] {
        &self.servers
    }

    /// The `[approvals]` table, if the policy has one (see [`ApprovalSettings`]).
    pub fn approvals(&self) -> Option<&ApprovalSettings> {
        self.approvals.as_ref()
    }

    /// Whether a call of `provider/name` by `role` needs a human's signed approval of exactly
    /// that call: [`hold`](Self::hold) is [`Hold::Signature`].
    pub fn needs_approval(&self, role: &str, provider: Option<&str>, name: &str) -> bool {
        self.hold(role, provider, name) == Some(Hold::Signature)
    }

    /// Whether, and how, a call of `provider/name` by `role` is held for a human's consent:
    /// [`Hold::Signature`] when one of the role's `approve` patterns catches it,
    /// [`Hold::Confirmation`] when only a `confirm` pattern does (a tool that wants a
    /// signature never takes a confirmation). Patterns catch loosely, as `deny` patterns do:
    /// letter case, or a tool without a provider, does not escape them. The role must still
    /// be allowed the tool; consent never lifts a denial. An unknown role: `None` (it is
    /// denied everything anyway).
    ///
    /// ```
    /// use capability::Policy;
    /// use capability::authz::Hold;
    ///
    /// let policy = Policy::from_toml_str(r#"
    ///     [roles.operator]
    ///     ceiling = "unrestricted"
    ///     allow = ["*"]
    ///     approve = ["git/git_reset"]
    ///     confirm = ["git/*"]
    ///
    ///     [approvals]
    ///     audience = "gw"
    /// "#)?;
    /// assert_eq!(policy.hold("operator", Some("git"), "git_reset"), Some(Hold::Signature));
    /// assert_eq!(policy.hold("operator", Some("git"), "git_commit"), Some(Hold::Confirmation));
    /// assert_eq!(policy.hold("operator", Some("fs"), "read_file"), None);
    /// # Ok::<(), capability::authz::PolicyError>(())
    /// ```
    pub fn hold(&self, role: &str, provider: Option<&str>, name: &str) -> Option<Hold> {
        let role = self.role(role)?;
        let caught = |patterns: &[Pattern]| patterns.iter().any(|p| p.denies(provider, name));
        if caught(&role.approve) {
            Some(Hold::Signature)
        } else if caught(&role.confirm) {
            Some(Hold::Confirmation)
        } else {
            None
        }
    }
}
