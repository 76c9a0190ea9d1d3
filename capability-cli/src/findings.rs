//! What the scan of the descriptors (`capability::mcp::scan`) finds, as `capability pin` and
//! `capability verify` print it: a pin is the moment a person reads the descriptors.

use std::io::Write;

use serde_json::{Value, json};

use capability_gateway::escape::escape;

use crate::out::Out;

/// What the scan finds in the listed tools (`capability::mcp::scan`): each finding as a line
/// and as JSON. A hard one hides its tool from every role, pinned or not.
pub fn scanned(tools: &[Value]) -> (Vec<String>, Vec<Value>) {
    let mut lines = Vec::new();
    let mut found = Vec::new();
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or_default();
        for finding in capability::mcp::scan::scan_tool(tool) {
            lines.push(format!(
                "{}: {}",
                escape(name),
                escape(&finding.to_string())
            ));
            found.push(json!({
                "tool": name, "code": finding.rule.code(), "rule": finding.rule.name(),
                "severity": finding.severity.as_str(), "at": finding.place(),
                "what": finding.what(),
            }));
        }
    }
    (lines, found)
}

/// The scan's findings under a pin or a verify, with what they mean.
pub fn write_scanned(out: &mut Out, lines: &[String], hard: bool) -> std::io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nThe scan of the descriptors found (docs/scan.md):")?;
    for line in lines {
        writeln!(out, "  {line}")?;
    }
    if hard {
        writeln!(
            out,
            "A tool with a hard finding stays hidden from every role, pinned or not: read its \
             descriptor before trusting the server."
        )?;
    }
    Ok(())
}
