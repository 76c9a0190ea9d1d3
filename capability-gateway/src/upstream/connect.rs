//! A server started (a command, its output read strictly) or reached (a URL), and connected
//! to: its rmcp client, the lane beside it, and how it ends watched.

use std::process::Stdio;
use std::sync::Arc;

use ::rmcp::service::ClientServiceExt;
use ::rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::GatewayError;
use crate::spec::source::ServerSource;
use crate::upstream::http::{Reach, Seen};
use crate::upstream::progress::Relay as ProgressRelay;
use crate::upstream::relay::{Calls, Levels};
use crate::upstream::requests::ServerRequests;
use crate::upstream::stdio::Lane;
use crate::upstream::unconnected;
use crate::upstream::{Connection, Watch};

/// Starts (or reaches) `server` from `source` and connects to it.
#[allow(clippy::too_many_arguments)] // what a connection is made of, from its spec
pub(crate) async fn connect(
    server: &str,
    source: &ServerSource,
    env: &[(String, String)],
    token: Option<&crate::spec::Secret>,
    changed: mpsc::UnboundedSender<String>,
    requests: Option<Arc<ServerRequests>>,
    levels: Levels,
) -> Result<Connection, GatewayError> {
    let watch = Watch {
        server: server.to_owned(),
        changed,
        requests,
        progress: ProgressRelay::default(),
        calls: Calls::default(),
        levels,
    };
    match source {
        ServerSource::Command(words) => {
            let (program, args) = words
                .split_first()
                .ok_or_else(|| GatewayError::Config("an empty command".to_owned()))?;
            let mut child = Command::new(program)
                .args(args)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(crate::process::server_stderr())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| GatewayError::Unstarted(format!("cannot start `{program}`: {e}")))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(GatewayError::Unstarted(format!(
                    "cannot start `{program}`: no standard streams"
                )));
            };
            // A line that writes a key twice never reaches rmcp, which would keep the last,
            // nor the lane. The server's output is read on a thread of its own (the lane's
            // answers are handled there).
            let cannot =
                |e: std::io::Error| GatewayError::Server(format!("cannot read `{program}`: {e}"));
            let exit = Arc::new(crate::process::Exit::default());
            let lane = Lane::new(server, stdin, Arc::clone(&exit)).map_err(cannot)?;
            let output = stdout
                .into_owned_fd()
                .and_then(crate::wire::blocking::file)
                .map_err(cannot)?;
            let name = server.to_owned();
            let cut = Arc::clone(&exit);
            let stdout = crate::live::strict::strict_lines_threaded(
                output,
                move |why| {
                    crate::note(format_args!(
                        "server `{name}`: {}",
                        crate::escape::escape(why)
                    ));
                    // Its output cut off is how it ended: said before the exit it leads to.
                    if let Some(cut_off) = why.strip_prefix("the server's ") {
                        cut.set(cut_off.to_owned());
                    }
                },
                lane.tap(watch.progress.clone(), watch.levels.clone()),
            )
            .map_err(cannot)?;
            let service = match watch
                .serve_with_lifecycle(
                    crate::wire::lines::rmcp_lines(stdout, lane.rmcp_input()),
                    crate::protocol::lifecycle(),
                )
                .await
            {
                Ok(service) => service,
                Err(error) => {
                    let ended = if unconnected::closed(&error) {
                        unconnected::ended(&mut child).await
                    } else {
                        None
                    };
                    return Err(GatewayError::Server(format!(
                        "`{program}` did not connect: {}",
                        unconnected::why(&error, ended.as_deref())
                    )));
                }
            };
            if let Some(info) = service.peer().peer_info() {
                lane.agreed(info.protocol_version.to_string());
            }
            Ok(Connection {
                service: Arc::new(service),
                lane: Some(lane),
                reach: None,
                legacy: None,
                process: Some(crate::process::Process::watch(
                    child,
                    program,
                    Arc::clone(&exit),
                )),
                exit,
            })
        }
        ServerSource::Url(url) => {
            let seen = Seen::new(
                crate::upstream::pooled::client()
                    .map_err(|e| GatewayError::Server(format!("{url}: {e}")))?,
            );
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = token {
                config = config.auth_header(token.0.clone());
            }
            let transport = crate::upstream::pooled::transport_with(seen.clone(), config);
            let reach = Reach::new(server, seen, watch.clone());
            let spare = watch.fresh();
            let service = watch
                .serve_with_lifecycle(transport, crate::protocol::lifecycle())
                .await
                .map_err(|e| {
                    GatewayError::Server(format!(
                        "{url} did not connect: {}",
                        unconnected::why(&e, None)
                    ))
                })?;
            let service = Arc::new(service);
            reach.holds(Arc::clone(&service));
            let mut legacy = None;
            if let Some(info) = service.peer().peer_info() {
                reach.agreed(info.protocol_version.to_string());
                if !info.protocol_version.has_initialize() {
                    legacy = Some(crate::upstream::legacy::Legacy::new(
                        server,
                        url,
                        token.cloned(),
                        spare,
                    ));
                }
            }
            Ok(Connection {
                service,
                lane: None,
                reach: Some(reach),
                legacy,
                process: None,
                exit: Arc::default(),
            })
        }
        ServerSource::File(path) => Err(GatewayError::Config(format!(
            "{} is a recorded tool list: a gateway serves live servers (`command` or `url`)",
            path.display()
        ))),
    }
}
