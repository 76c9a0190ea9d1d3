//! What a call asks and who asks it, as the dispatcher records them.

use serde_json::Value;

use capability_core::authz::{Action, Authorize};
use capability_core::manifest::CapabilityManifest;

/// One request, for the record: what is asked ([`Action`]), its MCP method, and its input.
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::audit::Request;
/// use capability::authz::Action;
/// use serde_json::json;
///
/// let tool = CapabilityManifest::builder("list_pods").build()?;
/// let input = json!({"ns": "prod"});
/// let call = Request::tool(&tool, &input);
/// assert_eq!(call.method, None);
/// let read = Request::mcp("resources/read", Action::Resource { server: "fs", uri: "file:///a" }, &input);
/// assert_eq!(read.method, Some("resources/read"));
/// # Ok::<(), capability::ManifestError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// What is asked.
    pub action: Action<'a>,
    /// The MCP method (`tools/call`, `resources/read`, ...); `None` for a tool called in process.
    pub method: Option<&'a str>,
    /// The request's input (a tool's arguments, a read's `{"uri": ..}`, a prompt's arguments).
    pub input: &'a Value,
}

impl<'a> Request<'a> {
    /// A call of `tool` in process.
    pub fn tool(tool: &'a CapabilityManifest, input: &'a Value) -> Self {
        Request {
            action: Action::CallTool(tool),
            method: None,
            input,
        }
    }

    /// An MCP request.
    pub fn mcp(method: &'a str, action: Action<'a>, input: &'a Value) -> Self {
        Request {
            action,
            method: Some(method),
            input,
        }
    }

    /// The descriptor hash recorded: the tool's, or none for what is not a tool.
    pub(crate) fn descriptor_hash(&self) -> &'a str {
        match self.action {
            Action::CallTool(tool) => tool.descriptor_hash(),
            _ => "",
        }
    }
}

/// Who asks, for a record of a call that no decider decided ([`AuditedDispatch::refuse`]):
/// the role (or `(none)`), the session and the policy's version.
///
/// [`AuditedDispatch::refuse`]: super::AuditedDispatch::refuse
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subject<'a> {
    /// The role, or the principal that decides (`grant:<id>`).
    pub role: &'a str,
    /// The session.
    pub session: &'a str,
    /// The version of the rules, if known.
    pub policy_version: Option<&'a str>,
}

impl<'a> Subject<'a> {
    /// `role` in `session`.
    pub fn new(role: &'a str, session: &'a str) -> Self {
        Subject {
            role,
            session,
            policy_version: None,
        }
    }

    /// With the version of the policy that applies.
    pub fn policy_version(mut self, version: Option<&'a str>) -> Self {
        self.policy_version = version;
        self
    }

    /// Who a decider decides for.
    pub fn of(decider: &'a (impl Authorize + ?Sized)) -> Self {
        Subject {
            role: decider.principal(),
            session: decider.session(),
            policy_version: decider.policy_version(),
        }
    }
}
