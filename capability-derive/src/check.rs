//! Rules that span several keys, and the values the expansion needs.
//!
//! The rules themselves live in `capability-rules`, shared with the runtime builder; this file
//! only turns each problem into an error at the token it is about.

use capability_rules::{Descriptor, Draft, Flags, Subject, Validated};
use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;

use crate::ast::{Agent, Tool};
use crate::attr::AgentKind;
use crate::errors::Errors;
use crate::tokens::canonical;

/// What the expansion of a valid tool needs.
pub struct CheckedTool {
    /// The tool name.
    pub name: String,
    /// The description (the key, else the doc comment).
    pub description: Option<String>,
    /// The hints after defaults.
    pub flags: Flags,
    /// The scopes, sorted and de-duplicated.
    pub scopes: Vec<String>,
    /// The output type as canonical text.
    pub output: Option<String>,
    /// The schema version.
    pub schema_version: String,
    /// The descriptor hash.
    pub descriptor_hash: String,
    /// Sensitive input fields, sorted.
    pub sensitive: Vec<String>,
}

/// Applies the manifest rules to a tool; problems go to `errors`.
pub fn tool(tool: &Tool<'_>, errors: &mut Errors) -> Option<CheckedTool> {
    let attrs = &tool.attrs;
    let name = match &attrs.name {
        Some(name) => name.value(),
        None => capability_rules::snake_case(&tool.ident().to_string()),
    };
    let provider = attrs.provider.as_ref().map(syn::LitStr::value);
    let version = attrs.version.as_ref().map(syn::LitStr::value);
    let scopes: Vec<String> = attrs
        .scopes
        .iter()
        .flatten()
        .map(syn::LitStr::value)
        .collect();
    let draft = Draft {
        name: &name,
        provider: provider.as_deref(),
        version: version.as_deref(),
        read_only: attrs.read_only.map(|f| f.value),
        destructive: attrs.destructive.map(|f| f.value),
        idempotent: attrs.idempotent.map(|f| f.value),
        open_world: attrs.open_world.map(|f| f.value),
        scopes: scopes.iter().map(String::as_str).collect(),
    };
    // Checked before the rules so that its errors come in the same build as theirs.
    let sensitive = sensitive_fields(tool, errors);
    let Validated { flags, scopes } = match capability_rules::validate(&draft) {
        Ok(valid) => valid,
        Err(problems) => {
            for problem in problems {
                let mut message = problem.violation.to_string();
                if problem.subject == Subject::Name && attrs.name.is_none() {
                    message.push_str(&format!(
                        " (the name is derived from `{}`; set one with `name = \"..\"`)",
                        tool.ident()
                    ));
                }
                errors.push(syn::Error::new(span_of(tool, problem.subject), message));
            }
            return None;
        }
    };
    let sensitive = sensitive?;
    let title = attrs.title.as_ref().map(syn::LitStr::value);
    let description = attrs
        .description
        .as_ref()
        .map(syn::LitStr::value)
        .or_else(|| tool.doc.clone());
    let output = attrs
        .output
        .as_ref()
        .map(|ty| canonical(ty.to_token_stream()));
    let descriptor = Descriptor {
        name: &name,
        title: title.as_deref(),
        description: description.as_deref(),
        provider: provider.as_deref(),
        flags,
        scopes: &scopes,
        generics: &tool.generics,
        input: &tool.shape,
        output: output.as_deref(),
        version: version.as_deref(),
        sensitive: &sensitive,
    };
    let descriptor_hash = descriptor.hash_hex();
    let schema_version = version.unwrap_or_else(|| descriptor_hash[..12].to_owned());
    Some(CheckedTool {
        name,
        description,
        flags,
        scopes,
        output,
        schema_version,
        descriptor_hash,
        sensitive,
    })
}

/// Each `sensitive` entry must name a field of the struct (only named fields can be marked).
fn sensitive_fields(tool: &Tool<'_>, errors: &mut Errors) -> Option<Vec<String>> {
    let Some(listed) = &tool.attrs.sensitive else {
        return Some(Vec::new());
    };
    let fields: Vec<String> = match &tool.shape {
        capability_rules::Shape::Named(fields) => fields.iter().map(|(n, _)| n.clone()).collect(),
        _ => {
            errors.push(syn::Error::new(
                listed
                    .first()
                    .map_or_else(|| tool.ident().span(), syn::LitStr::span),
                format!(
                    "`sensitive` names fields, and `{}` has no named fields",
                    tool.ident()
                ),
            ));
            return None;
        }
    };
    let names: Vec<&str> = fields.iter().map(String::as_str).collect();
    let mut ok = true;
    for lit in listed {
        let value = lit.value();
        let bare = value.strip_prefix("r#").unwrap_or(&value);
        if !names
            .iter()
            .any(|n| n.strip_prefix("r#").unwrap_or(n) == bare)
        {
            let hint = capability_rules::closest(&value, &names)
                .map(|near| format!("; did you mean `{near}`?"))
                .unwrap_or_default();
            errors.push(syn::Error::new(
                lit.span(),
                format!("no field `{value}` in `{}`{hint}", tool.ident()),
            ));
            ok = false;
        }
    }
    let values: Vec<String> = listed.iter().map(syn::LitStr::value).collect();
    ok.then(|| capability_rules::normalize_scopes(values.iter().map(String::as_str)))
}

/// The most specific token for a problem.
fn span_of(tool: &Tool<'_>, subject: Subject) -> Span {
    let attrs = &tool.attrs;
    let lit_span = |lit: &Option<syn::LitStr>| lit.as_ref().map(syn::LitStr::span);
    let span = match subject {
        Subject::Name => lit_span(&attrs.name),
        Subject::Provider => lit_span(&attrs.provider),
        Subject::Version => lit_span(&attrs.version),
        Subject::Scope(index) => attrs
            .scopes
            .as_ref()
            .and_then(|scopes| scopes.get(index))
            .map(syn::LitStr::span),
        // Point at whichever of the two flags came later: that is the one that contradicts.
        Subject::ReadOnlyAndDestructive => match (attrs.read_only, attrs.destructive) {
            (Some(read_only), Some(destructive)) if read_only.order > destructive.order => {
                Some(read_only.span)
            }
            (_, Some(destructive)) => Some(destructive.span),
            (Some(read_only), None) => Some(read_only.span),
            (None, None) => None,
        },
    };
    span.unwrap_or_else(|| tool.ident().span())
}

/// What the expansion of a valid agent needs.
pub struct CheckedAgent {
    /// The agent name.
    pub name: String,
    /// The `Target` variant.
    pub target: &'static str,
}

/// Checks an agent's item and arguments; problems go to `errors`.
pub fn agent(agent: &Agent<'_>, errors: &mut Errors) -> Option<CheckedAgent> {
    let item = agent.original;
    let attribute = agent.kind.attribute();
    let mut ok = true;
    if let syn::Data::Union(data) = &item.data {
        errors.push(syn::Error::new(
            data.union_token.span,
            format!("`#[{attribute}]` goes on a struct or an enum, not a union"),
        ));
        ok = false;
    }
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        errors.push(syn::Error::new(
            item.generics.span(),
            format!(
                "`#[{attribute}]` does not support generic agents: an agent has one fixed set of \
                 tools; remove the generic parameters"
            ),
        ));
        ok = false;
    }
    let name = match &agent.attrs.name {
        Some(lit) => {
            let name = lit.value();
            if let Err(violation) = capability_rules::check_agent_name(&name) {
                errors.push(syn::Error::new(lit.span(), violation));
                ok = false;
            }
            name
        }
        None => capability_rules::snake_case(&item.ident.to_string()),
    };
    let target = match (&agent.attrs.target, agent.kind) {
        (_, AgentKind::Operator) => "Operator",
        (None, AgentKind::Advisor) => "Research",
        (Some(lit), AgentKind::Advisor) => match lit.value().as_str() {
            "research" => "Research",
            "selection" => "Selection",
            "analysis" => "Analysis",
            other => {
                let hint = match capability_rules::closest(other, capability_rules::ADVISOR_TARGETS)
                {
                    Some(near) => format!("; did you mean \"{near}\"?"),
                    None => String::new(),
                };
                let operator = if other == "operator" {
                    "; an operator is not an advisor: use `#[agent(...)]` instead"
                } else {
                    ""
                };
                errors.push(syn::Error::new(
                    lit.span(),
                    format!(
                        "unknown advisor target \"{other}\", expected \"research\", \"selection\" \
                         or \"analysis\"{hint}{operator}"
                    ),
                ));
                ok = false;
                "Research"
            }
        },
    };
    match &agent.attrs.tools {
        // After a parse error (often a misspelt `tools`), this would only repeat it.
        None if !errors.is_empty() => ok = false,
        None => {
            errors.push(syn::Error::new(
                item.ident.span(),
                format!(
                    "`#[{attribute}]` needs the tools the agent binds: `#[{attribute}(tools(ToolA, ToolB))]`"
                ),
            ));
            ok = false;
        }
        Some(tools) => {
            let mut seen: Vec<String> = Vec::new();
            for tool in tools {
                let text = canonical(tool.to_token_stream());
                if seen.contains(&text) {
                    errors.push(syn::Error::new(
                        tool.span(),
                        format!("`{text}` is bound twice; list each tool once"),
                    ));
                    ok = false;
                }
                seen.push(text);
            }
        }
    }
    ok.then_some(CheckedAgent { name, target })
}
