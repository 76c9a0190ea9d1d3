//! What a request asks, read from its JSON-RPC body without decoding what is only passed on,
//! and the record of a request the edge refuses: a call refused at the edge (no token, a bad
//! one, over its rate, missing scopes) is on record like one refused by the governed server.

use std::sync::Arc;

use capability_audit::{AuditedDispatch, Caller, Principal, Request, Subject};
use capability_core::authz::{Action, DenyReason};
use capability_core::manifest::CapabilityManifest;
use capability_mcp::{Handling, method};
use serde::Deserialize;
use serde_json::Value;

/// The role recorded for a caller the edge gave none.
const NO_ROLE: &str = "(none)";
/// The name of a tool whose name is not a valid one, in a record.
const INVALID_NAME: &str = "invalid_tool_name";

/// The parts of a JSON-RPC request the edge reads.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Peek {
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) params: Option<Value>,
}

impl Peek {
    /// The request in `body`, when it is one JSON-RPC request (not a batch, not a reply).
    pub(crate) fn of(body: &[u8]) -> Peek {
        serde_json::from_slice(body).unwrap_or_default()
    }

    pub(crate) fn is(&self, name: &str) -> bool {
        self.method.as_deref() == Some(name)
    }

    fn param(&self, name: &str) -> Option<&str> {
        self.params.as_ref()?.get(name)?.as_str()
    }

    /// The tool a `tools/call` names.
    pub(crate) fn tool(&self) -> Option<&str> {
        if self.is("tools/call") {
            self.param("name")
        } else {
            None
        }
    }

    /// Whether the method is one the governed server decides and records (a call, a read, a
    /// get): refused at the edge, it is recorded too.
    fn is_decided(&self) -> bool {
        self.method
            .as_deref()
            .and_then(method)
            .is_some_and(|m| matches!(m.handling, Handling::Decided | Handling::Owned))
    }
}

/// Where the edge records what it refuses.
#[derive(Clone)]
pub(crate) struct Recording {
    pub(crate) dispatch: Arc<AuditedDispatch>,
    pub(crate) server: String,
    pub(crate) policy_version: Option<String>,
    pub(crate) listings: Option<Manifests>,
}

/// Where the edge finds the manifest of the tool a `tools/call` names.
pub(crate) type Manifests = Arc<dyn Fn(&str) -> Option<CapabilityManifest> + Send + Sync>;

impl Recording {
    /// The manifest of the tool `name` as its server lists it, or one made for the record.
    pub(crate) fn manifest(&self, name: &str) -> Option<CapabilityManifest> {
        if let Some(listed) = self.listings.as_ref().and_then(|find| find(name)) {
            return Some(listed);
        }
        CapabilityManifest::builder(name)
            .provider(&self.server)
            .build()
            .or_else(|_| {
                CapabilityManifest::builder(INVALID_NAME)
                    .provider(&self.server)
                    .build()
            })
            .ok()
    }

    /// Records `peek` as refused for `reason`, when it is a request the governed server would
    /// have recorded; `role` and `principal` as far as the edge knows them.
    pub(crate) fn refused(
        &self,
        peek: &Peek,
        role: Option<&str>,
        principal: Option<&Principal>,
        reason: DenyReason,
    ) {
        if !peek.is_decided() {
            return;
        }
        let Some(method) = peek.method.as_deref() else {
            return;
        };
        let role = role.unwrap_or(NO_ROLE);
        let mut session = format!("mcp:{}/{role}", self.server);
        if let Some(principal) = principal {
            session.push('/');
            session.push_str(&principal.key());
        }
        let subject = Subject::new(role, &session).policy_version(self.policy_version.as_deref());
        let mut caller = Caller::new("mcp-client");
        if let Some(principal) = principal {
            caller = caller.principal(principal);
        }
        let empty = Value::Object(serde_json::Map::new());
        let params = peek.params.as_ref().unwrap_or(&empty);
        let text = |key: &str| params.get(key).and_then(Value::as_str).unwrap_or_default();
        let manifest;
        let (action, input) = match method {
            "tools/call" => {
                let Some(tool) = self.manifest(text("name")) else {
                    return;
                };
                manifest = tool;
                let input = params.get("arguments").unwrap_or(&empty);
                (Action::CallTool(&manifest), input)
            }
            "prompts/get" => (
                Action::Prompt {
                    server: &self.server,
                    name: text("name"),
                },
                params,
            ),
            "completion/complete" => {
                let reference = params.get("ref");
                let of = |key: &str| {
                    reference
                        .and_then(|r| r.get(key))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                };
                let action = if of("type") == "ref/prompt" {
                    Action::Prompt {
                        server: &self.server,
                        name: of("name"),
                    }
                } else {
                    Action::Resource {
                        server: &self.server,
                        uri: of("uri"),
                    }
                };
                (action, params)
            }
            // Reads, subscriptions, directories, skills, tasks: by the URI or id they name.
            _ => (
                Action::Resource {
                    server: &self.server,
                    uri: params
                        .get("uri")
                        .or_else(|| params.get("taskId"))
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                },
                params,
            ),
        };
        let request = Request::mcp(method, action, input);
        self.dispatch.refuse(&subject, caller, &request, &[reason]);
    }
}

#[cfg(test)]
mod tests {
    use super::Peek;

    #[test]
    fn a_body_is_peeked_without_trusting_it() {
        let call =
            Peek::of(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#);
        assert_eq!(call.tool(), Some("x"));
        assert!(call.is_decided());
        assert!(!Peek::of(br#"{"method":"tools/list"}"#).is_decided());
        assert!(
            Peek::of(b"[1,2]").method.is_none(),
            "a batch is not one request"
        );
        assert!(Peek::of(b"\xff").method.is_none());
        assert!(
            Peek::of(br#"{"method":"resources/read","params":{"uri":"file:///x"}}"#).is_decided()
        );
    }
}
