//! What would show a hidden tool, said as the lines to write (`--check`, `capability init`):
//! for a tool whose server claims it is safe enough but is not believed (an untrusted server),
//! the three ways to believe it (assert it in the policy, pin it and review the pin, trust the
//! server); for a tool whose descriptor drifted from its pin, the review and the pin again.
//! A tool the role may not have whatever is believed (its pattern, its ceiling against what
//! the server itself says) gets none: the policy is the reason, and changing it is a decision,
//! not a fix.

use capability::CapabilityManifest;
use capability::authz::{DenyReason, Effect};
use capability::manifest::{HintKind, HintSource};
use capability::mcp::{DriftStatus, WithheldReason};

/// What `fix` needs to know of the tool's server.
pub(crate) struct ServerAt<'a> {
    /// Its operator's name.
    pub(crate) name: &'a str,
    /// Its lockfile as written in the policy, if it has one.
    pub(crate) lock: Option<&'a str>,
    /// Its command, when it is spawned (`capability pin` lists it).
    pub(crate) command: Option<&'a [String]>,
}

/// What `kind` of `manifest` would be if its server's claim were believed.
fn claimed(manifest: &CapabilityManifest, kind: HintKind) -> bool {
    let hint = manifest.hint(kind);
    match hint.stated() {
        Some(stated) if hint.source() == HintSource::UntrustedClaim => stated,
        _ => hint.effective(),
    }
}

/// The claims of `manifest` that would lift every one of `reasons` if believed, each as
/// `key = value` (the value the server claims); `None` when believing the server would not
/// show the tool (it says itself that it writes, or a reason is not of its effect at all).
fn lifting(manifest: &CapabilityManifest, reasons: &[WithheldReason]) -> Option<Vec<String>> {
    let mut kinds = Vec::new();
    for reason in reasons {
        match reason {
            WithheldReason::Policy(DenyReason::CeilingExceeded { ceiling, .. }) => {
                let effect = Effect::of(
                    claimed(manifest, HintKind::ReadOnly),
                    claimed(manifest, HintKind::Destructive),
                );
                if !ceiling.permits(effect) {
                    return None;
                }
                kinds.extend([HintKind::ReadOnly, HintKind::Destructive]);
            }
            WithheldReason::Policy(DenyReason::OpenWorld) => {
                if claimed(manifest, HintKind::OpenWorld) {
                    return None;
                }
                kinds.push(HintKind::OpenWorld);
            }
            _ => return None,
        }
    }
    let claims: Vec<String> = HintKind::ALL
        .into_iter()
        .filter(|kind| kinds.contains(kind))
        .filter_map(|kind| {
            let hint = manifest.hint(kind);
            let stated = hint.stated()?;
            (hint.source() == HintSource::UntrustedClaim && stated != hint.effective())
                .then(|| format!("{} = {stated}", kind.key()))
        })
        .collect();
    (!claims.is_empty()).then_some(claims)
}

/// The pin command for `server`, as the operator would type it.
fn pin_command(server: &ServerAt<'_>) -> String {
    let lock = server.lock.unwrap_or("capability.lock");
    let source = match server.command {
        Some(words) => format!(" -- {}", words.join(" ")),
        None => " -- <the server's command>".to_owned(),
    };
    format!(
        "capability pin --server {} --lock {lock}{source}",
        server.name
    )
}

/// What would show the tool `manifest` of `server`, withheld for `reasons`; `None` when
/// nothing but a change of the role would.
pub(crate) fn fix(
    manifest: &CapabilityManifest,
    reasons: &[WithheldReason],
    server: &ServerAt<'_>,
) -> Option<String> {
    let name = server.name;
    let tool = manifest.name();
    if let Some(drift) = reasons.iter().find_map(|r| match r {
        WithheldReason::Drift(status) => Some(status),
        _ => None,
    }) {
        let what = match drift {
            DriftStatus::Added => "it is not pinned yet",
            DriftStatus::FlagsEdited { .. } => "its pin was edited by hand",
            DriftStatus::Reworded { .. } => {
                "it was reworded since it was pinned (or let its server's entry say \
                 `accept_wording_drift = true`)"
            }
            _ => "it changed since it was pinned",
        };
        return Some(format!(
            "{what}: review it (`capability pin --review --server {name} --lock {lock}{rest}` \
             shows what changed), then pin it again (`{pin}`) or re-pin it signed (`--approve \
             --key <approver key>`)",
            lock = server.lock.unwrap_or("capability.lock"),
            rest = server
                .command
                .map(|w| format!(" -- {}", w.join(" ")))
                .unwrap_or_default(),
            pin = pin_command(server),
        ));
    }
    let claims = lifting(manifest, reasons)?;
    let pin = match server.lock {
        Some(_) => format!("pin it and review the pin: `{}`", pin_command(server)),
        None => format!(
            "pin it and review the pin: add `lock = \"capability.lock\"` to [servers.{name}], \
             then `{}`",
            pin_command(server)
        ),
    };
    Some(format!(
        "the server claims {claims}, which is not believed from an untrusted server. Any one \
         of these believes it: assert it in the policy (`[assertions.\"{name}/{tool}\"]` with \
         {lines}); {pin}; or trust every claim of the server (`trust = \"trusted\"` in \
         [servers.{name}])",
        claims = claims.join(", "),
        lines = claims
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(" and "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability::Server;
    use capability::authz::Ceiling;
    use capability::mcp::McpManifest;
    use serde_json::json;

    fn untrusted(annotations: serde_json::Value) -> CapabilityManifest {
        let tool = json!({"name": "fetch", "description": "Fetch a URL.",
                          "inputSchema": {"type": "object"}, "annotations": annotations});
        CapabilityManifest::from_mcp_tool(&tool, &Server::untrusted("web")).expect("a tool")
    }

    const AT: ServerAt<'static> = ServerAt {
        name: "web",
        lock: None,
        command: None,
    };

    fn ceiling() -> Vec<WithheldReason> {
        vec![WithheldReason::Policy(DenyReason::CeilingExceeded {
            ceiling: Ceiling::ReadOnly,
            effect: Effect::DestructiveWrite,
        })]
    }

    #[test]
    fn an_unbelieved_claim_names_the_three_ways_to_believe_it_with_their_lines() {
        let manifest = untrusted(json!({"readOnlyHint": true, "openWorldHint": true,
                                        "idempotentHint": true}));
        let fix = fix(&manifest, &ceiling(), &AT).expect("a fix");
        assert!(
            !fix.contains("idempotent"),
            "a claim that shows nothing: {fix}"
        );
        for says in [
            "the server claims read_only = true,",
            "`[assertions.\"web/fetch\"]` with `read_only = true`",
            "add `lock = \"capability.lock\"` to [servers.web]",
            "`capability pin --server web --lock capability.lock",
            "`trust = \"trusted\"` in [servers.web]",
        ] {
            assert!(fix.contains(says), "{says}: {fix}");
        }
        assert!(
            !fix.contains("open_world"),
            "a claim believed anyway: {fix}"
        );
    }

    #[test]
    fn a_tool_the_server_itself_says_is_destructive_gets_no_fix() {
        let manifest = untrusted(json!({"readOnlyHint": false, "destructiveHint": true}));
        assert_eq!(fix(&manifest, &ceiling(), &AT), None);
        let writes = untrusted(json!({"destructiveHint": false}));
        assert_eq!(
            fix(&writes, &ceiling(), &AT),
            None,
            "believed, it still writes"
        );
        let not_allowed = vec![WithheldReason::Policy(DenyReason::NotAllowed)];
        let claims = untrusted(json!({"readOnlyHint": true}));
        assert_eq!(fix(&claims, &not_allowed, &AT), None, "the pattern decides");
    }

    #[test]
    fn drift_is_reviewed_then_pinned_again() {
        let manifest = untrusted(json!({}));
        let words = ["uvx".to_owned(), "mcp-server-fetch".to_owned()];
        let at = ServerAt {
            name: "web",
            lock: Some("locks/web.lock"),
            command: Some(&words),
        };
        let drift = vec![WithheldReason::Drift(DriftStatus::Changed {
            parts: vec![],
        })];
        let fix = fix(&manifest, &drift, &at).expect("a fix");
        assert!(
            fix.starts_with(
                "it changed since it was pinned: review it (`capability pin --review \
                             --server web --lock locks/web.lock -- uvx mcp-server-fetch`"
            ),
            "{fix}"
        );
        assert!(
            fix.contains(
                "then pin it again (`capability pin --server web --lock locks/web.lock -- uvx \
                 mcp-server-fetch`) or re-pin it signed"
            ),
            "{fix}"
        );
    }
}
