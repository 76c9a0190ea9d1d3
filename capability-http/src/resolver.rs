//! [`EdgeRoles`]: the role, principal, scopes and session of a request, as the [`Edge`] in front
//! of the governed server established them.
//!
//! [`Edge`]: crate::Edge

use capability_audit::Principal;
use capability_mcp::rmcp::{RoleResolver, http_parts};
use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::auth::Authenticated;
use crate::edge::VerifiedSession;

/// The [`RoleResolver`] of a [`GovernedServer`](capability_mcp::rmcp::GovernedServer) behind an
/// [`Edge`](crate::Edge): it believes only what the edge put in the request (never a header),
/// so a request that did not pass the edge has no role.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeRoles;

fn caller(context: &RequestContext<RoleServer>) -> Option<&Authenticated> {
    http_parts(context)?.extensions.get::<Authenticated>()
}

impl RoleResolver for EdgeRoles {
    fn role(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        caller(context)?.role.clone()
    }

    /// The session the edge checked was issued to this caller; a header the edge did not
    /// check counts for nothing.
    fn session(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        let session = http_parts(context)?.extensions.get::<VerifiedSession>()?;
        Some(session.0.clone())
    }

    fn principal(&self, context: &RequestContext<RoleServer>) -> Option<Principal> {
        Some(caller(context)?.principal.clone())
    }

    fn scopes(&self, context: &RequestContext<RoleServer>) -> Option<Vec<String>> {
        caller(context)?.scopes.clone()
    }
}
