//! `capability gateway --role <role> --audit <trail>`: the fleet served to one MCP client over
//! standard input and output, as one server.
//!
//! The client is shown its role's share of every server's tools under their shown names
//! ([`Fleet`]); a call is routed to its server under the tool's own name, decided on the tool's
//! own manifest and recorded (intent before it is forwarded, outcome after) in one trail with
//! its server as provider. A tool withheld for a reason of the fleet's (drift, a duplicate or a
//! shared name) or the role's is refused and recorded, and never reaches a server. When a server
//! says its tools changed, it is listed again, the listing rebuilt, and the client told. A
//! server that dies fails the calls routed to it, saying so; the others keep serving.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use capability::audit::{AuditedDispatch, Caller, Outcome, Request, Subject};
use capability::authz::{Action, DenyReason, ToolContext};
use capability::mcp::{Fleet, Listing, Lockfile, Server, WithheldReason};
use capability::rmcp::REFUSED_CODE;
use capability::{CapabilityManifest, Policy};

use super::GatewayError;
use super::fleet::{ServerSource, source_of};
use super::upstream::{Connection, connect, list};

/// The name the gateway gives itself.
pub const GATEWAY_NAME: &str = "capability-gateway";

/// One server of the running fleet.
struct Member {
    name: String,
    server: Server,
    lock: Option<Lockfile>,
    prefix: String,
    connection: Connection,
    tools: Vec<Tool>,
}

/// What the client is served from: the fleet, and each server's tools as it listed them.
struct Snapshot {
    fleet: Fleet,
    tools: HashMap<(String, String), Tool>,
}

fn snapshot(members: &[Member]) -> Result<Snapshot, String> {
    let mut listings = Vec::with_capacity(members.len());
    let mut tools = HashMap::new();
    for member in members {
        let values: Vec<Value> = member
            .tools
            .iter()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .collect();
        let listing = Listing::read(&member.server, &values, member.lock.as_ref())
            .map_err(|e| format!("server `{}`: {e}", member.name))?;
        listings.push((listing, member.prefix.clone()));
        for tool in &member.tools {
            tools.insert((member.name.clone(), tool.name.to_string()), tool.clone());
        }
    }
    let fleet = Fleet::new(listings).map_err(|e| e.to_string())?;
    Ok(Snapshot { fleet, tools })
}

/// The handler the client talks to.
#[derive(Clone)]
struct Gateway {
    ctx: ToolContext,
    role: String,
    policy_version: Option<String>,
    dispatch: Arc<AuditedDispatch>,
    current: Arc<RwLock<Arc<Snapshot>>>,
    peers: Arc<HashMap<String, Peer<RoleClient>>>,
}

impl Gateway {
    fn current(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Records a call refused before it could be decided or forwarded, and its error.
    fn refuse(
        &self,
        shown: &str,
        manifest: &CapabilityManifest,
        input: &Value,
        reasons: &[DenyReason],
    ) -> ErrorData {
        let session = self.ctx_session();
        let subject =
            Subject::new(&self.role, &session).policy_version(self.policy_version.as_deref());
        let request = Request::mcp("tools/call", Action::CallTool(manifest), input);
        self.dispatch
            .refuse(&subject, Caller::new("mcp-client"), &request, reasons);
        let texts: Vec<String> = reasons.iter().map(ToString::to_string).collect();
        refused(shown, &texts.join("; "))
    }

    fn ctx_session(&self) -> String {
        capability::authz::Authorize::session(&self.ctx).to_owned()
    }
}

/// A server's answer, for the record: the result, or what the server asked for instead.
struct Answered(CallToolResponse);

impl serde::Serialize for Answered {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            CallToolResponse::Complete(result) => result.serialize(serializer),
            CallToolResponse::InputRequired(asked) => asked.serialize(serializer),
            CallToolResponse::Task(task) => task.serialize(serializer),
            _ => serializer.serialize_str("a response this build does not know"),
        }
    }
}

fn refused(shown: &str, why: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode(REFUSED_CODE),
        format!("tool `{shown}` refused by {GATEWAY_NAME}: {why}"),
        Some(json!({"tool": shown})),
    )
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(GATEWAY_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let snapshot = self.current();
        let view = snapshot.fleet.for_caller(&self.ctx);
        let tools = view
            .visible()
            .filter_map(|tool| {
                let key = (
                    view.server_of(tool).to_owned(),
                    tool.manifest().name().to_owned(),
                );
                let mut listed = snapshot.tools.get(&key)?.clone();
                listed.name = tool.shown.clone().into();
                Some(listed)
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let snapshot = self.current();
        let shown = request.name.to_string();
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let Some(route) = snapshot.fleet.route(&shown) else {
            let stand_in = CapabilityManifest::builder(&shown)
                .build()
                .or_else(|_| CapabilityManifest::builder("unlisted_tool").build())
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let reason = WithheldReason::NotListed.to_deny();
            return Err(self.refuse(&shown, &stand_in, &input, &[reason]));
        };
        if !route.listed.is_visible() {
            let reasons: Vec<DenyReason> = route
                .listed
                .reasons()
                .iter()
                .map(WithheldReason::to_deny)
                .collect();
            return Err(self.refuse(&shown, route.listed.manifest(), &input, &reasons));
        }
        let server = route.server.to_owned();
        let Some(peer) = self.peers.get(&server).cloned() else {
            return Err(ErrorData::internal_error(
                format!("no connection to `{server}`"),
                None,
            ));
        };
        let mut forwarded = request.clone();
        forwarded.name = route.tool.to_owned().into();
        let call = Request::mcp(
            "tools/call",
            Action::CallTool(route.listed.manifest()),
            &input,
        );
        let outcome = self
            .dispatch
            .act_async(&self.ctx, Caller::new("mcp-client"), &call, async {
                peer.call_tool_once(forwarded)
                    .await
                    .map(Answered)
                    .map_err(|e| match e {
                        ::rmcp::ServiceError::McpError(error) => error.message.to_string(),
                        other => format!("the MCP server `{server}` did not answer: {other}"),
                    })
            })
            .await;
        match outcome {
            Outcome::Done(Answered(response)) => Ok(response),
            Outcome::Failed(error) => Err(ErrorData::internal_error(error, None)),
            Outcome::Denied(denial) => Err(refused(&shown, &denial.to_string())),
            Outcome::Degrade(reason) => Err(refused(&shown, &reason.to_string())),
            Outcome::AuditFailed(error) => Err(refused(
                &shown,
                &format!("its audit record could not be written: {error}"),
            )),
        }
    }
}

/// Starts every server, serves the client on standard input and output until it goes (or a
/// signal), then stops the servers and closes the trail.
pub async fn serve(
    policy: Policy,
    policy_path: &std::path::Path,
    role: &str,
    dispatch: Arc<AuditedDispatch>,
) -> Result<(), GatewayError> {
    let base = policy_path.parent().unwrap_or(std::path::Path::new("."));
    let (changed_tx, mut changed) = mpsc::unbounded_channel();
    let mut members = Vec::new();
    for entry in policy.servers() {
        let Some(source) = source_of(entry, base) else {
            continue;
        };
        let name = entry.name();
        let fail = |why: String| GatewayError(format!("server `{name}`: {why}"));
        if let ServerSource::File(_) = source {
            return Err(fail("it has only a recorded tool list (`file`); a gateway serves live servers: give its `command` or `url`".to_owned()));
        }
        let server = if entry.trusted().unwrap_or(false) {
            Server::trusted(name)
        } else {
            Server::untrusted(name)
        };
        let lock = match entry.lock() {
            None => None,
            Some(path) => Some(
                Lockfile::load(base.join(path))
                    .map_err(|e| fail(e.to_string()))?
                    .ok_or_else(|| fail(format!("{path}: no such lockfile")))?,
            ),
        };
        let connection = connect(name, &source, entry.env(), changed_tx.clone())
            .await
            .map_err(fail)?;
        let tools = list(&connection.peer(), &server).await.map_err(fail)?;
        members.push(Member {
            name: name.to_owned(),
            server,
            lock,
            prefix: entry.prefix(),
            connection,
            tools,
        });
    }
    if members.is_empty() {
        return Err(GatewayError(
            "the policy's [servers] name no live server (`command` or `url`)".to_owned(),
        ));
    }
    let first = snapshot(&members).map_err(GatewayError)?;
    for collision in first.fleet.collisions() {
        super::note(format_args!(
            "the shown name `{}` is shared by {}: withheld from every role",
            crate::escape::escape(&collision.shown),
            collision.tools.join(", ")
        ));
    }
    let ctx = policy
        .context(role, format!("gateway:{role}"))
        .ok_or_else(|| GatewayError(format!("role `{role}` is not in the policy")))?;
    let gateway = Gateway {
        ctx,
        role: role.to_owned(),
        policy_version: policy.version().map(str::to_owned),
        dispatch,
        current: Arc::new(RwLock::new(Arc::new(first))),
        peers: Arc::new(
            members
                .iter()
                .map(|m| (m.name.clone(), m.connection.peer()))
                .collect(),
        ),
    };
    super::note(format_args!(
        "serving {} servers ({}) to a client of role `{role}` on standard input and output",
        members.len(),
        members
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let (input, output) = crate::proxy::standard_streams();
    let filter = crate::proxy::filter_client(input, output);
    let running = gateway
        .clone()
        .serve(filter.transport)
        .await
        .map_err(|e| GatewayError(format!("the client did not connect: {e}")))?;
    let client = running.peer().clone();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            _ = &mut waiting => break,
            Some(server) = changed.recv() => {
                let mut servers = vec![server];
                while let Ok(more) = changed.try_recv() {
                    servers.push(more);
                }
                for member in members.iter_mut().filter(|m| servers.contains(&m.name)) {
                    match list(&member.connection.peer(), &member.server).await {
                        Ok(tools) => member.tools = tools,
                        Err(why) => super::note(format_args!("server `{}`: {why}", member.name)),
                    }
                }
                match snapshot(&members) {
                    Ok(next) => {
                        *gateway.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
                        let _ = client.notify_tool_list_changed().await;
                    }
                    Err(why) => super::note(format_args!("the listing was kept: {why}")),
                }
            }
        }
    }
    drop(members);
    Ok(())
}
