//! `GET /receipts/<writer>/<seq>`: the proof file (`c2sp.org/tlog-proof@v1`) of a call's
//! outcome record, for the client that holds its receipt (`"capability/receipt": true` in the
//! call's `_meta` gave it the writer and the seq), once the writer's next tree checkpoint
//! covers it.
//!
//! - **Whose.** Only the principal that made the call gets its proof (the record holds the
//!   call's input): `401` without a token, `404` for a record that is not the caller's, as
//!   for one that does not exist, so the answer says nothing of other principals' calls.
//! - **When.** A record not yet under a checkpoint is `404` with `Retry-After`: the writer
//!   signs one within its interval (every 1,000 records or 10 s, and when idle).
//! - **What from.** The JSON Lines trail the gateway writes; nothing is signed here, so the
//!   proof checks with the writer's public key alone (`capability audit check-proof`). A
//!   trail in a store has no proofs served (`capability audit prove` makes them).
//! - **Cost.** A proof reads the trail: one is made at a time (`503` with `Retry-After`
//!   while another is), on a blocking thread, behind the edge's authentication and rates.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use capability::audit::tlog::prove_jsonl_checkpointed;
use capability_http::{Authenticated, EdgeResponse};
use http::{HeaderValue, StatusCode, header};
use tokio::sync::Semaphore;

use super::{answer, error};

/// Where the proofs are served.
pub(crate) const PREFIX: &str = "/receipts";

/// The trail proofs are made from, and the one proof made at a time.
#[derive(Clone, Debug)]
pub(crate) struct Proofs {
    trail: Arc<PathBuf>,
    making: Arc<Semaphore>,
}

impl Proofs {
    /// Proofs from the JSON Lines trail at `trail`.
    pub(crate) fn new(trail: PathBuf) -> Proofs {
        Proofs {
            trail: Arc::new(trail),
            making: Arc::new(Semaphore::new(1)),
        }
    }
}

/// One request: `rest` is its path after [`PREFIX`], `/<writer>/<seq>` (a writer's id holds
/// `/`: the seq is after the last one).
pub(crate) async fn serve(
    proofs: Option<&Proofs>,
    get: bool,
    rest: &str,
    caller: Option<&Authenticated>,
) -> EdgeResponse {
    let Some(proofs) = proofs else {
        return error(
            StatusCode::NOT_FOUND,
            "this gateway's trail is not a JSON Lines file: proofs are made with `capability \
             audit prove`",
        );
    };
    if !get {
        return error(StatusCode::METHOD_NOT_ALLOWED, "use GET");
    }
    let parsed = (rest.strip_prefix('/'))
        .and_then(|rest| rest.rsplit_once('/'))
        .and_then(|(writer, seq)| Some((writer, seq.parse::<u64>().ok()?)))
        .filter(|(writer, _)| !writer.is_empty());
    let Some((writer, seq)) = parsed else {
        return error(
            StatusCode::NOT_FOUND,
            "not found: a receipt's proof is at /receipts/<writer>/<seq>",
        );
    };
    let Some(caller) = caller else {
        return error(
            StatusCode::UNAUTHORIZED,
            "a proof is given to the principal whose call it was: send its token as \
             `Authorization: Bearer <token>`",
        );
    };
    let Ok(_making) = proofs.making.try_acquire() else {
        return later(
            StatusCode::SERVICE_UNAVAILABLE,
            "another proof is being made: ask again in a moment",
            1,
        );
    };
    let (trail, writer_id) = (proofs.trail.clone(), writer.to_owned());
    let made =
        tokio::task::spawn_blocking(move || prove_jsonl_checkpointed(&trail, &writer_id, seq))
            .await;
    match made {
        Ok(Ok((record, proof))) if record.principal.as_ref() == Some(&caller.principal) => {
            match proof {
                Some(proof) => {
                    let mut response = answer(
                        StatusCode::OK,
                        "text/plain; charset=utf-8",
                        Bytes::from(proof.to_text()),
                    );
                    response.headers_mut().insert(
                        header::CONTENT_DISPOSITION,
                        HeaderValue::from_static("attachment; filename=\"record.tlog-proof\""),
                    );
                    response
                }
                None => later(
                    StatusCode::NOT_FOUND,
                    "the record is not under a checkpoint yet: the writer signs one within its \
                     interval (every 1,000 records or 10 s); ask again",
                    10,
                ),
            }
        }
        // Another principal's record, or none: the same answer.
        Ok(_) => error(
            StatusCode::NOT_FOUND,
            "no record of yours has that writer and seq",
        ),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the proof could not be made",
        ),
    }
}

/// `status` with `message`, and when to ask again.
fn later(status: StatusCode, message: &str, secs: u32) -> EdgeResponse {
    let mut response = error(status, message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}
