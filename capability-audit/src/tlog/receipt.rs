//! Receipts: what a client that asked gets back with a call's result, so that it can later
//! obtain (and check, alone) a proof that the call's outcome is in the writer's log.
//!
//! A client asks with `"capability/receipt": true` in the request's `_meta`
//! ([`RECEIPT_META_KEY`]); the result's `_meta` then holds, under the same key, the writer, the
//! `seq`, the leaf index and the leaf hash of the call's outcome record, and the log's origin:
//!
//! ```json
//! {"capability/receipt": {"origin": "capability/gw-1", "writer": "gw-1", "seq": 12,
//!   "index": 11, "leaf_hash": "<base64 SHA-256(0x00 || record line)>"}}
//! ```
//!
//! Once the writer's next checkpoint covers the record, `capability audit prove <trail>
//! --record gw-1:12` gives the proof file, whose leaf the client compares with the receipt's
//! `leaf_hash`. A receipt alone proves nothing (the gateway made it); the proof and the
//! writer's signed checkpoint do.

use serde_json::{Map, Value, json};

use super::encoding::base64;
use super::error::TlogError;
use super::hash::leaf_hash;
use super::trail::origin;
use crate::record::AuditRecord;

/// The key in a request's `_meta` that asks for a receipt (`true`), and in the result's
/// `_meta` that holds it.
pub const RECEIPT_META_KEY: &str = "capability/receipt";

/// A call's receipt: where its outcome record is in its writer's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The log, `capability/<writer>`.
    pub origin: String,
    /// The writer.
    pub writer: String,
    /// The outcome record's `seq`.
    pub seq: u64,
    /// Its leaf index in the writer's tree (`seq - 1`).
    pub index: u64,
    /// `SHA-256(0x00 || its line)`, base64.
    pub leaf_hash: String,
}

impl Receipt {
    /// The receipt of a record as written (sealed: its writer and `seq` set).
    pub fn of(record: &AuditRecord) -> Result<Receipt, TlogError> {
        if record.seq == 0 {
            return Err(TlogError::Trail(
                "the record was not written (it has no seq): no receipt".to_owned(),
            ));
        }
        Ok(Receipt {
            origin: origin(&record.writer)?,
            writer: record.writer.clone(),
            seq: record.seq,
            index: record.seq - 1,
            leaf_hash: base64(&leaf_hash(record.to_line().as_bytes())),
        })
    }

    /// The receipt as the result's `_meta` holds it under [`RECEIPT_META_KEY`].
    pub fn to_json(&self) -> Value {
        json!({
            "origin": self.origin,
            "writer": self.writer,
            "seq": self.seq,
            "index": self.index,
            "leaf_hash": self.leaf_hash,
        })
    }

    /// The record reference `capability audit prove --record` takes: `<writer>:<seq>`.
    pub fn record_ref(&self) -> String {
        format!("{}:{}", self.writer, self.seq)
    }

    /// Puts the receipt into a result's `_meta` (made when there is none).
    pub fn insert_into(&self, meta: &mut Map<String, Value>) {
        meta.insert(RECEIPT_META_KEY.to_owned(), self.to_json());
    }
}

/// Whether a request's `_meta` asks for a receipt: `"capability/receipt": true`.
pub fn wants_receipt(meta: Option<&Map<String, Value>>) -> bool {
    meta.and_then(|m| m.get(RECEIPT_META_KEY))
        .is_some_and(|v| v == &Value::Bool(true))
}
