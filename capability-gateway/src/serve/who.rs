//! Who asks: over stdio the one client of the engine's role; over HTTP, whom the edge
//! authenticated (its role from its token, narrowed to the token's scopes).

use capability::audit::{Caller, Principal};
use capability::authz::{Action, Authorize, ToolContext};

/// Who asks: over stdio the one client of the gateway's role; over HTTP, whom the edge
/// authenticated (its role from its token, narrowed to the token's scopes).
pub(crate) struct Who {
    pub(crate) role: String,
    pub(crate) session: String,
    pub(crate) principal: Option<Principal>,
    pub(crate) ctx: Option<ToolContext>,
}

impl Who {
    /// The session its requests are counted in (`gateway:<role>` over stdio,
    /// `gateway:<principal>/<session id>` over HTTP).
    pub(crate) fn session(&self) -> &str {
        &self.session
    }

    /// The role (`(none)` for a caller without one).
    pub(crate) fn role(&self) -> &str {
        &self.role
    }

    /// Who proposes a held call: the principal the edge authenticated, or the stdio role.
    pub(crate) fn proposer(&self) -> String {
        match &self.principal {
            Some(principal) => principal.key(),
            None => format!("role:{}", self.role),
        }
    }

    pub(crate) fn caller(&self) -> Caller<'_> {
        let caller = Caller::new("mcp-client");
        match &self.principal {
            Some(principal) => caller.principal(principal),
            None => caller,
        }
    }
}

/// Whether `who` may see `action` (a caller without a role sees nothing).
pub(crate) fn may(who: &Who, action: &Action<'_>) -> bool {
    who.ctx
        .as_ref()
        .is_some_and(|ctx| ctx.decide_action(action).is_allowed())
}
