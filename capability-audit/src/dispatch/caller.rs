//! Who is calling: the agent, the workflow step, the incident, and the principal an edge
//! authenticated.

use crate::*;

/// The longest incident id a record takes, in characters: the `incident_id VARCHAR(64)` column
/// of the database trails.
pub const MAX_INCIDENT_ID_CHARS: usize = 64;

/// Who is calling: the agent and, optionally, the workflow step and the incident the call is
/// part of. The role and session come from the decider
/// ([`Authorize`](capability_core::authz::Authorize)).
///
/// ```
/// use capability::audit::Caller;
///
/// const WATCHER: Caller<'static> = Caller::new("watcher").step("triage");
/// let caller = WATCHER.incident("INC-2026-0042");
/// assert_eq!(caller.incident, Some("INC-2026-0042"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The workflow step (the flywheel node).
    pub step: Option<&'a str>,
    /// The incident the call is part of (`INC-2026-0042`): 1 to [`MAX_INCIDENT_ID_CHARS`]
    /// characters, no control characters. A call naming another is refused
    /// ([`Outcome::AuditFailed`]): its record could not be stored whole.
    pub incident: Option<&'a str>,
    /// Who called, when an edge authenticated the caller (an OAuth token's subject, client and
    /// issuer; the bearer-token table's entry): written into every record of the call.
    pub principal: Option<&'a Principal>,
    /// How a call held back for a human's consent was let through (an approval's id and its
    /// approver): written into the reasons of every record of the call.
    pub consent: Option<&'a Consent>,
}

impl<'a> Caller<'a> {
    /// The agent `agent`, with no step and no incident.
    pub const fn new(agent: &'a str) -> Self {
        Caller {
            agent,
            step: None,
            incident: None,
            principal: None,
            consent: None,
        }
    }

    /// Let through by this consent (a signed approval, a grant, an elicited answer).
    pub const fn consent(mut self, consent: &'a Consent) -> Self {
        self.consent = Some(consent);
        self
    }

    /// In the workflow step `step`.
    pub const fn step(mut self, step: &'a str) -> Self {
        self.step = Some(step);
        self
    }

    /// Part of the incident `incident`.
    pub const fn incident(mut self, incident: &'a str) -> Self {
        self.incident = Some(incident);
        self
    }

    /// Authenticated as `principal`.
    pub const fn principal(mut self, principal: &'a Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// Why the caller cannot be recorded as it is, if it cannot.
    pub(super) fn invalid(&self) -> Option<AuditError> {
        let incident = self.incident?;
        let chars = incident.chars().count();
        let why = if incident.is_empty() {
            "the incident id is empty (leave it out instead)".to_owned()
        } else if chars > MAX_INCIDENT_ID_CHARS {
            format!(
                "the incident id is {chars} characters long, more than the \
                 {MAX_INCIDENT_ID_CHARS} a record stores"
            )
        } else if incident.chars().any(char::is_control) {
            "the incident id holds a control character".to_owned()
        } else {
            return None;
        };
        Some(AuditError::InvalidRecord {
            message: format!("the call cannot be recorded: {why}"),
        })
    }
}
