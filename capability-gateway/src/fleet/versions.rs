//! The tool versions a gateway sees, written to `mcp_tool_versions` when its `--audit` trail is
//! a store (SQLite or PostgreSQL): each (server, tool, descriptor hash) of every listing it
//! serves from, at start and at each change (a server's list change, a restart, a reload). A
//! drifted tool is written too: that it changed is what the table is for.

use std::sync::Arc;

use capability::gate::{Clock, SystemClock};
use capability_store::{Store, TargetKind, ToolHash};

use crate::serve::gateway::{Gateway, Snapshot};

/// The store the gateway writes versions to: the `--audit` target when it is a database.
pub(crate) fn store_of(audit: &str) -> Option<Arc<dyn Store>> {
    if capability_store::target_kind(audit) == TargetKind::Jsonl {
        return None;
    }
    match capability_store::open(audit) {
        Ok(store) => Some(Arc::from(store)),
        Err(why) => {
            crate::note(format_args!(
                "tool versions are not recorded: cannot open {}: {why}",
                capability_store::redact_url(audit)
            ));
            None
        }
    }
}

impl Gateway {
    /// Records the tools of `snapshot` as seen now. A store that fails is said on standard
    /// error; serving goes on (the versions are a record for operators, not a gate).
    pub(crate) fn saw_tools(&self, snapshot: &Snapshot) {
        let Some(store) = &self.versions else {
            return;
        };
        let mut tools: Vec<ToolHash> = snapshot
            .fleet
            .manifests()
            .map(|(server, manifest)| ToolHash {
                server: server.to_owned(),
                tool: manifest.name().to_owned(),
                descriptor_hash: manifest.descriptor_hash().to_owned(),
            })
            .collect();
        tools.sort();
        tools.dedup();
        if let Err(why) = store.saw_tools(&tools, SystemClock.now()) {
            crate::note(format_args!("tool versions were not recorded: {why}"));
        }
    }
}
