//! Authority grants: issued, attenuated for sub-agents, revoked. How a grant decides, and the
//! decider that lets an audited dispatch use one, are in `decide.rs`.

use std::collections::HashSet;
use std::fmt;

use capability_core::authz::{Ceiling, Pattern as ToolPattern, Rules};
use serde::{Serialize, Serializer};

use crate::ledger::StoreError;

mod decide;

pub use decide::{GrantContext, PolicyDecision};

/// What one grant (and each grant it was attenuated from) allows: its pattern as the only
/// `allow`, its ceiling and its scopes, as [`Rules`] that the one decision applies.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Constraint {
    id: String,
    issuer: String,
    /// The one `allow` pattern of `rules`, kept for narrowing and for the audit trail.
    pattern: ToolPattern,
    rules: Rules,
    expires_at: u64,
}

impl Constraint {
    fn new(
        id: String,
        issuer: String,
        ceiling: Ceiling,
        scopes: Vec<String>,
        pattern: ToolPattern,
        expires_at: u64,
    ) -> Constraint {
        let rules = Rules::new(ceiling).allow(pattern.clone()).scopes(scopes);
        Constraint {
            id,
            issuer,
            pattern,
            rules,
            expires_at,
        }
    }

    fn ceiling(&self) -> Ceiling {
        self.rules.ceiling()
    }

    /// Sorted, de-duplicated.
    fn scopes(&self) -> &[String] {
        self.rules.held_scopes()
    }
}

/// Serialized as `{id, issuer, ceiling, scopes, pattern, expires_at}`, for the audit trail.
impl Serialize for Constraint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            id: &'a str,
            issuer: &'a str,
            ceiling: Ceiling,
            scopes: &'a [String],
            pattern: &'a ToolPattern,
            expires_at: u64,
        }
        View {
            id: &self.id,
            issuer: &self.issuer,
            ceiling: self.ceiling(),
            scopes: self.scopes(),
            pattern: &self.pattern,
            expires_at: self.expires_at,
        }
        .serialize(serializer)
    }
}

/// Authority to call tools: a ceiling, scopes, a tool pattern, an expiry and its issuer.
///
/// A holder can [`attenuate`](Self::attenuate) it into a narrower grant for a sub-agent; the
/// narrower grant is checked against every grant it comes from, so it never authorizes what
/// its parent denies. Revoking a grant ([`RevocationStore::revoke`]) revokes everything attenuated
/// from it. Grants are held in the process that issued them: they serialize (for the audit
/// trail) but do not deserialize.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthorityGrant {
    /// From the root grant to this one.
    chain: Vec<Constraint>,
}

/// The narrowing of a grant: each `Some` must be at most the parent's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attenuation {
    /// A lower (or equal) ceiling.
    pub ceiling: Option<Ceiling>,
    /// A subset of the scopes.
    pub scopes: Option<Vec<String>>,
    /// A narrower pattern.
    pub pattern: Option<String>,
    /// An earlier (or equal) expiry.
    pub expires_at: Option<u64>,
}

impl AuthorityGrant {
    /// Issues a root grant.
    pub fn issue(
        issuer: impl Into<String>,
        ceiling: Ceiling,
        scopes: impl IntoIterator<Item = impl Into<String>>,
        pattern: &str,
        expires_at: u64,
    ) -> Result<AuthorityGrant, GrantError> {
        let pattern = ToolPattern::new(pattern.to_owned()).map_err(GrantError::Pattern)?;
        Ok(AuthorityGrant {
            chain: vec![Constraint::new(
                new_id()?,
                issuer.into(),
                ceiling,
                scopes.into_iter().map(Into::into).collect(),
                pattern,
                expires_at,
            )],
        })
    }

    fn own(&self) -> &Constraint {
        // A grant always has its own constraint, last in the chain.
        &self.chain[self.chain.len() - 1]
    }

    /// The grant's id.
    pub fn id(&self) -> &str {
        &self.own().id
    }

    /// Who issued it (for an attenuated grant: the holder of the parent).
    pub fn issuer(&self) -> &str {
        &self.own().issuer
    }

    /// The ids of the grants it was attenuated from, root first.
    pub fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.chain[..self.chain.len() - 1]
            .iter()
            .map(|c| c.id.as_str())
    }

    /// A narrower grant for a sub-agent; anything that would widen it is an error.
    pub fn attenuate(
        &self,
        holder: impl Into<String>,
        narrowing: Attenuation,
    ) -> Result<AuthorityGrant, GrantError> {
        let parent = self.own();
        let ceiling = narrowing.ceiling.unwrap_or(parent.ceiling());
        if ceiling > parent.ceiling() {
            return Err(GrantError::Widens(format!(
                "ceiling {ceiling} is above the parent's {}",
                parent.ceiling()
            )));
        }
        let scopes = narrowing.scopes.unwrap_or_else(|| parent.scopes().to_vec());
        if let Some(extra) = scopes
            .iter()
            .find(|s| parent.scopes().binary_search(s).is_err())
        {
            return Err(GrantError::Widens(format!(
                "scope `{extra}` is not in the parent grant"
            )));
        }
        let pattern = match narrowing.pattern {
            None => parent.pattern.clone(),
            Some(text) => {
                let pattern = ToolPattern::new(text).map_err(GrantError::Pattern)?;
                if !narrower(&pattern, &parent.pattern) {
                    return Err(GrantError::Widens(format!(
                        "pattern `{}` is not provably within the parent's `{}` (use the same \
                         pattern, or extend the parent's prefix before its trailing `*`)",
                        pattern.as_str(),
                        parent.pattern.as_str()
                    )));
                }
                pattern
            }
        };
        let expires_at = narrowing.expires_at.unwrap_or(parent.expires_at);
        if expires_at > parent.expires_at {
            return Err(GrantError::Widens(format!(
                "expiry {expires_at} is after the parent's {}",
                parent.expires_at
            )));
        }
        let mut chain = self.chain.clone();
        chain.push(Constraint::new(
            new_id()?,
            holder.into(),
            ceiling,
            scopes,
            pattern,
            expires_at,
        ));
        Ok(AuthorityGrant { chain })
    }
}

/// Whether `child` matches only what `parent` matches, by a simple sufficient rule: the parent
/// is `*`, the two are equal, or the parent is `prefix*` (one trailing `*`) and the child
/// starts with `prefix`.
fn narrower(child: &ToolPattern, parent: &ToolPattern) -> bool {
    let (c, p) = (child.as_str(), parent.as_str());
    if p == "*" || c == p {
        return true;
    }
    match p.strip_suffix('*') {
        Some(prefix) if !prefix.contains(['*', '?']) => c.starts_with(prefix),
        _ => false,
    }
}

fn new_id() -> Result<String, GrantError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| GrantError::Randomness(e.to_string()))?;
    Ok(capability_rules::hex::encode(&bytes))
}

/// Where revocations live, shared by every process that decides with the same grants.
///
/// Revoking a grant revokes everything attenuated from it, since every decision checks the
/// whole chain. An error means the store could not be reached: the decision is then a denial
/// ([`DenyReason::RevocationsUnavailable`](capability_core::authz::DenyReason)), never a grant
/// believed. The SQLite and PostgreSQL stores of `capability-store` are shared between
/// processes; [`MemoryRevocations`] holds within one process.
pub trait RevocationStore: Send + Sync + fmt::Debug {
    /// Revokes a grant, and with it every grant attenuated from it.
    fn revoke(&self, grant_id: &str) -> Result<(), StoreError>;

    /// The ids among `grant_ids` that are revoked, in the order given.
    fn revoked_among(&self, grant_ids: &[&str]) -> Result<Vec<String>, StoreError>;

    /// Whether a grant, or one it comes from, is revoked.
    fn is_revoked(&self, grant: &AuthorityGrant) -> Result<bool, StoreError> {
        let ids: Vec<&str> = grant.chain.iter().map(|c| c.id.as_str()).collect();
        Ok(!self.revoked_among(&ids)?.is_empty())
    }
}

impl<R: RevocationStore + ?Sized> RevocationStore for std::sync::Arc<R> {
    fn revoke(&self, grant_id: &str) -> Result<(), StoreError> {
        (**self).revoke(grant_id)
    }

    fn revoked_among(&self, grant_ids: &[&str]) -> Result<Vec<String>, StoreError> {
        (**self).revoked_among(grant_ids)
    }
}

/// Revoked grant ids in this process's memory: for tests and single-process programs. Another
/// process does not see them: use a shared store (`capability_store`) for a fleet.
#[derive(Debug, Default)]
pub struct MemoryRevocations {
    revoked: std::sync::Mutex<HashSet<String>>,
}

impl MemoryRevocations {
    /// No revocations.
    pub fn new() -> Self {
        MemoryRevocations::default()
    }

    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.revoked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl RevocationStore for MemoryRevocations {
    fn revoke(&self, grant_id: &str) -> Result<(), StoreError> {
        self.set().insert(grant_id.to_owned());
        Ok(())
    }

    fn revoked_among(&self, grant_ids: &[&str]) -> Result<Vec<String>, StoreError> {
        let set = self.set();
        Ok(grant_ids
            .iter()
            .filter(|id| set.contains(**id))
            .map(|id| (*id).to_owned())
            .collect())
    }
}

/// A grant that could not be issued or attenuated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantError {
    /// The narrowing would widen the grant.
    Widens(String),
    /// The pattern is not valid.
    Pattern(String),
    /// No randomness for an id.
    Randomness(String),
}

impl fmt::Display for GrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantError::Widens(why) => {
                write!(f, "an attenuated grant cannot widen its parent: {why}")
            }
            GrantError::Pattern(why) => f.write_str(why),
            GrantError::Randomness(why) => write!(f, "no randomness for a grant id: {why}"),
        }
    }
}

impl std::error::Error for GrantError {}
