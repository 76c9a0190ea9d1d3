//! A 2026-07-28 client's `tools/call` on the stdio lane, to a server whose connection agreed
//! 2025-11-25: what differs between the two revisions for this call, and nothing else.
//!
//! - **The request.** A 2026-07-28 request carries its revision and the client's context in
//!   `_meta` (`io.modelcontextprotocol/protocolVersion`, `clientInfo`, `clientCapabilities`,
//!   `logLevel`: SEP-2575); a 2025-11-25 server knows none of them. The server is sent the
//!   client's `_meta` without those keys, plus what rmcp's path tells it of the caller
//!   ([`Gateway::told`], `serve/bridge.rs`: the client's capabilities narrowed to the server
//!   requests the role allows); the client's other keys (its `progressToken`, a trace context,
//!   its own) stay as it wrote them. The name and the arguments are the same in both.
//! - **The result.** A 2026-07-28 result says `resultType`; a 2025-11-25 server's does not:
//!   the client gets it with `"resultType":"complete"` first, as rmcp's path gives it
//!   (`serve/completed.rs`). The outcome on record is the server's result as it wrote it, as on
//!   rmcp's path (which records the server's answer before it is marked).
//!
//! The lane takes such a call only when nothing else differs: the call names the revision
//! (2026-07-28) and the client's capabilities (as rmcp requires, else rmcp answers), asks for no
//! log messages (nor did the session: those are relayed by rmcp's path), the caller's role
//! allows the server no request to the client (a server request during the call is asked in the
//! revision's own form on rmcp's path), and no `inputResponses`, `requestState` or `task`
//! (`CallParams` holds only `name`, `arguments` and `_meta`).

use std::borrow::Cow;

use ::rmcp::model::{ProtocolVersion, RequestMetaObject};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::serve::gateway::Gateway;
use crate::serve::who::Who;

/// What a 2026-07-28 request's `_meta` keys start with (SEP-2575).
const RESERVED: &str = "io.modelcontextprotocol/";

/// A 2026-07-28 client's call the lane may take: its `_meta` read.
pub(crate) struct Bridged {
    meta: RequestMetaObject,
}

impl Bridged {
    /// The call's `_meta`, when it is a 2026-07-28 call the lane may take (see the module's
    /// doc): it names 2026-07-28 and the client's capabilities, and no log level.
    pub(crate) fn of(meta: Option<&RawValue>) -> Option<Bridged> {
        let meta: RequestMetaObject = serde_json::from_str(meta?.get()).ok()?;
        let current = meta.protocol_version()? == ProtocolVersion::V_2026_07_28;
        (current && meta.client_capabilities().is_some() && !meta.contains_key(LOG_LEVEL))
            .then_some(Bridged { meta })
    }

    /// The `_meta` written to `server` (of 2025-11-25) for `who`'s call: the client's, the
    /// revision's own keys replaced by what rmcp's path tells the server.
    pub(crate) fn into_server_meta(
        self,
        gateway: &Gateway,
        who: &Who,
        server: &str,
    ) -> Result<String, serde_json::Error> {
        let declared = self.meta.client_capabilities().unwrap_or_default();
        let mut meta: Map<String, Value> = self.meta.0.0;
        meta.retain(|key, _| !key.starts_with(RESERVED));
        meta.extend(gateway.told(who, server, declared, None).0.0);
        serde_json::to_string(&meta)
    }
}

/// The `_meta` key of a request's log level.
const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// A 2025-11-25 server's result as a 2026-07-28 client reads it: `"resultType":"complete"`
/// first when the server did not say (a result that is not an object is left as it is).
pub(crate) fn completed(result: &RawValue) -> Cow<'_, RawValue> {
    #[derive(Deserialize)]
    struct Typed {
        #[serde(rename = "resultType", default)]
        result_type: Option<IgnoredAny>,
    }
    let text = result.get();
    // Cheap first: most results do not name the key at all.
    let said = memchr::memmem::find(text.as_bytes(), b"\"resultType\"").is_some()
        && serde_json::from_str::<Typed>(text).is_ok_and(|typed| typed.result_type.is_some());
    let Some(rest) = text.trim_start().strip_prefix('{') else {
        return Cow::Borrowed(result);
    };
    if said {
        return Cow::Borrowed(result);
    }
    let mut marked = String::with_capacity(text.len() + 26);
    marked.push_str(r#"{"resultType":"complete""#);
    if !rest.trim_start().starts_with('}') {
        marked.push(',');
    }
    marked.push_str(rest);
    match RawValue::from_string(marked) {
        Ok(marked) => Cow::Owned(marked),
        Err(_) => Cow::Borrowed(result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("JSON")
    }

    #[test]
    fn a_result_is_marked_complete_once() {
        let cases = [
            (
                r#"{"content":[]}"#,
                r#"{"resultType":"complete","content":[]}"#,
            ),
            (r#" { } "#, r#"{"resultType":"complete" }"#),
            (
                r#"{"content":[],"resultType":"complete"}"#,
                r#"{"content":[],"resultType":"complete"}"#,
            ),
            // Named only inside the content: still the server's result to mark.
            (
                r#"{"structuredContent":{"resultType":1}}"#,
                r#"{"resultType":"complete","structuredContent":{"resultType":1}}"#,
            ),
            ("[]", "[]"),
        ];
        for (given, wanted) in cases {
            let given = raw(given);
            assert_eq!(completed(&given).get(), wanted);
        }
    }

    #[test]
    fn only_a_call_that_names_the_revision_and_its_capabilities_and_no_level_is_bridged() {
        let of = |meta: &str| Bridged::of(Some(&raw(meta))).is_some();
        let caps = r#""io.modelcontextprotocol/clientCapabilities":{}"#;
        let version = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;
        assert!(of(&format!("{{{version},{caps}}}")));
        assert!(!of(&format!("{{{caps}}}")));
        assert!(!of(&format!("{{{version}}}")));
        assert!(!of(&format!(
            r#"{{"io.modelcontextprotocol/protocolVersion":"2025-11-25",{caps}}}"#
        )));
        assert!(!of(&format!(
            r#"{{{version},{caps},"io.modelcontextprotocol/logLevel":"debug"}}"#
        )));
        assert!(Bridged::of(None).is_none());
    }
}
