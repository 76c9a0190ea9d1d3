//! The `c2sp.org/tlog-witness` HTTP protocol over a [`Witness`] of `capability_audit::tlog`:
//! the server (`POST /add-checkpoint`, and `GET /<sha256 of the origin>/checkpoint` for
//! monitors) behind the edge's one accept loop ([`crate::listen::serve`]), and the client a log
//! uses to have its checkpoints cosigned ([`add_checkpoint`], [`cosign`]).
//!
//! Hyper serves, as for every listener of the workspace; reqwest asks. Every byte of a request
//! is hostile: the body is bounded ([`MAX_BODY`]) and must arrive within [`BODY_TIMEOUT`], the
//! `Host` must be one of the listener's names, anything else than the two routes is a 404, and
//! a refusal says what in its body with the status code the spec gives it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use capability_audit::tlog::note::NoteSignature;
use capability_audit::tlog::{AddCheckpoint, SignedCheckpoint, Tree, Witness, WitnessError};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use crate::listen::{Limits, allowed_hosts, host_allowed};

mod feed;

pub use feed::{MAX_KEPT, ReadTree, StoreCosigned, WitnessFeed, jsonl_tree};

/// The largest `add-checkpoint` body taken: a checkpoint, 63 proof lines, signatures.
pub const MAX_BODY: usize = 64 * 1024;

/// How long a request's body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The `Content-Type` of a 409's body (the size the witness holds).
pub const SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";

/// Serves `witness` on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, witness: Arc<Witness>) {
    let hosts = listener.local_addr().ok().and_then(allowed_hosts);
    crate::listen::serve(
        listener,
        move || {
            let (witness, hosts) = (witness.clone(), hosts.clone());
            hyper::service::service_fn(move |request| {
                let (witness, hosts) = (witness.clone(), hosts.clone());
                async move { Ok::<_, Infallible>(answer(request, &witness, hosts.as_deref()).await) }
            })
        },
        Limits::default(),
        "the witness",
    )
    .await;
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn answer(
    request: Request<Incoming>,
    witness: &Arc<Witness>,
    hosts: Option<&[String]>,
) -> Response<Full<Bytes>> {
    if !host_allowed(request.headers(), hosts) {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            "this Host is not served here (the witness answers the names of its address)\n".into(),
        );
    }
    let path = request.uri().path().to_owned();
    if let Some(hash) = path
        .strip_prefix('/')
        .and_then(|p| p.strip_suffix("/checkpoint"))
    {
        return held_checkpoint(request.method(), hash, witness);
    }
    if path != "/add-checkpoint" {
        return text(
            StatusCode::NOT_FOUND,
            format!("no such path {path:?}: the witness serves POST /add-checkpoint\n"),
        );
    }
    if request.method() != Method::POST {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "add-checkpoint takes POST\n".into(),
        );
    }
    let body = Limited::new(request.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout(BODY_TIMEOUT, body).await {
        Err(_) => {
            return text(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {BODY_TIMEOUT:?}\n"),
            );
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is over {MAX_BODY} bytes\n"),
            );
        }
        Ok(Err(e)) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("the body could not be read: {e}\n"),
            );
        }
        Ok(Ok(body)) => body.to_bytes(),
    };
    let Ok(body) = std::str::from_utf8(&body) else {
        return text(
            StatusCode::BAD_REQUEST,
            "add-checkpoint: the body is not UTF-8\n".into(),
        );
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let outcome = match AddCheckpoint::parse(body) {
        // Checked and kept under the witness's lock, the state synced to disk before the answer
        // (as the spec asks): on a blocking thread, so a slow disk holds no other connection.
        Ok(request) => {
            let witness = Arc::clone(witness);
            tokio::task::spawn_blocking(move || witness.add_checkpoint(&request, now))
                .await
                .unwrap_or_else(|e| Err(WitnessError::State(format!("the witness failed: {e}"))))
        }
        Err(e) => Err(e),
    };
    match outcome {
        Ok(lines) => text(
            StatusCode::OK,
            lines.iter().map(NoteSignature::line).collect(),
        ),
        Err(WitnessError::Conflict { held, .. }) => {
            let mut response = text(StatusCode::CONFLICT, format!("{held}\n"));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(SIZE_CONTENT_TYPE),
            );
            response
        }
        Err(e) => {
            if e.status() == 500 {
                tracing::error!(target: "capability_http::witness", "{e}");
            }
            let status =
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            text(status, format!("{e}\n"))
        }
    }
}

fn held_checkpoint(method: &Method, hash: &str, witness: &Witness) -> Response<Full<Bytes>> {
    if method != Method::GET {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "a checkpoint is read with GET\n".into(),
        );
    }
    match witness.held_by_hash(hash) {
        Some(checkpoint) => text(StatusCode::OK, checkpoint.to_text()),
        None => text(
            StatusCode::NOT_FOUND,
            "the witness has cosigned no checkpoint of that log\n".into(),
        ),
    }
}

/// Why a witness gave no cosignature.
#[derive(Debug)]
pub enum ClientError {
    /// The witness could not be reached, or did not answer in time.
    Unreachable {
        /// The witness's URL.
        url: String,
        /// What went wrong.
        why: String,
    },
    /// The witness holds a checkpoint of another size than the request's old size (409), and
    /// no tree was given to prove consistency from it.
    Stale {
        /// The witness's URL.
        url: String,
        /// The size it holds.
        held: u64,
    },
    /// The witness refused the checkpoint: its status and what it said.
    Refused {
        /// The witness's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The body of its answer.
        message: String,
    },
    /// An answer that is not signature lines.
    BadAnswer {
        /// The witness's URL.
        url: String,
        /// What is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Unreachable { url, why } => write!(f, "witness {url}: unreachable: {why}"),
            ClientError::Stale { url, held } => write!(
                f,
                "witness {url}: stale request (409): the witness holds a checkpoint of {held} \
                 records; give the trail to prove consistency from it"
            ),
            ClientError::Refused {
                url,
                status,
                message,
            } => {
                write!(
                    f,
                    "witness {url}: refused ({status}): {}",
                    message.trim_end()
                )
            }
            ClientError::BadAnswer { url, why } => write!(f, "witness {url}: {why}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// One `add-checkpoint` call to the witness at `url` (its submission prefix); the answer's
/// signature lines, unverified (the caller keeps those of keys it trusts).
pub async fn add_checkpoint(
    url: &str,
    request: &AddCheckpoint,
) -> Result<Vec<NoteSignature>, ClientError> {
    crate::auth::install_crypto_provider();
    let unreachable = |why: String| ClientError::Unreachable {
        url: url.to_owned(),
        why,
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| unreachable(e.to_string()))?;
    let endpoint = format!("{}/add-checkpoint", url.trim_end_matches('/'));
    let response = client
        .post(&endpoint)
        .body(request.to_text())
        .send()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let status = response.status().as_u16();
    let body = read_bounded(response).await.map_err(unreachable)?;
    match status {
        200 => body
            .lines()
            .map(|line| {
                NoteSignature::parse(line).ok_or_else(|| ClientError::BadAnswer {
                    url: url.to_owned(),
                    why: format!("an answer line is not a signature line: {line:?}"),
                })
            })
            .collect(),
        409 => body
            .strip_suffix('\n')
            .and_then(|n| n.parse::<u64>().ok())
            .map(|held| ClientError::Stale {
                url: url.to_owned(),
                held,
            })
            .map_or_else(
                || {
                    Err(ClientError::BadAnswer {
                        url: url.to_owned(),
                        why: "a 409 without a size".into(),
                    })
                },
                Err,
            ),
        _ => Err(ClientError::Refused {
            url: url.to_owned(),
            status,
            message: body,
        }),
    }
}

async fn read_bounded(mut response: reqwest::Response) -> Result<String, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("an answer over {MAX_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| "an answer that is not UTF-8".to_owned())
}

/// Has the witness at `url` cosign `checkpoint`: first from size 0; when the witness holds
/// another size (409) and `tree` (the log's tree, at least the checkpoint's size) is given,
/// again with the consistency proof from the size held. The answer's lines are returned.
pub async fn cosign(
    url: &str,
    checkpoint: &SignedCheckpoint,
    tree: Option<&Tree>,
) -> Result<Vec<NoteSignature>, ClientError> {
    let mut request = AddCheckpoint {
        old: 0,
        proof: Vec::new(),
        checkpoint: checkpoint.clone(),
    };
    let first = add_checkpoint(url, &request).await;
    let (Err(ClientError::Stale { held, .. }), Some(tree)) = (&first, tree) else {
        return first;
    };
    let held = *held;
    if held > checkpoint.head.size {
        return first;
    }
    request.old = held;
    request.proof = tree
        .consistency_proof(held, checkpoint.head.size)
        .map_err(|e| ClientError::BadAnswer {
            url: url.to_owned(),
            why: format!("the trail gives no consistency proof from size {held}: {e}"),
        })?;
    add_checkpoint(url, &request).await
}

/// Asks each witness of `urls` to cosign `checkpoint` ([`cosign`]), adding the lines of those
/// that did to it; what the others said. The log's tree, for a witness that holds an older
/// checkpoint (409), is read from the JSON Lines `trail` only then.
pub async fn cosign_all(
    urls: &[String],
    checkpoint: &mut SignedCheckpoint,
    trail: &std::path::Path,
) -> Vec<String> {
    let mut tree = None;
    let mut refused = Vec::new();
    for url in urls {
        let mut asked = cosign(url, checkpoint, None).await;
        if let Err(ClientError::Stale { .. }) = asked {
            if tree.is_none() {
                match capability_audit::tlog::writer_tree_jsonl(trail, &checkpoint.head.origin) {
                    Ok(read) => tree = Some(read),
                    Err(e) => {
                        refused.push(format!("witness {url}: {e}"));
                        continue;
                    }
                }
            }
            asked = cosign(url, checkpoint, tree.as_ref()).await;
        }
        match asked {
            Ok(lines) => checkpoint.add_signatures(lines),
            Err(e) => refused.push(e.to_string()),
        }
    }
    refused
}

/// [`cosign_all`] for a program without an async runtime (one is made for the calls).
pub fn cosign_all_blocking(
    urls: &[String],
    checkpoint: &mut SignedCheckpoint,
    trail: &std::path::Path,
) -> Vec<String> {
    if urls.is_empty() {
        return Vec::new();
    }
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(cosign_all(urls, checkpoint, trail)),
        Err(e) => vec![format!(
            "the witnesses cannot be asked: no async runtime: {e}"
        )],
    }
}

/// Serves `witness` on `address` until the process ends, in a runtime of its own; `bound` is
/// told the address listened on (a port 0 resolved) before the first request is taken.
pub fn run(
    address: std::net::SocketAddr,
    witness: Witness,
    bound: impl FnOnce(std::net::SocketAddr) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(address))?;
    bound(listener.local_addr()?)?;
    runtime.block_on(serve(listener, Arc::new(witness)));
    Ok(())
}
