//! The four subcommands' output: tables for people, stable JSON for machines.

use std::io::Write;

use capability::manifest::{HintKind, HintSource};
use capability::mcp::{DriftStatus, Lockfile, Trust, Visibility};
use capability::{CapabilityManifest, Policy};
use serde_json::{Value, json};

use capability_gateway::escape::escape;

use crate::out::Out;
use crate::source::Loaded;
use crate::{Common, Failure};

/// `inspect`: one row per tool.
pub fn inspect(loaded: &Loaded, common: &Common, out: &mut Out) -> Result<u8, Failure> {
    if common.json {
        let tools: Vec<Value> = loaded
            .manifests
            .iter()
            .map(|(m, drift)| tool_json(m, drift.as_ref()))
            .collect();
        out.json(&json!({
            "server": loaded.server.name(),
            "server_name_from": loaded.name_from.key(),
            "declared_name": loaded.declared_name,
            "trust": trust_name(loaded.server.trust()),
            "pinning": pinning_json(loaded),
            "tools": tools,
        }))?;
        return Ok(0);
    }
    let color = Color::detect(out);
    let mut rows = vec![vec![
        "TOOL".to_owned(),
        "READ-ONLY".to_owned(),
        "DESTRUCTIVE".to_owned(),
        "IDEMPOTENT".to_owned(),
        "OPEN-WORLD".to_owned(),
        "SCOPES".to_owned(),
        "HASH".to_owned(),
        "PIN".to_owned(),
    ]];
    for (m, drift) in &loaded.manifests {
        let flag = |kind| {
            let hint = m.hint(kind);
            format!(
                "{} {}",
                if hint.effective() { "yes" } else { "no" },
                source_short(hint.source(), hint.stated())
            )
        };
        rows.push(vec![
            m.name().to_owned(),
            flag(HintKind::ReadOnly),
            flag(HintKind::Destructive),
            flag(HintKind::Idempotent),
            flag(HintKind::OpenWorld),
            if m.required_scopes().is_empty() {
                "-".to_owned()
            } else {
                m.required_scopes().join(" ")
            },
            m.descriptor_hash()[..12].to_owned(),
            drift.as_ref().map_or("-".to_owned(), |d| d.to_string()),
        ]);
    }
    writeln!(
        out,
        "{} tools from {} ({})",
        loaded.manifests.len(),
        loaded.origin,
        server_text(loaded)
    )?;
    print_table(out, &rows, &color, |row| {
        if row.get(1).is_some_and(|c| c.starts_with("yes")) {
            None
        } else if row.get(2).is_some_and(|c| c.starts_with("yes")) {
            Some(Color::RED)
        } else {
            Some(Color::YELLOW)
        }
    })?;
    writeln!(
        out,
        "\nEach flag: the effective value, then where it came from: declared, asserted, claim \
         (trusted server), pinned (claim matching capability.lock), untrusted (claim not \
         believed, the value in parentheses), default (MCP default)."
    )?;
    writeln!(out, "{}", pinning_text(loaded))?;
    Ok(0)
}

/// `check`: what a role may see, and why the rest is hidden.
pub fn check(
    loaded: &Loaded,
    policy: &Policy,
    role: &str,
    common: &Common,
    out: &mut Out,
) -> Result<u8, Failure> {
    // The one visibility function, as the governed client uses it: drift, then duplicate
    // names, then the role's decision.
    let Some(context) = policy.context(role, "capability-check") else {
        return Err(Failure::input(format!(
            "role `{role}` is not in the policy"
        )));
    };
    let seen = Visibility::of(
        &loaded.server,
        &loaded.tools,
        loaded.lock.as_ref(),
        &context,
    )
    .map_err(|e| Failure::input(format!("{}: {e}", loaded.origin)))?;
    let visible: Vec<&str> = seen.visible().map(|m| m.name()).collect();
    let hidden: Vec<(String, Vec<String>)> = seen
        .hidden()
        .iter()
        .map(|h| {
            let reasons = h.reasons().iter().map(ToString::to_string).collect();
            (h.name().to_owned(), reasons)
        })
        .collect();
    if common.json {
        let hidden: Vec<Value> = hidden
            .iter()
            .map(|(name, reasons)| json!({ "name": name, "reasons": reasons }))
            .collect();
        out.json(&json!({
            "server": loaded.server.name(),
            "server_name_from": loaded.name_from.key(),
            "declared_name": loaded.declared_name,
            "role": role,
            "policy_version": policy.version(),
            "pinning": pinning_json(loaded),
            "visible": visible,
            "hidden": hidden,
        }))?;
        return Ok(0);
    }
    let color = Color::detect(out);
    writeln!(
        out,
        "role `{role}` on {}: {} of {} tools visible",
        server_text(loaded),
        visible.len(),
        loaded.manifests.len()
    )?;
    writeln!(out, "\nVISIBLE")?;
    if visible.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for name in &visible {
        writeln!(out, "  {}", color.paint(Color::GREEN, &escape(name)))?;
    }
    writeln!(out, "\nHIDDEN")?;
    if hidden.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for (name, reasons) in &hidden {
        writeln!(
            out,
            "  {}: {}",
            color.paint(Color::RED, &escape(name)),
            escape(&reasons.join("; "))
        )?;
    }
    writeln!(out, "\n{}", pinning_text(loaded))?;
    Ok(0)
}

/// `pin`: approve the current tools.
pub fn pin(loaded: &Loaded, common: &Common, out: &mut Out) -> Result<u8, Failure> {
    let before = loaded.review.as_ref().filter(|r| r.is_pinned());
    let summary = match before {
        Some(review) => {
            let count = |f: fn(&DriftStatus) -> bool| {
                review.tools().iter().filter(|t| f(t.status())).count()
            };
            let edited = count(|s| matches!(s, DriftStatus::FlagsEdited { .. }));
            format!(
                "{} changed, {} added, {} renamed, {} removed{} since the last pin",
                count(DriftStatus::is_change),
                count(|s| matches!(s, DriftStatus::Added)),
                count(|s| matches!(s, DriftStatus::Renamed { .. })),
                review.removed().len(),
                if edited > 0 {
                    format!(", {edited} with flags edited in the lockfile")
                } else {
                    String::new()
                }
            )
        }
        None => "first pin of this server".to_owned(),
    };
    let mut lock = loaded.lock.clone().unwrap_or_default();
    lock.pin(&loaded.server, &loaded.tools)
        .map_err(|e| Failure::input(format!("{}: {e}", loaded.origin)))?;
    write_lock(&lock, common)?;
    // Pinning is an act of trust: say so, above all for a server that was not trusted.
    let believed_from_now_on = loaded.server.trust() == Trust::Untrusted;
    let note = if believed_from_now_on {
        format!(
            "server `{}` is untrusted, but from now on the claims of these {} tools (read-only, \
             destructive, idempotent, open-world) are believed while their descriptors match \
             their pins: a pin is your approval of what each tool says it does",
            loaded.server.name(),
            loaded.tools.len()
        )
    } else {
        format!(
            "server `{}` is trusted: its claims were already believed; a tool whose descriptor \
             changes is now hidden until it is pinned again",
            loaded.server.name()
        )
    };
    let (lines, found) = crate::findings::scanned(&loaded.tools);
    let hard = found.iter().any(|f| f["severity"] == "hard");
    if common.json {
        out.json(&json!({
            "server": loaded.server.name(),
            "server_name_from": loaded.name_from.key(),
            "lockfile": common.lock.display().to_string(),
            "pinned": loaded.tools.len(),
            "summary": summary,
            "believed_from_now_on": believed_from_now_on,
            "note": note,
            "findings": found,
        }))?;
    } else {
        writeln!(
            out,
            "pinned {} tools of server `{}` in {} ({summary})",
            loaded.tools.len(),
            loaded.server.name(),
            common.lock.display()
        )?;
        if believed_from_now_on {
            writeln!(out, "Note: {note}.")?;
        }
        crate::findings::write_scanned(out, &lines, hard)?;
    }
    Ok(0)
}

/// `verify`: exit 1 on drift.
pub fn verify(loaded: &Loaded, common: &Common, out: &mut Out) -> Result<u8, Failure> {
    let Some(review) = &loaded.review else {
        return Err(Failure::input(format!(
            "no lockfile at {}: approve the server first with `capability pin`",
            common.lock.display()
        )));
    };
    // Drift the policy accepts (a rewording, a checked re-pin) is not a failure.
    let clean = review.is_pinned()
        && review.removed().is_empty()
        && review.hidden_by_drift().next().is_none();
    if common.json {
        let drifted: Vec<Value> = review
            .tools()
            .iter()
            .filter(|t| *t.status() != DriftStatus::Unchanged)
            .map(|t| drift_json(t.manifest().name(), t.status()))
            .collect();
        out.json(&json!({
            "server": review.server(),
            "server_name_from": loaded.name_from.key(),
            "pinned": review.is_pinned(),
            "clean": clean,
            "tools": review.tools().len(),
            "drifted": drifted,
            "removed": review.removed(),
            "findings": crate::findings::scanned(&loaded.tools).1,
        }))?;
    } else if clean {
        writeln!(out, "{review}")?;
    } else {
        let color = Color::detect(out);
        writeln!(out, "{}", color.paint(Color::RED, &review.to_string()))?;
        if review.is_pinned() {
            writeln!(
                out,
                "\nDrifted tools are hidden from every role until a human approves them again \
                 with `capability pin`."
            )?;
        }
    }
    if !common.json {
        let (lines, found) = crate::findings::scanned(&loaded.tools);
        crate::findings::write_scanned(out, &lines, found.iter().any(|f| f["severity"] == "hard"))?;
    }
    Ok(if clean { 0 } else { 1 })
}

fn write_lock(lock: &Lockfile, common: &Common) -> Result<(), Failure> {
    // Written beside the target and renamed over it: a crash never leaves half a lockfile, and
    // a symbolic link there (or planted beside it) is replaced, never written through.
    capability_gateway::files::replace_file(&common.lock, lock.to_toml_string().as_bytes())
        .map_err(|e| Failure::input(e.to_string()))
}

fn tool_json(m: &CapabilityManifest, drift: Option<&DriftStatus>) -> Value {
    let hint = |kind| {
        let h = m.hint(kind);
        json!({ "source": source_key(h.source()), "stated": h.stated() })
    };
    json!({
        "name": m.name(),
        "title": m.title(),
        "read_only": m.read_only(),
        "destructive": m.destructive(),
        "idempotent": m.idempotent(),
        "open_world": m.open_world(),
        "hints": {
            "read_only": hint(HintKind::ReadOnly),
            "destructive": hint(HintKind::Destructive),
            "idempotent": hint(HintKind::Idempotent),
            "open_world": hint(HintKind::OpenWorld),
        },
        "scopes": m.required_scopes(),
        "descriptor_hash": m.descriptor_hash(),
        "drift": drift.map(|d| drift_json(m.name(), d)["status"].clone()),
    })
}

fn drift_json(name: &str, status: &DriftStatus) -> Value {
    match status {
        DriftStatus::Unchanged => json!({ "name": name, "status": "unchanged" }),
        DriftStatus::Added => json!({ "name": name, "status": "added" }),
        DriftStatus::Renamed { from } => {
            json!({ "name": name, "status": "renamed", "from": from })
        }
        DriftStatus::FlagsEdited { flags } => {
            let flags: Vec<&str> = flags.iter().map(|k| k.key()).collect();
            json!({ "name": name, "status": "flags_edited", "flags": flags })
        }
        changed => {
            let parts: Vec<&str> = changed.parts().iter().map(|p| p.as_str()).collect();
            let status = if changed.is_approved() {
                "accepted"
            } else {
                "changed"
            };
            json!({ "name": name, "status": status, "parts": parts, "why": changed.to_string() })
        }
    }
}

fn pinning_json(loaded: &Loaded) -> Value {
    match &loaded.review {
        None => json!({ "lockfile": false, "note": "nothing is pinned" }),
        Some(review) => json!({
            "lockfile": true,
            "server_pinned": review.is_pinned(),
            "clean": review.is_pinned() && review.is_clean(),
        }),
    }
}

fn pinning_text(loaded: &Loaded) -> String {
    match &loaded.review {
        None => "No lockfile: nothing is pinned; decisions come from trust and policy alone. \
                 `capability pin` approves the current tools."
            .to_owned(),
        Some(review) => review.to_string(),
    }
}

/// `server `name`, untrusted`, and the name the server gives itself when it differs.
fn server_text(loaded: &Loaded) -> String {
    let mut text = format!(
        "server `{}`, {}",
        loaded.server.name(),
        trust_name(loaded.server.trust())
    );
    if let Some(declared) = loaded
        .declared_name
        .as_deref()
        .filter(|d| *d != loaded.server.name())
    {
        // The server's own words: escaped, so they cannot steer the reader's terminal.
        text.push_str(&format!("; it calls itself `{}`", escape(declared)));
    }
    text
}

fn trust_name(trust: Trust) -> &'static str {
    trust.as_str()
}

fn source_key(source: HintSource) -> &'static str {
    match source {
        HintSource::Declared => "declared",
        HintSource::Asserted => "asserted",
        HintSource::TrustedClaim => "trusted_claim",
        HintSource::PinnedClaim => "pinned_claim",
        HintSource::UntrustedClaim => "untrusted_claim",
        HintSource::Defaulted => "defaulted",
    }
}

fn source_short(source: HintSource, stated: Option<bool>) -> String {
    match source {
        HintSource::Declared => "declared".to_owned(),
        HintSource::Asserted => "asserted".to_owned(),
        HintSource::TrustedClaim => "claim".to_owned(),
        HintSource::PinnedClaim => "pinned".to_owned(),
        HintSource::UntrustedClaim => match stated {
            Some(true) => "untrusted (yes)".to_owned(),
            Some(false) => "untrusted (no)".to_owned(),
            None => "untrusted".to_owned(),
        },
        HintSource::Defaulted => "default".to_owned(),
    }
}

fn print_table(
    out: &mut Out,
    rows: &[Vec<String>],
    color: &Color,
    paint: impl Fn(&[String]) -> Option<&'static str>,
) -> std::io::Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if c + 1 < row.len() {
                line.extend(std::iter::repeat_n(' ', widths[c] - cell.chars().count()));
            }
        }
        match (i, paint(row)) {
            (0, _) | (_, None) => writeln!(out, "{line}")?,
            (_, Some(code)) => writeln!(out, "{}", color.paint(code, &line))?,
        }
    }
    Ok(())
}

/// ANSI colours on a terminal, unless `NO_COLOR` is set (<https://no-color.org>).
struct Color {
    on: bool,
}

impl Color {
    const RED: &'static str = "31";
    const GREEN: &'static str = "32";
    const YELLOW: &'static str = "33";

    fn detect(out: &Out) -> Color {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Color {
            on: !no_color && out.is_terminal(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}
