//! Beyond tools: the resources a role may read, the prompts it may get, and the requests a
//! server may send its client (sampling, elicitation, roots). Deny by default, as for tools,
//! and decided by the same [`Rules`](super::Rules), through
//! [`Rules::decide_action`](super::Rules::decide_action).
//!
//! In a policy file, beside a role's tool patterns:
//!
//! ```toml
//! [roles.viewer]
//! ceiling = "read-only"
//! allow = ["memory/*"]
//! resources = ["memory/*", "fs/file:///srv/docs/*"]   # server/URI
//! deny_resources = ["*/file:///srv/docs/private/*"]
//! prompts = ["everything/simple_*"]                  # server/prompt name
//! deny_prompts = []
//! server_requests = ["everything/elicitation"]      # server/sampling|elicitation|roots
//! ```
//!
//! Each pattern is `server/rest`, cut at its first `/` (`*` alone is everything of every
//! server): a glob over the operator's name of the server, and a glob over the URI, the prompt
//! name or the kind of request (`*` any run of characters, `?` one). As for tools, `allow`
//! patterns match exactly and `deny` patterns ignore ASCII case, and deny beats allow.
//!
//! **Resource URIs are decided in two forms**: as sent, and resolved (every percent escape
//! decoded, `\` read as `/`, and the `.` and `..` segments of the path removed, RFC 3986
//! section 5.2.4). A read is allowed only when an allow pattern matches both forms and no deny
//! pattern catches either, so `file:///srv/docs/../../etc/passwd` and
//! `file:///srv/docs/%2e%2e/%2e%2e/etc/passwd` are not in `file:///srv/docs/*`. A URI that is
//! empty, holds white space or a control character, an escape that is not UTF-8, or an escape
//! left after decoding (encoded twice) is refused whatever the patterns say.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::decision::DenyReason;
use super::pattern::glob_text;
use crate::manifest::CapabilityManifest;

/// What a caller asks to do, for [`Rules::decide_action`](super::Rules::decide_action) and
/// [`Authorize::decide_action`](super::Authorize::decide_action): call a tool, read a
/// resource, get a prompt, or (for a server) send the caller's client a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action<'a> {
    /// `tools/call` of this tool.
    CallTool(&'a CapabilityManifest),
    /// A resource of `server`, by URI: `resources/read`, `resources/subscribe` and
    /// `resources/unsubscribe`, an entry of `resources/list`, a template of
    /// `resources/templates/list` (its URI template as written), `completion/complete` of a
    /// template.
    Resource {
        /// The operator's name of the server.
        server: &'a str,
        /// The URI, as the client sent it.
        uri: &'a str,
    },
    /// A prompt of `server`: `prompts/get`, an entry of `prompts/list`, `completion/complete`
    /// of a prompt's argument.
    Prompt {
        /// The operator's name of the server.
        server: &'a str,
        /// The prompt's name.
        name: &'a str,
    },
    /// A request `server` sends the caller's client.
    ServerRequest {
        /// The operator's name of the server.
        server: &'a str,
        /// Which request.
        kind: ServerRequestKind,
    },
}

impl Action<'_> {
    /// What the action is about, for messages and records: the tool's name, the URI, the
    /// prompt's name, or the request's method.
    pub fn target(&self) -> &str {
        match self {
            Action::CallTool(tool) => tool.name(),
            Action::Resource { uri, .. } => uri,
            Action::Prompt { name, .. } => name,
            Action::ServerRequest { kind, .. } => kind.method(),
        }
    }

    /// The server it concerns: the tool's provider, or the server named.
    pub fn server(&self) -> Option<&str> {
        match self {
            Action::CallTool(tool) => tool.provider(),
            Action::Resource { server, .. }
            | Action::Prompt { server, .. }
            | Action::ServerRequest { server, .. } => Some(server),
        }
    }
}

/// A request a server sends its client, which the client's role must allow
/// (`server_requests` in a policy file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerRequestKind {
    /// `sampling/createMessage`: the server asks the client's model to write.
    Sampling,
    /// `elicitation/create`: the server asks the client's human for input.
    Elicitation,
    /// `roots/list`: the server asks which roots (directories) the client exposes.
    Roots,
}

impl ServerRequestKind {
    /// Every kind.
    pub const ALL: [ServerRequestKind; 3] = [
        ServerRequestKind::Sampling,
        ServerRequestKind::Elicitation,
        ServerRequestKind::Roots,
    ];

    /// As written in policy files: `sampling`, `elicitation`, `roots`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ServerRequestKind::Sampling => "sampling",
            ServerRequestKind::Elicitation => "elicitation",
            ServerRequestKind::Roots => "roots",
        }
    }

    /// The MCP method: `sampling/createMessage`, `elicitation/create`, `roots/list`.
    pub const fn method(self) -> &'static str {
        match self {
            ServerRequestKind::Sampling => "sampling/createMessage",
            ServerRequestKind::Elicitation => "elicitation/create",
            ServerRequestKind::Roots => "roots/list",
        }
    }

    /// The kind of an MCP method, if it is one of the three.
    pub fn from_method(method: &str) -> Option<ServerRequestKind> {
        ServerRequestKind::ALL
            .into_iter()
            .find(|kind| kind.method() == method)
    }
}

impl fmt::Display for ServerRequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pattern over `server/item` for resources, prompts or server requests (see the module
/// docs): a glob over the server's name, and one over the URI, the prompt's name or the kind.
///
/// ```
/// use capability::authz::ItemPattern;
///
/// let docs = ItemPattern::new("fs/file:///srv/docs/*")?;
/// assert!(docs.matches("fs", "file:///srv/docs/a.md"));
/// assert!(!docs.matches("fs", "file:///SRV/docs/a.md"), "allow: exact");
/// assert!(docs.denies("FS", "FILE:///srv/docs/a.md"), "deny: ASCII case ignored");
/// assert!(!docs.matches("web", "file:///srv/docs/a.md"));
/// assert!(ItemPattern::new("*").unwrap().matches("any", "thing://at/all"));
/// assert!(ItemPattern::new("no-server-part").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ItemPattern {
    text: String,
    /// Where the server part ends (the first `/`), or `None` for `*`.
    #[serde(skip)]
    split: Option<usize>,
}

impl ItemPattern {
    /// Checks and builds a pattern: `*`, or `server/item` where `server` is made of `A-Z a-z
    /// 0-9 _ - .` with `*` and `?`, and `item` is not empty and has no white space or control
    /// character.
    pub fn new(text: impl Into<String>) -> Result<ItemPattern, String> {
        let text = text.into();
        if text == "*" {
            return Ok(ItemPattern { text, split: None });
        }
        let Some(split) = text.find('/') else {
            return Err(format!(
                "pattern `{}` has no server part: write `server/item` (`*/item` for every \
                 server, `*` for everything)",
                text.escape_debug()
            ));
        };
        let (server, item) = (&text[..split], &text[split + 1..]);
        let ok_char = |c: char| c.is_ascii_alphanumeric() || "_-.*?".contains(c);
        if server.is_empty() || !server.chars().all(ok_char) {
            return Err(format!(
                "pattern `{}`: the server part `{}` is a server's name made of `A-Z a-z 0-9 _ - \
                 .`, with `*` and `?` as wildcards",
                text.escape_debug(),
                server.escape_debug()
            ));
        }
        if item.is_empty() {
            return Err(format!(
                "pattern `{}` names nothing after its `/`; use `*` for everything",
                text.escape_debug()
            ));
        }
        if item.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "pattern `{}` holds white space or a control character",
                text.escape_debug()
            ));
        }
        Ok(ItemPattern {
            text,
            split: Some(split),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn parts(&self) -> (&str, &str) {
        match self.split {
            Some(split) => (&self.text[..split], &self.text[split + 1..]),
            None => ("*", "*"),
        }
    }

    /// As an `allow` pattern: whether it matches `item` of `server`, exactly.
    pub fn matches(&self, server: &str, item: &str) -> bool {
        let (s, i) = self.parts();
        glob_text(s, server, false) && glob_text(i, item, false)
    }

    /// Whether the item part (after the server part) matches `item`, exactly.
    pub(crate) fn matches_kind(&self, item: &str) -> bool {
        glob_text(self.parts().1, item, false)
    }

    /// As a `deny` pattern: whether it catches `item` of `server`, ASCII case ignored.
    pub fn denies(&self, server: &str, item: &str) -> bool {
        let (s, i) = self.parts();
        glob_text(s, server, true) && glob_text(i, item, true)
    }
}

/// A role's rules for what is not a tool: allow and deny patterns for resources and prompts,
/// and the server requests its client may receive. Empty: nothing (deny by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ItemRules {
    pub(crate) resources: Vec<ItemPattern>,
    pub(crate) deny_resources: Vec<ItemPattern>,
    pub(crate) prompts: Vec<ItemPattern>,
    pub(crate) deny_prompts: Vec<ItemPattern>,
    pub(crate) server_requests: Vec<ItemPattern>,
}

/// The reason of patterns for `subject` of `server` (one or two forms of it): a deny pattern
/// catching any form, or no allow pattern matching every form.
fn pattern_reason(
    allow: &[ItemPattern],
    deny: &[ItemPattern],
    server: &str,
    forms: &[&str],
) -> Option<DenyReason> {
    for form in forms {
        if let Some(pattern) = deny.iter().find(|p| p.denies(server, form)) {
            return Some(DenyReason::DeniedByPattern {
                pattern: pattern.as_str().to_owned(),
            });
        }
    }
    let allowed = forms
        .iter()
        .all(|form| allow.iter().any(|p| p.matches(server, form)));
    (!allowed).then_some(DenyReason::NotAllowed)
}

impl ItemRules {
    /// The reason these rules deny a resource, prompt or server request; `None` when they
    /// allow it, and for a tool call (the tool rules decide that).
    pub(crate) fn deny_reason(&self, action: &Action<'_>) -> Option<DenyReason> {
        match *action {
            Action::CallTool(_) => None,
            Action::Resource { server, uri } => match resolve_uri(uri) {
                Err(why) => Some(DenyReason::Undecidable { why }),
                Ok(resolved) if resolved == uri => {
                    pattern_reason(&self.resources, &self.deny_resources, server, &[uri])
                }
                Ok(resolved) => pattern_reason(
                    &self.resources,
                    &self.deny_resources,
                    server,
                    &[uri, &resolved],
                ),
            },
            Action::Prompt { server, name } => {
                if name.is_empty() || name.chars().any(char::is_control) {
                    Some(DenyReason::Undecidable {
                        why: "a prompt's name is empty or holds a control character".to_owned(),
                    })
                } else {
                    pattern_reason(&self.prompts, &self.deny_prompts, server, &[name])
                }
            }
            Action::ServerRequest { server, kind } => {
                let allowed = self
                    .server_requests
                    .iter()
                    .any(|p| p.matches(server, kind.as_str()));
                (!allowed).then(|| DenyReason::ServerRequestNotAllowed {
                    method: kind.method().to_owned(),
                })
            }
        }
    }
}

/// The resolved form of a resource URI (see the module docs), or why it cannot be decided.
///
/// ```
/// use capability::authz::resolve_uri;
///
/// assert_eq!(resolve_uri("file:///a/./b/../c?x=1").as_deref(), Ok("file:///a/c?x=1"));
/// assert_eq!(resolve_uri("file:///srv/%2e%2e/etc").as_deref(), Ok("file:///etc"));
/// assert_eq!(resolve_uri(r"file:///srv\..\etc").as_deref(), Ok("file:///etc"));
/// assert!(resolve_uri("file:///srv/%252e%252e/etc").is_err(), "encoded twice");
/// assert!(resolve_uri("file:///a b").is_err());
/// ```
pub fn resolve_uri(uri: &str) -> Result<String, String> {
    if uri.is_empty() {
        return Err("the URI is empty".to_owned());
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the URI holds white space or a control character".to_owned());
    }
    let decoded = percent_decode(uri)?;
    if has_escape(&decoded) {
        return Err("the URI is percent-encoded twice".to_owned());
    }
    if decoded.chars().any(char::is_control) {
        return Err("the URI encodes a control character".to_owned());
    }
    let decoded = decoded.replace('\\', "/");
    // The path: after `scheme://authority`, or after `scheme:`; up to the query or fragment.
    let start = match decoded.find("://") {
        Some(i) => decoded[i + 3..]
            .find('/')
            .map_or(decoded.len(), |j| i + 3 + j),
        None => decoded.find(':').map_or(0, |i| i + 1),
    };
    let end = decoded[start..]
        .find(['?', '#'])
        .map_or(decoded.len(), |i| start + i);
    let path = remove_dot_segments(&decoded[start..end]);
    Ok(format!("{}{}{}", &decoded[..start], path, &decoded[end..]))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn has_escape(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes
        .windows(3)
        .any(|w| w[0] == b'%' && hex(w[1]).is_some() && hex(w[2]).is_some())
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(h * 16 + l);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the URI's percent escapes are not UTF-8".to_owned())
}

/// RFC 3986 section 5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut output: Vec<&str> = Vec::new();
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix("./") {
            input = rest;
        } else if input.starts_with("/./") {
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") {
            input = &input[3..];
            output.pop();
        } else if input == "/.." {
            input = "/";
            output.pop();
        } else if input == "." || input == ".." {
            input = "";
        } else {
            let from = usize::from(input.starts_with('/'));
            let end = input[from..].find('/').map_or(input.len(), |i| from + i);
            output.push(&input[..end]);
            input = &input[end..];
        }
    }
    output.concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::{Assertions, Ceiling, Decision, Rules};

    fn rules() -> Rules {
        Rules::new(Ceiling::ReadOnly)
            .allow_resource(ItemPattern::new("fs/file:///srv/docs/*").expect("valid"))
            .deny_resource(ItemPattern::new("*/file:///srv/docs/private/*").expect("valid"))
            .allow_prompt(ItemPattern::new("everything/simple_*").expect("valid"))
            .allow_server_requests(ItemPattern::new("everything/elicitation").expect("valid"))
    }

    fn resource(uri: &str) -> Decision {
        rules().decide_action(&Assertions::none(), &Action::Resource { server: "fs", uri })
    }

    #[test]
    fn resources_are_allowed_only_in_both_forms_and_denied_in_either() {
        assert!(resource("file:///srv/docs/a.md").is_allowed());
        assert!(resource("file:///srv/docs/sub/./b.md").is_allowed());
        for escape in [
            "file:///srv/docs/../../etc/passwd",
            "file:///srv/docs/%2e%2e/%2E%2E/etc/passwd",
            "file:///srv/docs/..%2f..%2fetc%2fpasswd",
            r"file:///srv/docs/..\..\etc\passwd",
            "file:///srv/docs/%252e%252e/etc/passwd",
            "file:///srv/docs/a b",
            "file:///srv/docs/\u{0}",
            "file:///srv/docs/%ff",
            "",
        ] {
            assert!(!resource(escape).is_allowed(), "{escape:?}");
        }
        for private in [
            "file:///srv/docs/private/key",
            "FILE:///srv/DOCS/Private/key",
            "file:///srv/docs/x/../private/key",
            "file:///srv/docs/%70rivate/key",
        ] {
            assert_eq!(
                resource(private).reasons(),
                [DenyReason::DeniedByPattern {
                    pattern: "*/file:///srv/docs/private/*".to_owned()
                }],
                "{private}"
            );
        }
        // Another server's resource is not this pattern's.
        let other = rules().decide_action(
            &Assertions::none(),
            &Action::Resource {
                server: "web",
                uri: "file:///srv/docs/a.md",
            },
        );
        assert_eq!(other.reasons(), [DenyReason::NotAllowed]);
    }

    #[test]
    fn prompts_and_server_requests_are_denied_by_default() {
        let decide = |action: Action<'_>| rules().decide_action(&Assertions::none(), &action);
        assert!(
            decide(Action::Prompt {
                server: "everything",
                name: "simple_prompt"
            })
            .is_allowed()
        );
        assert!(
            !decide(Action::Prompt {
                server: "everything",
                name: "complex_prompt"
            })
            .is_allowed()
        );
        assert!(
            decide(Action::ServerRequest {
                server: "everything",
                kind: ServerRequestKind::Elicitation
            })
            .is_allowed()
        );
        assert_eq!(
            decide(Action::ServerRequest {
                server: "everything",
                kind: ServerRequestKind::Sampling
            })
            .reasons(),
            [DenyReason::ServerRequestNotAllowed {
                method: "sampling/createMessage".to_owned()
            }]
        );
        // Rules with no item patterns give nothing.
        let none = Rules::new(Ceiling::Unrestricted);
        assert!(
            !none
                .decide_action(
                    &Assertions::none(),
                    &Action::Resource {
                        server: "fs",
                        uri: "file:///x"
                    }
                )
                .is_allowed()
        );
    }

    #[test]
    fn dot_segments_are_removed_as_rfc_3986_says() {
        // RFC 3986 section 5.4's examples, as paths.
        for (path, want) in [
            ("/a/b/c/./../../g", "/a/g"),
            ("mid/content=5/../6", "mid/6"),
            ("/a/b/c/../../../g", "/g"),
            ("/./g", "/g"),
            ("/g.", "/g."),
            ("/..g", "/..g"),
            ("/a/b/..", "/a/"),
        ] {
            assert_eq!(remove_dot_segments(path), want, "{path}");
        }
    }
}
