//! `capability gateway --check`: what each role would see of the fleet, without serving.

use std::io::Write;
use std::time::Duration;

use capability::Policy;
use capability::authz::Hold;
use capability::mcp::{Fleet, FleetView};
use serde_json::{Value, json};

use super::fleet::{FleetServer, read_fleet};
use super::items::Items;
use super::source::ServerSource;
use super::{GatewayArgs, GatewayError};
use crate::escape::escape;
use capability::authz::{Action, Authorize};

/// Reads the policy, starts and lists every server, and prints each role's view (text, or JSON
/// with `--json`): exit 0, or 1 when tools of two servers would share a shown name.
pub fn check(args: &GatewayArgs, out: &mut dyn Write) -> Result<u8, GatewayError> {
    let policy =
        Policy::from_toml_file(&args.policy).map_err(|e| GatewayError::Config(e.to_string()))?;
    let roles: Vec<String> = match &args.role {
        Some(role) if policy.roles().any(|r| r == role) => vec![role.clone()],
        Some(role) => {
            let roles: Vec<&str> = policy.roles().collect();
            return Err(GatewayError::Config(format!(
                "role `{role}` is not in the policy (it has: {})",
                roles.join(", ")
            )));
        }
        None => policy.roles().map(str::to_owned).collect(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GatewayError::Config(format!("cannot start the async runtime: {e}")))?;
    let (fleet, servers) = runtime.block_on(read_fleet(
        &policy,
        &args.policy,
        Duration::from_secs(args.timeout),
    ))?;
    let items = Items::new(
        servers
            .iter()
            .map(|s| (s.name.clone(), s.prefix.clone(), s.items.clone())),
    );
    let views: Vec<(String, FleetView, ItemsView)> = roles
        .iter()
        .filter_map(|role| {
            let ctx = policy.context(role, "gateway-check")?;
            Some((
                role.clone(),
                fleet.for_caller(&ctx),
                ItemsView::of(&items, &ctx),
            ))
        })
        .collect();
    let written = if args.json {
        let report = json_report(&fleet, &items, &servers, &views, &policy);
        // Escaped as every --json output is: the same JSON value, safe to print.
        let mut text = Vec::new();
        let mut serializer =
            serde_json::Serializer::with_formatter(&mut text, crate::escape::JsonEscaped::new());
        serde::Serialize::serialize(&report, &mut serializer)
            .map_err(|e| GatewayError::Config(format!("cannot write the report: {e}")))?;
        out.write_all(&text).and_then(|()| writeln!(out))
    } else {
        text_report(out, &fleet, &items, &servers, &views, &policy)
    };
    written.map_err(|e| GatewayError::Config(format!("cannot write the report: {e}")))?;
    Ok(u8::from(
        !fleet.collisions().is_empty() || !items.collisions().is_empty(),
    ))
}

/// What one role would see of the fleet's resources, templates and prompts: (shown name or
/// URI, server, own name) each.
struct ItemsView {
    resources: Vec<(String, String, String)>,
    templates: Vec<(String, String, String)>,
    prompts: Vec<(String, String, String)>,
}

impl ItemsView {
    fn of(items: &Items, ctx: &capability::authz::ToolContext) -> ItemsView {
        let may = |action: Action<'_>| ctx.decide_action(&action).is_allowed();
        let entry = |shown: &str, server: &str, own: &str| {
            (shown.to_owned(), server.to_owned(), own.to_owned())
        };
        ItemsView {
            resources: items
                .resources(|server, uri| may(Action::Resource { server, uri }))
                .iter()
                .map(|s| entry(&s.item.uri, s.server, s.own))
                .collect(),
            templates: items
                .templates(|server, uri| may(Action::Resource { server, uri }))
                .iter()
                .map(|s| entry(&s.item.uri_template, s.server, s.own))
                .collect(),
            prompts: items
                .prompts(|server, name| may(Action::Prompt { server, name }))
                .iter()
                .map(|s| entry(&s.item.name, s.server, s.own))
                .collect(),
        }
    }
}

fn source_text(source: &ServerSource) -> String {
    match source {
        ServerSource::Command(words) => escape(&words.join(" ")),
        ServerSource::Url(url) => escape(url),
        ServerSource::File(path) => escape(&path.display().to_string()),
    }
}

fn text_report(
    out: &mut dyn Write,
    fleet: &Fleet,
    items: &Items,
    servers: &[FleetServer],
    views: &[(String, FleetView, ItemsView)],
    policy: &Policy,
) -> std::io::Result<()> {
    writeln!(out, "fleet: {} servers", servers.len())?;
    for server in servers {
        writeln!(
            out,
            "  {:<16} {:>3} tools  prefix {:<12} {}{}  {}",
            server.name,
            server.tools,
            format!("\"{}\"", server.prefix),
            if server.trusted {
                "trusted"
            } else {
                "untrusted"
            },
            server
                .lock
                .as_ref()
                .map(|l| format!(", lock {}", escape(&l.display().to_string())))
                .unwrap_or_default(),
            source_text(&server.source),
        )?;
    }
    for (role, view, seen) in views {
        let shown = view.visible().count();
        writeln!(
            out,
            "\nrole {role}: {shown} of {} tools",
            view.tools().len()
        )?;
        for tool in view.visible() {
            let held = match policy.hold(role, Some(view.server_of(tool)), tool.manifest().name()) {
                Some(Hold::Signature) => "  (each call needs a signed approval)",
                Some(Hold::Confirmation) => "  (each call confirmed by the user)",
                None => "",
            };
            writeln!(
                out,
                "  shown   {:<36} {}/{}{held}",
                escape(&tool.shown),
                view.server_of(tool),
                escape(tool.manifest().name())
            )?;
        }
        for tool in view.hidden() {
            let reasons: Vec<String> = tool
                .listed
                .reasons()
                .iter()
                .map(|r| escape(&r.to_string()))
                .collect();
            writeln!(
                out,
                "  hidden  {:<36} {}/{}: {}",
                escape(&tool.shown),
                view.server_of(tool),
                escape(tool.manifest().name()),
                reasons.join("; ")
            )?;
        }
        let (resources, templates, prompts) = items.counts();
        for (kind, list, of) in [
            ("resource", &seen.resources, resources),
            ("template", &seen.templates, templates),
            ("prompt", &seen.prompts, prompts),
        ] {
            if of == 0 {
                continue;
            }
            writeln!(out, "  {kind}s: {} of {of}", list.len())?;
            for (shown, server, own) in list {
                writeln!(
                    out,
                    "  {kind:<8} {:<36} {server}/{}",
                    escape(shown),
                    escape(own)
                )?;
            }
        }
    }
    if fleet.collisions().is_empty() {
        writeln!(out, "\nno shown name is shared by tools of two servers")?;
    } else {
        writeln!(
            out,
            "\n{} shown names are shared by tools of several servers (each withheld from \
             every role; give one of the servers another `prefix`):",
            fleet.collisions().len()
        )?;
        for collision in fleet.collisions() {
            let tools: Vec<String> = collision.tools.iter().map(|t| escape(t)).collect();
            writeln!(out, "  {}: {}", escape(&collision.shown), tools.join(", "))?;
        }
    }
    if !items.collisions().is_empty() {
        writeln!(
            out,
            "\nprompt names or resources claimed by several servers, each withheld from every \
             role ({}):",
            items.collisions().len()
        )?;
        for collision in items.collisions() {
            let by: Vec<String> = collision.by.iter().map(|b| escape(b)).collect();
            writeln!(
                out,
                "  {} {}: {}",
                collision.kind,
                escape(&collision.shown),
                by.join(", ")
            )?;
        }
    }
    Ok(())
}

fn json_report(
    fleet: &Fleet,
    items: &Items,
    servers: &[FleetServer],
    views: &[(String, FleetView, ItemsView)],
    policy: &Policy,
) -> Value {
    let version = policy.version();
    let servers: Vec<Value> = servers
        .iter()
        .map(|s| {
            let (kind, from) = match &s.source {
                ServerSource::Command(words) => ("command", json!(words)),
                ServerSource::Url(url) => ("url", json!(url)),
                ServerSource::File(path) => ("file", json!(path.display().to_string())),
            };
            json!({"name": s.name, kind: from, "trust": if s.trusted { "trusted" } else { "untrusted" },
                   "lock": s.lock.as_ref().map(|l| l.display().to_string()),
                   "prefix": s.prefix, "tools": s.tools})
        })
        .collect();
    let roles: Vec<Value> = views
        .iter()
        .map(|(role, view, seen)| {
            let item = |list: &[(String, String, String)], key: &str| -> Vec<Value> {
                list.iter()
                    .map(|(shown, server, own)| json!({key: shown, "server": server, "own": own}))
                    .collect()
            };
            let entry = |t: &capability::mcp::FleetTool| {
                let hold = policy.hold(role, Some(view.server_of(t)), t.manifest().name());
                let hold = hold.map(|h| match h {
                    Hold::Signature => "signature",
                    Hold::Confirmation => "confirmation",
                });
                json!({"shown": t.shown, "server": view.server_of(t), "tool": t.manifest().name(),
                       "hold": hold})
            };
            let hidden: Vec<Value> = view
                .hidden()
                .map(|t| {
                    let mut e = entry(t);
                    e["reasons"] =
                        json!(t.listed.reasons().iter().map(ToString::to_string).collect::<Vec<_>>());
                    e
                })
                .collect();
            json!({"role": role, "visible": view.visible().map(entry).collect::<Vec<_>>(), "hidden": hidden,
                   "resources": item(&seen.resources, "uri"), "templates": item(&seen.templates, "uri_template"),
                   "prompts": item(&seen.prompts, "shown")})
        })
        .collect();
    let collisions: Vec<Value> = fleet
        .collisions()
        .iter()
        .map(|c| json!({"shown": c.shown, "tools": c.tools}))
        .collect();
    let item_collisions: Vec<Value> = items
        .collisions()
        .iter()
        .map(|c| json!({"kind": c.kind, "shown": c.shown, "by": c.by}))
        .collect();
    json!({"policy_version": version, "servers": servers, "roles": roles, "collisions": collisions,
           "item_collisions": item_collisions})
}
