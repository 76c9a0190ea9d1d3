//! What the stdio edge reads of a client's JSON-RPC message without building it: its id,
//! method and params as written (the gateway's lane and the front's count of requests in
//! flight read the same).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// A message's envelope: each member as written, absent when the message has none.
#[derive(Deserialize)]
pub(crate) struct Envelope<'a> {
    #[serde(borrow, default)]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
}

/// The params of `notifications/cancelled`: the id of the request cancelled, as written.
#[derive(Deserialize)]
pub(crate) struct Cancelled<'a> {
    #[serde(borrow, rename = "requestId")]
    pub(crate) request_id: &'a RawValue,
}
