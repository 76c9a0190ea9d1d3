//! Every MCP method, and what the governed edge does with it: one table, so that no front (the
//! governed server, the gateway and `capability proxy`, which is a gateway of one server) can
//! forget one, and the table in docs/mcp.md cannot drift from the code (a test compares them).
//!
//! The table is the door: [`ByTable`](crate::rmcp::ByTable) (feature `rmcp-server`) answers a
//! request whose method has no row, or whose row says [`Handling::Refused`], with `method not
//! found` before any handler sees it, and drops such a notification. The tests check it against
//! the official schema of each revision served ([`REVISIONS`]): every method a revision defines
//! has a row naming that revision.

mod table;

pub use table::METHODS;

/// The protocol revisions the edge serves, oldest first.
pub const REVISIONS: &[&str] = &["2025-06-18", "2025-11-25", "2026-07-28"];

/// Who sends a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A request from the client.
    ClientRequest,
    /// A notification from the client.
    ClientNotification,
    /// A request from the server to the client.
    ServerRequest,
    /// A notification from the server.
    ServerNotification,
    /// A notification either side sends (`notifications/cancelled`, `notifications/progress`).
    Notification,
}

/// What the governed edge decides and records of a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handling {
    /// The session's lifecycle or the transport's: answered or passed on as it is, for any
    /// caller. Nothing in it reaches a tool, a resource or a prompt.
    Lifecycle,
    /// A list, filtered per caller by the one decision: each entry the caller's role may not
    /// use is left out, and a caller without a role gets an empty list. Not recorded (it acts
    /// on nothing), marked `cacheScope: "private"`.
    Listed,
    /// Decided for the caller's role (the tool; the resource's URI, as sent and resolved; the
    /// prompt's name) and recorded: an intent before it is passed on and an outcome after, or
    /// one refusal. A caller without a role is refused and recorded.
    Decided,
    /// Allowed only to the session whose call created the task; refused (and recorded)
    /// otherwise.
    Owned,
    /// Needs a role (any); passed on; not recorded as a call: it changes what the session is
    /// sent, not what it may do.
    RoleOnly,
    /// A server's request to the client: refused unless the client's role allows it
    /// (`server_requests`), and recorded when allowed.
    ServerRequest,
    /// Not passed on: a request is answered `method not found`, a notification dropped.
    Refused,
}

/// Where a method goes once it is let through, and to whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Answered by the edge itself (from what it holds: its capabilities, a listing); it
    /// reaches no server as such.
    Answered,
    /// To the one server that owns what it names: a tool's shown name, a URI, a prompt, a call.
    Owner,
    /// To every server (a log level).
    Every,
    /// From a server to the client of the call it came during (a server's request, a log
    /// message).
    Caller,
    /// From a server to every client session that may hear it (list changes, a resource's
    /// update to its subscribers).
    Sessions,
    /// Nowhere.
    Nowhere,
}

/// One MCP method and its handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McpMethod {
    /// The method, as on the wire.
    pub name: &'static str,
    /// Who sends it.
    pub direction: Direction,
    /// What is decided and recorded of it.
    pub handling: Handling,
    /// Where it goes, and to whom.
    pub route: Destination,
    /// The revisions whose schema defines it (of [`REVISIONS`]); empty for an extension rmcp
    /// speaks (skills, directories, `tasks/update`).
    pub revisions: &'static [&'static str],
    /// What `GovernedServer` does, in a few words.
    pub governed_server: &'static str,
    /// What `capability gateway` does (and so `capability proxy`), in a few words.
    pub gateway: &'static str,
    /// The test that shows it (`file::function`).
    pub test: &'static str,
}

impl McpMethod {
    /// Whether the edge lets it through from the client (a request or a notification of the
    /// client's, not [`Handling::Refused`]).
    pub fn admitted_from_client(&self) -> bool {
        matches!(
            self.direction,
            Direction::ClientRequest | Direction::ClientNotification | Direction::Notification
        ) && self.handling != Handling::Refused
    }
}

/// The table's entry for `name`, if the governed edge knows it (anything else is not passed
/// on).
///
/// ```
/// use capability::mcp::{method, Destination, Handling};
///
/// assert_eq!(method("resources/read").unwrap().handling, Handling::Decided);
/// assert_eq!(method("tools/call").unwrap().route, Destination::Owner);
/// assert_eq!(method("tools/list").unwrap().handling, Handling::Listed);
/// assert!(method("x-vendor/anything").is_none());
/// ```
pub fn method(name: &str) -> Option<&'static McpMethod> {
    METHODS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_is_in_the_table_once_with_known_revisions() {
        for (i, a) in METHODS.iter().enumerate() {
            assert!(
                METHODS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            assert!(a.test.contains(".rs::"), "{}: `file::test`", a.name);
            assert!(
                a.revisions.iter().all(|r| REVISIONS.contains(r)),
                "{}: {:?}",
                a.name,
                a.revisions
            );
        }
    }

    #[test]
    fn only_what_the_client_sends_and_is_not_refused_is_admitted() {
        assert!(method("tools/call").is_some_and(McpMethod::admitted_from_client));
        assert!(method("notifications/cancelled").is_some_and(McpMethod::admitted_from_client));
        assert!(!method("tasks/list").is_some_and(McpMethod::admitted_from_client));
        assert!(!method("sampling/createMessage").is_some_and(McpMethod::admitted_from_client));
    }
}
