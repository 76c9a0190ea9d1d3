//! The `[approvals]` table of a policy: who may approve a call that a role's `approve` patterns
//! hold back, for which audience, where proposals are kept, and how long they and their
//! approvals live.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::TomlError;

/// How long a proposal waits for an approval, by default: an hour.
pub const DEFAULT_PROPOSAL_SECS: u64 = 60 * 60;

/// How a held call waits for a human (see [`Policy::hold`](super::Policy::hold)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hold {
    /// A signed approval of exactly this call (`capability approve`), or a signed plan grant
    /// covering it (`capability grant`).
    Signature,
    /// Any of those, or the client's human confirming it through MCP elicitation: weaker,
    /// since the client relays the answer and nothing is signed; the record says `elicited`.
    Confirmation,
}

/// The `[approvals]` table: what a gateway needs to hold back the calls a role's `approve`
/// patterns name until a human signs them (`capability approve`), and to run each signed call
/// once.
///
/// ```
/// use capability::Policy;
///
/// let policy = Policy::from_toml_str(r#"
///     [roles.operator]
///     ceiling = "unrestricted"
///     allow = ["*"]
///     approve = ["git/git_reset", "k8s/delete*"]
///
///     [approvals]
///     audience = "gateway-prod"
///     proposals = "proposals"
///     ledger = "state.db"
///     approvers = { alice = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" }
/// "#)?;
/// let approvals = policy.approvals().expect("an [approvals] table");
/// assert_eq!(approvals.audience(), "gateway-prod");
/// assert_eq!(approvals.approvers().next().map(|(name, _)| name), Some("alice"));
/// assert!(policy.needs_approval("operator", Some("git"), "git_reset"));
/// assert!(policy.needs_approval("operator", Some("K8S"), "delete_pod"), "matched loosely");
/// assert!(!policy.needs_approval("operator", Some("git"), "git_status"));
/// # Ok::<(), capability::authz::PolicyError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalSettings {
    audience: String,
    approvers: Vec<(String, String)>,
    proposals: Option<String>,
    grants: Option<String>,
    ledger: Option<String>,
    proposal_secs: u64,
    max_validity_secs: Option<u64>,
    page_roles: Vec<String>,
}

impl ApprovalSettings {
    /// The directory of signed plan grants (`capability grant --out <dir>/<name>.grant.json`),
    /// as written (relative to the policy file).
    pub fn grants(&self) -> Option<&str> {
        self.grants.as_deref()
    }

    /// The audience approvals must be signed for (`capability approve --audience`): this
    /// gateway's name; an approval for any other is refused.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The approvers and their Ed25519 public keys (64 hex digits, as `capability keygen`
    /// writes them), in name order.
    pub fn approvers(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.approvers
            .iter()
            .map(|(name, key)| (name.as_str(), key.as_str()))
    }

    /// The directory proposals are written to, as written (relative to the policy file).
    pub fn proposals(&self) -> Option<&str> {
        self.proposals.as_deref()
    }

    /// The store whose ledger records used approvals (a SQLite path or `postgres://...`), as
    /// written; `None` means the gateway's `--audit` store.
    pub fn ledger(&self) -> Option<&str> {
        self.ledger.as_deref()
    }

    /// How long a proposal waits for an approval, in seconds.
    pub fn proposal_secs(&self) -> u64 {
        self.proposal_secs
    }

    /// The longest an approval may be valid, in seconds, if the table lowers the gate's
    /// default.
    pub fn max_validity_secs(&self) -> Option<u64> {
        self.max_validity_secs
    }

    /// The roles whose callers may use the approvals page of the gateway's HTTP front
    /// (`/approvals`): see the proposals waiting, and approve (signed in their browser with
    /// their own key) or reject them. None by default: the page's data is refused to everyone.
    /// Each must be a role of the policy, and the page needs `proposals` (where it keeps the
    /// approvals it is given).
    ///
    /// ```
    /// use capability::Policy;
    ///
    /// let table = |extra: &str| format!(r#"
    ///     [roles.operator]
    ///     ceiling = "unrestricted"
    ///     allow = ["*"]
    ///     [roles.approver]
    ///     ceiling = "read-only"
    ///     allow = []
    ///     [approvals]
    ///     audience = "gw"
    ///     {extra}
    /// "#);
    /// let policy = Policy::from_toml_str(&table("proposals = \"p\"\npage_roles = [\"approver\"]"))?;
    /// let approvals = policy.approvals().expect("[approvals]");
    /// assert!(approvals.may_use_page("approver") && !approvals.may_use_page("operator"));
    /// let unknown = Policy::from_toml_str(&table("proposals = \"p\"\npage_roles = [\"admin\"]"));
    /// assert!(unknown.unwrap_err().to_string().contains("no role `admin`"));
    /// let nowhere = Policy::from_toml_str(&table("page_roles = [\"approver\"]"));
    /// assert!(nowhere.unwrap_err().to_string().contains("set `proposals`"));
    /// # Ok::<(), capability::authz::PolicyError>(())
    /// ```
    pub fn page_roles(&self) -> &[String] {
        &self.page_roles
    }

    /// Whether a caller of `role` may use the approvals page ([`page_roles`](Self::page_roles)).
    pub fn may_use_page(&self, role: &str) -> bool {
        self.page_roles.iter().any(|r| r == role)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ApprovalsFile {
    audience: Spanned<String>,
    #[serde(default)]
    approvers: BTreeMap<Spanned<String>, Spanned<String>>,
    proposals: Option<Spanned<String>>,
    grants: Option<Spanned<String>>,
    ledger: Option<Spanned<String>>,
    proposal_secs: Option<Spanned<u64>>,
    max_validity_secs: Option<Spanned<u64>>,
    #[serde(default)]
    page_roles: Vec<Spanned<String>>,
}

impl ApprovalsFile {
    pub(super) fn check(
        self,
        is_role: impl Fn(&str) -> bool,
        at: &impl Fn(usize, String) -> TomlError,
    ) -> Result<ApprovalSettings, TomlError> {
        let audience = self.audience.get_ref();
        if audience.trim().is_empty() || audience.trim() != audience {
            return Err(at(
                self.audience.span().start,
                "`audience` names this gateway for approvers (`capability approve --audience`); \
                 it cannot be empty or have white space around it"
                    .to_owned(),
            ));
        }
        let mut approvers = Vec::with_capacity(self.approvers.len());
        for (name, key) in self.approvers {
            if name.get_ref().trim().is_empty() {
                return Err(at(
                    name.span().start,
                    "an approver's name cannot be empty".to_owned(),
                ));
            }
            let hex = key.get_ref().trim();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(at(
                    key.span().start,
                    format!(
                        "approver `{}`: not a public key; write the 64 hex digits of the `.pub` \
                         file `capability keygen` wrote",
                        name.get_ref().escape_debug()
                    ),
                ));
            }
            approvers.push((name.into_inner(), hex.to_ascii_lowercase()));
        }
        for (field, value) in [
            ("proposals", &self.proposals),
            ("grants", &self.grants),
            ("ledger", &self.ledger),
        ] {
            if let Some(value) = value.as_ref().filter(|v| v.get_ref().trim().is_empty()) {
                return Err(at(
                    value.span().start,
                    format!("`{field}` cannot be empty; leave it out instead"),
                ));
            }
        }
        let positive = |value: Option<Spanned<u64>>, field: &str| match value {
            Some(v) if *v.get_ref() == 0 => Err(at(
                v.span().start,
                format!("`{field}` must be at least 1 second"),
            )),
            other => Ok(other.map(Spanned::into_inner)),
        };
        let mut page_roles = Vec::with_capacity(self.page_roles.len());
        for role in self.page_roles {
            let why = if !is_role(role.get_ref()) {
                format!("`page_roles`: no role `{}`", role.get_ref().escape_debug())
            } else if self.proposals.is_none() {
                "`page_roles`: the approvals page keeps the approvals it is given in the \
                 `proposals` directory, where the retried call finds them; set `proposals`"
                    .to_owned()
            } else {
                page_roles.push(role.into_inner());
                continue;
            };
            return Err(at(role.span().start, why));
        }
        Ok(ApprovalSettings {
            audience: audience.clone(),
            approvers,
            proposals: self.proposals.map(Spanned::into_inner),
            grants: self.grants.map(Spanned::into_inner),
            ledger: self.ledger.map(Spanned::into_inner),
            proposal_secs: positive(self.proposal_secs, "proposal_secs")?
                .unwrap_or(DEFAULT_PROPOSAL_SECS),
            max_validity_secs: positive(self.max_validity_secs, "max_validity_secs")?,
            page_roles,
        })
    }
}
