//! The `_meta` that `#[tool_capabilities]` gives each rmcp `#[tool(...)]`.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::manifest::{Capability, MANIFEST_META_KEY, manifest_meta};

/// The tool's `_meta` as rmcp publishes it (`M` is rmcp's `MetaObject`, a JSON object): the
/// `meta` the author gave (`existing`), with the manifest's scopes and descriptor hash under
/// [`MANIFEST_META_KEY`]. Generic over `M`, so the core does not depend on rmcp.
pub fn tool_meta<T: Capability, M: Serialize + DeserializeOwned + Default>(
    existing: Option<M>,
) -> M {
    let mut object = match existing.map(|meta| serde_json::to_value(meta)) {
        Some(Ok(Value::Object(object))) => object,
        _ => Map::new(),
    };
    object.insert(MANIFEST_META_KEY.to_owned(), manifest_meta(T::manifest()));
    // A JSON object always deserializes into rmcp's `MetaObject` (a transparent map).
    serde_json::from_value(Value::Object(object)).unwrap_or_default()
}
