//! Why a record says what it says: each reason typed, and kept exactly as it was written.
//!
//! A reason in a record is a JSON object with a `reason` code and a `message` for people:
//!
//! - a decision's reason, as [`DenyReason`] writes it (`{"reason": "ceiling_exceeded",
//!   "ceiling": "read-only", "effect": "destructive-write", "message": "..."}`);
//! - `{"reason": "degraded", "degrade": {...}, "message": "..."}`: the session degraded
//!   ([`DegradeReason`]);
//! - `{"reason": "audit_failed", "message": "..."}`: a record could not be written, so the call
//!   did not run;
//! - `{"reason": "invalid_request", "message": "..."}`: the request could not be recorded or
//!   decided as it came (an incident id too long, an output nested too deep).
//!
//! Trails written before reasons were typed hold plain strings; they read back as reasons of
//! code `text`. A reason keeps the JSON it was read from, so a record read back writes the same
//! bytes and its hash verifies, whatever this version's wording of a message is.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use capability_core::authz::DenyReason;

use crate::budget::DegradeReason;

/// One reason of a record (see the module docs).
///
/// ```
/// use capability::audit::Reason;
/// use capability::authz::DenyReason;
///
/// let reason = Reason::deny(&DenyReason::NotAllowed);
/// assert_eq!(reason.code(), "not_allowed");
/// assert_eq!(reason.message(), "no `allow` pattern of the role matches it");
/// assert_eq!(reason.as_deny(), Some(DenyReason::NotAllowed));
/// assert_eq!(
///     serde_json::to_string(&reason)?,
///     r#"{"message":"no `allow` pattern of the role matches it","reason":"not_allowed"}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Reason(Value);

/// How a call that needed a human's consent got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsentKind {
    /// A human signed an approval of exactly this call (Ed25519, `capability approve`).
    Signed,
    /// A human signed a grant covering it, for a number of calls (`capability grant`).
    Granted,
    /// The client's human answered an MCP elicitation: weaker, since the client relays the
    /// answer and nothing is signed.
    Elicited,
}

impl ConsentKind {
    /// `signed`, `granted`, `elicited`: the code of the reason it writes.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConsentKind::Signed => "signed",
            ConsentKind::Granted => "granted",
            ConsentKind::Elicited => "elicited",
        }
    }
}

/// A human's consent to one call, for the record: how, its id (an approval's, a grant's), and
/// who gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consent {
    /// How.
    pub kind: ConsentKind,
    /// The approval's or grant's id.
    pub id: String,
    /// Who consented (the approver, the grant's issuer).
    pub by: String,
    /// For a signed approval, the approval itself as its approver signed it (its arguments'
    /// digest, the proposer, the approver, the Ed25519 signature): recorded whole, so that the
    /// record, and a proof of it, shows who approved exactly which arguments, checkable with
    /// the approver's public key alone. `None` for the other kinds.
    pub approval: Option<Value>,
}

impl fmt::Display for Consent {
    /// `approved by alice (approval a1)`, `within grant g-7 of alice`, or `confirmed by the
    /// client's human through elicitation (<by>; not signed)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ConsentKind::Signed => write!(f, "approved by {} (approval {})", self.by, self.id),
            ConsentKind::Granted => write!(f, "within grant {} of {}", self.id, self.by),
            ConsentKind::Elicited => write!(
                f,
                "confirmed by the client's human through elicitation ({}; not signed)",
                self.by
            ),
        }
    }
}

/// The code of a degrade, an audit failure and an invalid request.
const DEGRADED: &str = "degraded";
const AUDIT_FAILED: &str = "audit_failed";
const INVALID: &str = "invalid_request";
/// The code of a reason of an older trail, a plain string.
const TEXT: &str = "text";

impl Reason {
    /// A decision's reason.
    pub fn deny(reason: &DenyReason) -> Reason {
        let mut object = match serde_json::to_value(reason) {
            Ok(Value::Object(object)) => object,
            _ => Map::new(),
        };
        object.insert("message".to_owned(), Value::String(reason.to_string()));
        Reason(Value::Object(object))
    }

    /// The session degraded, for this reason.
    pub fn degrade(reason: &DegradeReason) -> Reason {
        let mut object = Map::new();
        object.insert("reason".to_owned(), Value::String(DEGRADED.to_owned()));
        object.insert(
            "degrade".to_owned(),
            serde_json::to_value(reason).unwrap_or(Value::Null),
        );
        object.insert("message".to_owned(), Value::String(reason.to_string()));
        Reason(Value::Object(object))
    }

    /// A record could not be written (`message` says why), so the call did not run.
    pub fn audit_failed(message: impl Into<String>) -> Reason {
        Reason::coded(AUDIT_FAILED, message.into())
    }

    /// The call ran with a human's consent: `{"reason": "signed", "approval_id": .., "approver":
    /// .., "approval": {..the signed approval..}, "message": ..}` (code `granted` or `elicited`
    /// for the other kinds, without `approval`).
    ///
    /// ```
    /// use capability::audit::{Consent, ConsentKind, Reason};
    ///
    /// let consent = Consent { kind: ConsentKind::Signed, id: "a1".into(), by: "alice".into(), approval: None };
    /// let reason = Reason::consent(&consent);
    /// assert_eq!(reason.code(), "signed");
    /// assert_eq!(reason.as_json()["approval_id"], "a1");
    /// assert_eq!(reason.as_json()["approver"], "alice");
    /// ```
    pub fn consent(consent: &Consent) -> Reason {
        let message = consent.to_string();
        let mut object = Map::new();
        object.insert(
            "reason".to_owned(),
            Value::String(consent.kind.as_str().to_owned()),
        );
        object.insert("approval_id".to_owned(), Value::String(consent.id.clone()));
        object.insert("approver".to_owned(), Value::String(consent.by.clone()));
        if let Some(approval) = &consent.approval {
            object.insert("approval".to_owned(), approval.clone());
        }
        object.insert("message".to_owned(), Value::String(message));
        Reason(Value::Object(object))
    }

    /// The consent this reason records, when it is one ([`Reason::consent`]): who let the call
    /// through, and by which approval or grant.
    ///
    /// ```
    /// use capability::audit::{Consent, ConsentKind, Reason};
    ///
    /// let consent = Consent { kind: ConsentKind::Granted, id: "g-7".into(), by: "alice".into(), approval: None };
    /// assert_eq!(Reason::consent(&consent).as_consent(), Some(consent));
    /// assert_eq!(Reason::text("approved by alice").as_consent(), None);
    /// ```
    pub fn as_consent(&self) -> Option<Consent> {
        let kind = match self.code() {
            "signed" => ConsentKind::Signed,
            "granted" => ConsentKind::Granted,
            "elicited" => ConsentKind::Elicited,
            _ => return None,
        };
        let field = |name: &str| Some(self.0.get(name)?.as_str()?.to_owned());
        Some(Consent {
            kind,
            id: field("approval_id")?,
            by: field("approver")?,
            approval: self.0.get("approval").cloned(),
        })
    }

    /// The request could not be recorded or decided as it came.
    pub fn invalid_request(message: impl Into<String>) -> Reason {
        Reason::coded(INVALID, message.into())
    }

    /// A reason of an older trail: its text.
    pub fn text(text: impl Into<String>) -> Reason {
        Reason(Value::String(text.into()))
    }

    /// A reason of code `code` (for a record of an event, not a decision: `cache_hit`,
    /// `loop_started`), with `message` for people.
    pub fn note(code: &str, message: impl Into<String>) -> Reason {
        Reason::coded(code, message.into())
    }

    fn coded(code: &str, message: String) -> Reason {
        let mut object = Map::new();
        object.insert("reason".to_owned(), Value::String(code.to_owned()));
        object.insert("message".to_owned(), Value::String(message));
        Reason(Value::Object(object))
    }

    /// The reason's code: a [`DenyReason`]'s (`not_allowed`, `ceiling_exceeded`, ...),
    /// `degraded`, `audit_failed`, `invalid_request`, or `text` for a plain string.
    pub fn code(&self) -> &str {
        match &self.0 {
            Value::Object(object) => object
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            _ => TEXT,
        }
    }

    /// The reason, for people.
    pub fn message(&self) -> &str {
        match &self.0 {
            Value::String(text) => text,
            Value::Object(object) => object
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            _ => "",
        }
    }

    /// The decision's reason, when this is one this version knows.
    pub fn as_deny(&self) -> Option<DenyReason> {
        let Value::Object(object) = &self.0 else {
            return None;
        };
        if matches!(self.code(), DEGRADED | AUDIT_FAILED | INVALID) {
            return None;
        }
        let mut object = object.clone();
        object.remove("message");
        serde_json::from_value(Value::Object(object)).ok()
    }

    /// The degrade, when this is one.
    pub fn as_degrade(&self) -> Option<DegradeReason> {
        if self.code() != DEGRADED {
            return None;
        }
        serde_json::from_value(self.0.get("degrade")?.clone()).ok()
    }

    /// The reason as written: an object, or a string for an older trail.
    pub fn as_json(&self) -> &Value {
        &self.0
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        match &value {
            Value::String(_) => Ok(Reason(value)),
            Value::Object(object)
                if object.get("reason").is_some_and(Value::is_string)
                    && object.get("message").is_some_and(Value::is_string) =>
            {
                Ok(Reason(value))
            }
            _ => Err(D::Error::custom(
                "a reason is a string, or an object with a string `reason` and `message`",
            )),
        }
    }
}

impl From<&DenyReason> for Reason {
    fn from(reason: &DenyReason) -> Reason {
        Reason::deny(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_core::authz::{Ceiling, Effect};

    #[test]
    fn every_kind_reads_back_as_itself() {
        let deny = DenyReason::in_grant(
            "g1",
            DenyReason::CeilingExceeded {
                ceiling: Ceiling::ReadOnly,
                effect: Effect::Write,
            },
        );
        let degrade = DegradeReason::BudgetExhausted { max_calls: 3 };
        for reason in [
            Reason::deny(&deny),
            Reason::degrade(&degrade),
            Reason::audit_failed("disk full"),
            Reason::invalid_request("too deep"),
            Reason::text("an old reason"),
        ] {
            let text = serde_json::to_string(&reason).expect("serializes");
            let back: Reason = serde_json::from_str(&text).expect("reads back");
            assert_eq!(back, reason);
        }
        assert_eq!(Reason::deny(&deny).as_deny(), Some(deny));
        assert_eq!(Reason::degrade(&degrade).as_degrade(), Some(degrade));
        assert_eq!(Reason::audit_failed("x").as_deny(), None);
        assert_eq!(Reason::text("old").code(), "text");
        assert_eq!(Reason::text("old").message(), "old");
    }

    #[test]
    fn a_message_is_kept_as_written_whatever_this_version_says() {
        let written = r#"{"message":"an older wording","reason":"not_allowed"}"#;
        let reason: Reason = serde_json::from_str(written).expect("reads");
        assert_eq!(reason.message(), "an older wording");
        assert_eq!(reason.as_deny(), Some(DenyReason::NotAllowed));
        assert_eq!(serde_json::to_string(&reason).expect("writes"), written);
        for bad in [
            "1",
            "null",
            "{}",
            r#"{"reason":"x"}"#,
            r#"{"reason":1,"message":"m"}"#,
        ] {
            assert!(serde_json::from_str::<Reason>(bad).is_err(), "{bad}");
        }
    }
}
