//! The lockfile's text: reading (every hash checked, every kept descriptor checked against its
//! hash) and writing (servers and tools in name order, ASCII only).
//!
//! Version 2 adds, per tool, the pinned `descriptor` (its canonical JSON) and an optional
//! signed `repin` table. Version 1 files (hashes only) still read: their tools have no kept
//! descriptor, so any change of one hides it, as before. They are written back as version 2.

use std::collections::BTreeMap;

use capability_core::toml_file::{self, TomlError};
use serde::Deserialize;
use serde_json::Value;

use super::locked::LockedTool;
use super::parts::{Part, PartHashes};
use super::{LockError, Lockfile};
use crate::import::from_mcp_tool;
use crate::server::Server;

/// What a lockfile is called in messages about a file without a name.
const WHAT: &str = "lockfile";

/// The lockfile format version this library writes. It reads this one and version 1.
pub const LOCKFILE_VERSION: u32 = 2;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFileRepr {
    version: u32,
    #[serde(default)]
    servers: BTreeMap<String, LockServerRepr>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockServerRepr {
    #[serde(default)]
    tools: BTreeMap<String, LockedTool>,
}

pub(super) fn read(text: &str) -> Result<Lockfile, LockError> {
    let repr: LockFileRepr = toml_file::parse(WHAT, text)?;
    if !(1..=LOCKFILE_VERSION).contains(&repr.version) {
        return Err(TomlError::at(
            WHAT,
            text,
            0,
            format!(
                "lockfile version {} is not supported; this library reads versions 1 to \
                 {LOCKFILE_VERSION}",
                repr.version
            ),
        ));
    }
    let mut servers = BTreeMap::new();
    for (server, entry) in repr.servers {
        let at = |needle: &str, message: String| {
            TomlError::at(WHAT, text, text.find(needle).unwrap_or(0), message)
        };
        if let Err(violation) = capability_rules::check_provider(&server) {
            return Err(at(&server, format!("server `{server}`: {violation}")));
        }
        for (name, tool) in &entry.tools {
            if let Err(violation) = capability_rules::check_tool_name(name) {
                return Err(at(name, format!("tool `{server}/{name}`: {violation}")));
            }
            let hex = capability_rules::hex::is_lower_hex;
            let parts_ok = |p: &PartHashes| Part::ALL.iter().all(|part| hex(p.get(*part), 16));
            let repin_ok = tool.repin.as_ref().is_none_or(|r| {
                hex(&r.hash, 64) && parts_ok(&r.parts) && hex(&r.key, 64) && hex(&r.signature, 128)
            });
            if !hex(&tool.hash, 64) || !parts_ok(&tool.parts) || !repin_ok {
                return Err(at(
                    name,
                    format!(
                        "tool `{server}/{name}`: hashes must be lowercase hex (64 and 16 digits; \
                         a re-pin's key 64 and signature 128)"
                    ),
                ));
            }
            // A kept descriptor is what later changes are judged against: one that is not the
            // descriptor pinned (an edit of the lockfile) would let a change pass as wording.
            let kept = [
                tool.descriptor
                    .as_deref()
                    .map(|d| (d, &tool.hash, &tool.parts, "descriptor")),
                tool.repin.as_ref().map(|r| {
                    (
                        r.descriptor.as_str(),
                        &r.hash,
                        &r.parts,
                        "re-pin's descriptor",
                    )
                }),
            ];
            for (descriptor, hash, parts, what) in kept.into_iter().flatten() {
                if let Err(why) = matches(descriptor, name, hash, parts) {
                    return Err(at(
                        name,
                        format!("tool `{server}/{name}`: its {what} {why}"),
                    ));
                }
            }
        }
        servers.insert(server, entry.tools);
    }
    Ok(Lockfile {
        servers,
        ..Lockfile::default()
    })
}

/// Whether a kept descriptor is a tool of this name with this hash and these part hashes.
fn matches(descriptor: &str, name: &str, hash: &str, parts: &PartHashes) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(descriptor).map_err(|e| format!("is not JSON ({e})"))?;
    if value.get("name").and_then(Value::as_str) != Some(name) {
        return Err("is not a tool of this name".to_owned());
    }
    let manifest = from_mcp_tool(&value, &Server::trusted("lockfile"))
        .map_err(|e| format!("is not a valid MCP tool ({e})"))?;
    if manifest.descriptor_hash() != hash || PartHashes::of(&value) != *parts {
        return Err("does not match its hashes: the lockfile was edited; pin it again".to_owned());
    }
    Ok(())
}

pub(super) fn write(lock: &Lockfile) -> String {
    let mut out = String::from(
        "# capability.lock: the MCP tool descriptors a human approved, per server.\n\
         # Written by `capability pin`; `capability verify` reports any drift from it.\n\
         # A pinned tool's claims are believed while its descriptor matches, even from an\n\
         # untrusted server; its flags below must be what those claims say.\n\
         # A tool whose descriptor or flags no longer match is hidden until it is pinned again;\n\
         # a `repin` is an approver's signed acceptance of a changed descriptor.\n",
    );
    out.push_str(&format!("version = {LOCKFILE_VERSION}\n"));
    for (server, tools) in &lock.servers {
        if tools.is_empty() {
            out.push_str(&format!("\n[servers.{}]\n", key(server)));
        }
        for (name, tool) in tools {
            let table = format!("servers.{}.tools.{}", key(server), key(name));
            out.push_str(&format!("\n[{table}]\nhash = \"{}\"\n", tool.hash));
            entry(
                &mut out,
                &tool.parts,
                tool.flags(),
                tool.descriptor.as_deref(),
            );
            if let Some(repin) = &tool.repin {
                out.push_str(&format!("\n[{table}.repin]\nhash = \"{}\"\n", repin.hash));
                let flags = (
                    repin.read_only,
                    repin.destructive,
                    repin.idempotent,
                    repin.open_world,
                );
                entry(&mut out, &repin.parts, flags, Some(&repin.descriptor));
                out.push_str(&format!(
                    "approver = {}\nkey = \"{}\"\nsignature = \"{}\"\n",
                    string(&repin.approver),
                    repin.key,
                    repin.signature
                ));
            }
        }
    }
    out
}

fn entry(out: &mut String, parts: &PartHashes, flags: (bool, bool, bool, bool), d: Option<&str>) {
    out.push_str(&format!(
        "parts = {{ title = \"{}\", description = \"{}\", schema = \"{}\", annotations = \"{}\" }}\n",
        parts.title, parts.description, parts.schema, parts.annotations
    ));
    out.push_str(&format!(
        "read_only = {}\ndestructive = {}\nidempotent = {}\nopen_world = {}\n",
        flags.0, flags.1, flags.2, flags.3
    ));
    if let Some(descriptor) = d {
        out.push_str(&format!("descriptor = {}\n", string(descriptor)));
    }
}

/// A TOML basic string of ASCII only: every other character escaped, so that nothing in a
/// lockfile is invisible in review.
fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// A TOML key, quoted when it is not a bare key.
fn key(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        text.to_owned()
    } else {
        string(text)
    }
}
