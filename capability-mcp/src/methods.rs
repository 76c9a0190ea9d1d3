//! Every MCP method, and what the governed edge does with it: one table, so that no front (the
//! governed server, the proxy, a gateway) can forget one, and the README's table cannot drift
//! from the code (a test compares them).
//!
//! A method that is not in the table is not passed on: a request gets `method not found`, a
//! notification is dropped.

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
}

/// What the governed edge does with a method.
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
    /// Needs a role (any); passed on; not recorded: it changes what the session is sent, not
    /// what it may do.
    RoleOnly,
    /// A server's request to the client: refused unless the client's role allows it
    /// (`server_requests`), and recorded when allowed.
    ServerRequest,
    /// Not passed on.
    Refused,
}

/// One MCP method and its handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McpMethod {
    /// The method, as on the wire.
    pub name: &'static str,
    /// Who sends it.
    pub direction: Direction,
    /// What the governed edge does with it.
    pub handling: Handling,
    /// What `GovernedServer` does, in a few words.
    pub governed_server: &'static str,
    /// What `capability proxy` does, in a few words.
    pub proxy: &'static str,
    /// The test that shows it (`file::function`).
    pub test: &'static str,
}

const fn m(
    name: &'static str,
    direction: Direction,
    handling: Handling,
    governed_server: &'static str,
    proxy: &'static str,
    test: &'static str,
) -> McpMethod {
    McpMethod {
        name,
        direction,
        handling,
        governed_server,
        proxy,
        test,
    }
}

use Direction::{ClientNotification, ClientRequest, ServerNotification, ServerRequest};

/// Every method the governed edge passes on or answers, in the order of the README's table.
pub const METHODS: &[McpMethod] = &[
    m(
        "initialize",
        ClientRequest,
        Handling::Lifecycle,
        "the inner handler answers",
        "the proxy answers (its own capabilities: tools; resources, prompts and completions as `forward` says)",
        "proxy_revisions.rs::servers_of_both_revisions_are_governed_behind_the_proxy",
    ),
    m(
        "server/discover",
        ClientRequest,
        Handling::Lifecycle,
        "the inner handler answers",
        "the proxy answers",
        "proxy_revisions.rs::servers_of_both_revisions_are_governed_behind_the_proxy",
    ),
    m(
        "ping",
        ClientRequest,
        Handling::Lifecycle,
        "answered",
        "answered by the proxy",
        "rmcp_server_items.rs::a_listen_filter_keeps_list_changes_and_drops_resource_subscriptions",
    ),
    m(
        "tools/list",
        ClientRequest,
        Handling::Listed,
        "the role's visible tools, one page",
        "the role's visible tools, from the reviewed listing",
        "rmcp_server_governed.rs::operator_sees_every_tool_and_viewer_exactly_the_read_only_ones",
    ),
    m(
        "tools/call",
        ClientRequest,
        Handling::Decided,
        "decided, intent recorded, inner handler called, outcome recorded",
        "decided, intent recorded, forwarded, outcome recorded",
        "proxy_stdio.rs::rmcp_client_through_the_proxy_on_server_everything",
    ),
    m(
        "resources/list",
        ClientRequest,
        Handling::Listed,
        "entries whose URI the role may read",
        "the same, when `forward` names resources",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "resources/templates/list",
        ClientRequest,
        Handling::Listed,
        "templates whose URI template the role's resource patterns match",
        "the same, when `forward` names resources",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "resources/read",
        ClientRequest,
        Handling::Decided,
        "decided on the URI, recorded",
        "the same, when `forward` names resources",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "resources/subscribe",
        ClientRequest,
        Handling::Decided,
        "decided on the URI, recorded",
        "the same, when `forward` names resources",
        "rmcp_server_items.rs::subscribe_and_completion_are_decided_and_recorded",
    ),
    m(
        "resources/unsubscribe",
        ClientRequest,
        Handling::Decided,
        "decided on the URI, recorded",
        "the same, when `forward` names resources",
        "rmcp_server_items.rs::subscribe_and_completion_are_decided_and_recorded",
    ),
    m(
        "resources/directory/read",
        ClientRequest,
        Handling::Decided,
        "decided on the directory's URI, recorded; entries filtered by URI",
        "not advertised: method not found",
        "rmcp_server_items.rs::skills_and_directories_are_decided_by_uri",
    ),
    m(
        "prompts/list",
        ClientRequest,
        Handling::Listed,
        "prompts the role may get",
        "the same, when `forward` names prompts",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "prompts/get",
        ClientRequest,
        Handling::Decided,
        "decided on the name, recorded",
        "the same, when `forward` names prompts",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "completion/complete",
        ClientRequest,
        Handling::Decided,
        "decided on its reference (the prompt's name, or the template's URI), recorded",
        "the same, when `forward` names resources or prompts",
        "rmcp_server_items.rs::subscribe_and_completion_are_decided_and_recorded",
    ),
    m(
        "logging/setLevel",
        ClientRequest,
        Handling::RoleOnly,
        "passed on for a caller with a role",
        "not advertised: method not found",
        "rmcp_server_items.rs::a_caller_without_a_role_gets_nothing_of_any_method",
    ),
    m(
        "subscriptions/listen",
        ClientRequest,
        Handling::RoleOnly,
        "list changes only: resource subscriptions are taken out of the filter (a subscription is decided through resources/subscribe)",
        "list changes, told to every open subscription",
        "rmcp_server_items.rs::a_listen_filter_keeps_list_changes_and_drops_resource_subscriptions",
    ),
    m(
        "tasks/get",
        ClientRequest,
        Handling::Owned,
        "only the session whose tools/call made the task",
        "not advertised: method not found",
        "rmcp_server_items.rs::a_task_is_only_its_sessions",
    ),
    m(
        "tasks/update",
        ClientRequest,
        Handling::Owned,
        "only the session whose tools/call made the task",
        "not advertised: method not found",
        "rmcp_server_items.rs::a_task_is_only_its_sessions",
    ),
    m(
        "tasks/cancel",
        ClientRequest,
        Handling::Owned,
        "only the session whose tools/call made the task",
        "not advertised: method not found",
        "rmcp_server_items.rs::a_task_is_only_its_sessions",
    ),
    m(
        "skills/list",
        ClientRequest,
        Handling::Listed,
        "skills whose URI the role may read",
        "not advertised: method not found",
        "rmcp_server_items.rs::skills_and_directories_are_decided_by_uri",
    ),
    m(
        "skills/get",
        ClientRequest,
        Handling::Decided,
        "decided on the skill's URI, recorded",
        "not advertised: method not found",
        "rmcp_server_items.rs::skills_and_directories_are_decided_by_uri",
    ),
    m(
        "notifications/initialized",
        ClientNotification,
        Handling::Lifecycle,
        "passed on",
        "handled by the proxy",
        "proxy_stdio.rs::rmcp_client_through_the_proxy_on_server_everything",
    ),
    m(
        "notifications/cancelled",
        ClientNotification,
        Handling::Lifecycle,
        "passed on: rmcp cancels the request's token, which the inner handler may watch; the outcome on record is what the handler returns",
        "the call forwarded is cancelled upstream (`notifications/cancelled`); its outcome on record says cancelled",
        "proxy_trail.rs::a_call_the_client_cancels_is_cancelled_upstream_and_its_outcome_says_so",
    ),
    m(
        "notifications/progress",
        ClientNotification,
        Handling::Lifecycle,
        "passed on",
        "not forwarded; sent by the server for a call the client gave a `progressToken`, it reaches that client under the client's token until the call's answer (`gateway.rs::over_http_two_sessions_giving_the_same_progress_token_each_hear_only_their_own_call`)",
        "rmcp_server_items.rs::lifecycle_notifications_are_passed_on_and_no_custom_message",
    ),
    m(
        "notifications/roots/list_changed",
        ClientNotification,
        Handling::Lifecycle,
        "passed on",
        "not forwarded (roots are a server request the role must allow)",
        "rmcp_server_items.rs::lifecycle_notifications_are_passed_on_and_no_custom_message",
    ),
    m(
        "sampling/createMessage",
        ServerRequest,
        Handling::ServerRequest,
        "the handler's own code sends it (not intercepted: see the README)",
        "refused unless the role's `server_requests` allows it (over stdio; refused over HTTP), recorded",
        "proxy_server_requests.rs::server_requests_are_refused_unless_the_role_allows_them",
    ),
    m(
        "elicitation/create",
        ServerRequest,
        Handling::ServerRequest,
        "the handler's own code sends it (not intercepted: see the README)",
        "refused unless the role's `server_requests` allows it (over stdio; refused over HTTP), recorded",
        "proxy_server_requests.rs::server_requests_are_refused_unless_the_role_allows_them",
    ),
    m(
        "roots/list",
        ServerRequest,
        Handling::ServerRequest,
        "the handler's own code sends it (not intercepted: see the README)",
        "refused unless the role's `server_requests` allows it (over stdio; refused over HTTP), recorded",
        "proxy_server_requests.rs::server_requests_are_refused_unless_the_role_allows_them",
    ),
    m(
        "notifications/tools/list_changed",
        ServerNotification,
        Handling::Lifecycle,
        "the handler sends it",
        "the proxy lists again (one relist in flight, one pending), reviews the list and tells each client once per change",
        "proxy_trail.rs::a_storm_of_list_changes_is_coalesced",
    ),
    m(
        "notifications/resources/list_changed",
        ServerNotification,
        Handling::Lifecycle,
        "the handler sends it",
        "passed on when `forward` names resources",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "notifications/prompts/list_changed",
        ServerNotification,
        Handling::Lifecycle,
        "the handler sends it",
        "passed on when `forward` names prompts",
        "proxy_forward.rs::resources_and_prompts_are_decided_and_recorded_per_role",
    ),
    m(
        "notifications/resources/updated",
        ServerNotification,
        Handling::Lifecycle,
        "the handler sends it (to a session whose subscription was decided)",
        "passed on over stdio for a URI the role may read, when `forward` names resources; not over HTTP",
        "proxy_trail.rs::a_resource_update_reaches_the_client_only_for_what_its_role_may_read",
    ),
    m(
        "notifications/subscriptions/acknowledged",
        ServerNotification,
        Handling::Lifecycle,
        "rmcp sends it, with the filter the governed server accepted",
        "rmcp sends it (tool list changes only)",
        "rmcp_server_items.rs::a_listen_filter_keeps_list_changes_and_drops_resource_subscriptions",
    ),
    m(
        "notifications/message",
        ServerNotification,
        Handling::Refused,
        "the handler sends it",
        "not forwarded (the server's log is not the client's)",
        "proxy_forward.rs::tools_only_by_default",
    ),
];

/// The table's entry for `name`, if the governed edge knows it (anything else is not passed
/// on).
///
/// ```
/// use capability::mcp::{method, Handling};
///
/// assert_eq!(method("resources/read").unwrap().handling, Handling::Decided);
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
    fn each_method_is_in_the_table_once() {
        for (i, a) in METHODS.iter().enumerate() {
            assert!(
                METHODS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            assert!(a.test.contains(".rs::"), "{}: `file::test`", a.name);
        }
    }
}
