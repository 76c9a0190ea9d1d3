//! The `_meta` that `#[tool_capabilities]` gives each rmcp `#[tool(...)]`.

use std::ops::DerefMut;

use serde_json::{Map, Value};

use crate::manifest::{CapabilityManifest, MANIFEST_META_KEY, manifest_meta};

/// The tool's `_meta` as rmcp publishes it (`M` is rmcp's `MetaObject`, a JSON object that
/// derefs to its map): the `meta` the author gave (`existing`), with the manifest's scopes and
/// descriptor hash under [`MANIFEST_META_KEY`]. Generic over `M` only, so the core does not
/// depend on rmcp, and a router of many tools instantiates it once (no serde in it: a touch
/// rebuild of a 100-tool router pays for nothing but the calls).
pub fn tool_meta<M>(manifest: &CapabilityManifest, existing: Option<M>) -> M
where
    M: From<Map<String, Value>> + DerefMut<Target = Map<String, Value>>,
{
    let mut meta = existing.unwrap_or_else(|| M::from(Map::new()));
    meta.insert(MANIFEST_META_KEY.to_owned(), manifest_meta(manifest));
    meta
}
