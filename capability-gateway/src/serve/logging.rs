//! `logging/setLevel`, across revisions: a client of 2025-11-25 sets its session's level once;
//! the gateway keeps it, on record, and tells the servers as each revision wants it: a server of
//! 2025-11-25 gets the request itself, a server of 2026-07-28 the level in the `_meta` of each
//! request made for that client (`bridge.rs`). The servers' messages reach that client at or
//! above its level (`relay.rs`).

// rmcp marks logging deprecated (SEP-2577); clients and servers of 2025-11-25 still use it.
#![allow(deprecated)]

use ::rmcp::model::SetLevelRequestParams;
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer};
use serde_json::json;

use capability::audit::{Reason, Subject};
use capability::authz::DenyReason;

use crate::serve::gateway::Gateway;

impl Gateway {
    /// A client's `logging/setLevel`: kept for its session, on record, passed on to the servers
    /// of 2025-11-25. A caller without a role is refused (and recorded).
    pub(crate) async fn level_set(
        &self,
        request: SetLevelRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let input = json!({ "level": request.level });
        let subject = Subject::new(who.role(), who.session())
            .policy_version(snapshot.policy_version.as_deref());
        if who.ctx.is_none() {
            // Nothing is decided (no tool, resource or prompt): the refusal is a notice.
            let why = DenyReason::NoRole.to_string();
            let _ = self.dispatch.notice(
                &subject,
                who.caller(),
                "logging/setLevel",
                "session",
                &input,
                Reason::note("refused", why.clone()),
            );
            return Err(ErrorData::invalid_request(
                format!("`logging/setLevel` refused by {}: {why}", self.name),
                None,
            ));
        }
        self.levels.set(who.session(), request.level);
        if let Err(error) = self.dispatch.notice(
            &subject,
            who.caller(),
            "logging/setLevel",
            "session",
            &input,
            Reason::note(
                "log_level",
                format!("the session's log level is {:?}", request.level).to_lowercase(),
            ),
        ) {
            return Err(ErrorData::internal_error(
                format!("the log level could not be recorded: {error}"),
                None,
            ));
        }
        for server in snapshot.peers.keys() {
            // The connection this client's calls take: a session of 2025-11-25 takes the level
            // itself; on 2026-07-28 it goes with each request instead.
            let Ok(leg) = self.leg(&snapshot, server, context).await else {
                continue;
            };
            let session = leg
                .peer
                .peer_info()
                .is_none_or(|info| info.protocol_version.has_initialize());
            if session && let Err(error) = leg.peer.set_level(request.clone()).await {
                crate::note(format_args!(
                    "server `{server}` did not take the log level: {error}"
                ));
            }
        }
        Ok(())
    }
}
