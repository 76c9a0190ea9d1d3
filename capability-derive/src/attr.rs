//! Parsing of `#[capability(...)]`, `#[advisor_agent(...)]` and `#[agent(...)]`.
//!
//! Only the form of each key is checked here (a flag is bare or a bool, a scope list is a list of
//! strings, no key twice). Rules about values and about several keys together are in `check.rs`,
//! which asks `capability-rules`.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, LitBool, LitStr, Token, Type};

use crate::errors::Errors;

/// A flag as written: its value and where its key is.
#[derive(Clone, Copy)]
pub struct Flag {
    /// `true` for a bare flag.
    pub value: bool,
    /// The key (`read_only`).
    pub span: Span,
    /// The position of the key among all keys of the type, to know which of two came later.
    pub order: usize,
}

/// Everything the `#[capability(...)]` attributes of one type say, merged.
#[derive(Default)]
pub struct ToolAttrs {
    /// `read_only`.
    pub read_only: Option<Flag>,
    /// `destructive`.
    pub destructive: Option<Flag>,
    /// `idempotent`.
    pub idempotent: Option<Flag>,
    /// `open_world`.
    pub open_world: Option<Flag>,
    /// `scopes = [..]`, each scope with its literal.
    pub scopes: Option<Vec<LitStr>>,
    /// `name = ".."`.
    pub name: Option<LitStr>,
    /// `title = ".."`.
    pub title: Option<LitStr>,
    /// `description = ".."`.
    pub description: Option<LitStr>,
    /// `provider = ".."`.
    pub provider: Option<LitStr>,
    /// `output = Type`.
    pub output: Option<Type>,
    /// `version = ".."`.
    pub version: Option<LitStr>,
    /// `sensitive = ["field", ..]`.
    pub sensitive: Option<Vec<LitStr>>,
    /// `crate = "path"`.
    pub krate: Option<syn::Path>,
    keys_seen: usize,
}

/// Parses and merges every `#[capability(...)]` attribute. Problems go to `errors`; what could
/// be read is kept, so the fallback can still say whether the tool meant to be read-only.
pub fn tool_attrs(attrs: &[Attribute], errors: &mut Errors) -> ToolAttrs {
    let mut out = ToolAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("capability")) {
        let result = attr.parse_nested_meta(|meta| {
            out.keys_seen += 1;
            let order = out.keys_seen;
            let result = tool_key(&mut out, &meta, order);
            recover(errors, &meta, result)
        });
        errors.ok(result);
    }
    out
}

fn tool_key(out: &mut ToolAttrs, meta: &ParseNestedMeta<'_>, order: usize) -> syn::Result<()> {
    let key = meta_key(meta)?;
    match key.as_str() {
        "read_only" => set(&mut out.read_only, flag(meta, order)?, meta, &key),
        "destructive" => set(&mut out.destructive, flag(meta, order)?, meta, &key),
        "idempotent" => set(&mut out.idempotent, flag(meta, order)?, meta, &key),
        "open_world" => set(&mut out.open_world, flag(meta, order)?, meta, &key),
        "scopes" => set(
            &mut out.scopes,
            string_list(meta, "a scope is a string such as \"metrics:read\"")?,
            meta,
            &key,
        ),
        "name" => set(&mut out.name, meta.value()?.parse()?, meta, &key),
        "title" => set(&mut out.title, meta.value()?.parse()?, meta, &key),
        "description" => set(&mut out.description, meta.value()?.parse()?, meta, &key),
        "provider" => set(&mut out.provider, meta.value()?.parse()?, meta, &key),
        "output" => set(&mut out.output, meta.value()?.parse()?, meta, &key),
        "version" => set(&mut out.version, meta.value()?.parse()?, meta, &key),
        "sensitive" => set(
            &mut out.sensitive,
            string_list(meta, "a field name such as \"password\"")?,
            meta,
            &key,
        ),
        "crate" => set(&mut out.krate, crate_path(meta)?, meta, &key),
        _ => Err(unknown_key(
            meta,
            &key,
            "capability",
            capability_rules::TOOL_KEYS,
        )),
    }
}

/// Records a key's error and skips the rest of that key, so the keys after it are still read
/// and one build reports every mistake.
fn recover(
    errors: &mut Errors,
    meta: &ParseNestedMeta<'_>,
    result: syn::Result<()>,
) -> syn::Result<()> {
    if let Err(error) = result {
        errors.push(error);
        skip_value(meta);
    }
    Ok(())
}

/// Which agent macro is being expanded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// `#[advisor_agent]`.
    Advisor,
    /// `#[agent]`.
    Operator,
}

impl AgentKind {
    /// The attribute's name, for messages.
    pub fn attribute(self) -> &'static str {
        match self {
            AgentKind::Advisor => "advisor_agent",
            AgentKind::Operator => "agent",
        }
    }
}

/// The arguments of `#[advisor_agent(...)]` or `#[agent(...)]`.
#[derive(Default)]
pub struct AgentAttrs {
    /// `tools(A, B<C>)`.
    pub tools: Option<Vec<Type>>,
    /// `target = ".."`.
    pub target: Option<LitStr>,
    /// `name = ".."`.
    pub name: Option<LitStr>,
    /// `crate = "path"`.
    pub krate: Option<syn::Path>,
}

/// Parses the arguments of an agent attribute. Problems go to `errors`.
pub fn agent_attrs(
    kind: AgentKind,
    args: proc_macro2::TokenStream,
    errors: &mut Errors,
) -> AgentAttrs {
    let mut out = AgentAttrs::default();
    let mut found = Errors::default();
    let parser = syn::meta::parser(|meta| {
        let result = agent_key(&mut out, kind, &meta);
        recover(&mut found, &meta, result)
    });
    errors.ok(syn::parse::Parser::parse2(parser, args));
    errors.append(found);
    out
}

fn agent_key(out: &mut AgentAttrs, kind: AgentKind, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    let key = meta_key(meta)?;
    match (key.as_str(), kind) {
        ("tools", _) => set(&mut out.tools, tool_list(meta)?, meta, &key),
        ("target", AgentKind::Advisor) => set(&mut out.target, meta.value()?.parse()?, meta, &key),
        ("target", AgentKind::Operator) => Err(meta.error(
            "`#[agent]` declares an operator, which has no `target`; \
                 for a research, selection or analysis agent use `#[advisor_agent(...)]`",
        )),
        ("name", _) => set(&mut out.name, meta.value()?.parse()?, meta, &key),
        ("crate", _) => set(&mut out.krate, crate_path(meta)?, meta, &key),
        _ => {
            let keys = match kind {
                AgentKind::Advisor => capability_rules::ADVISOR_KEYS,
                AgentKind::Operator => capability_rules::AGENT_KEYS,
            };
            Err(unknown_key(meta, &key, kind.attribute(), keys))
        }
    }
}

pub fn meta_key(meta: &ParseNestedMeta<'_>) -> syn::Result<String> {
    // `crate` is a keyword, so `Path::get_ident` is the way to read it as a key too.
    match meta.path.get_ident() {
        Some(ident) => Ok(ident.to_string()),
        None => Err(meta.error("expected a key such as `read_only` or `name = \"..\"`")),
    }
}

pub fn set<T>(
    slot: &mut Option<T>,
    value: T,
    meta: &ParseNestedMeta<'_>,
    key: &str,
) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(
            meta.path.span(),
            format!("`{key}` is given twice; keep one"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

fn flag(meta: &ParseNestedMeta<'_>, order: usize) -> syn::Result<Flag> {
    if !meta.input.peek(Token![=]) {
        return Ok(Flag {
            value: true,
            span: meta.path.span(),
            order,
        });
    }
    let value = meta.value()?;
    let lit: syn::Lit = value.parse()?;
    match lit {
        syn::Lit::Bool(LitBool { value, .. }) => Ok(Flag {
            value,
            span: meta.path.span(),
            order,
        }),
        other => Err(syn::Error::new(
            other.span(),
            "expected `true` or `false`, or the bare flag for `true`",
        )),
    }
}

pub fn string_list(meta: &ParseNestedMeta<'_>, expected: &str) -> syn::Result<Vec<LitStr>> {
    let value = meta.value()?;
    let content;
    syn::bracketed!(content in value);
    let items = Punctuated::<proc_macro2::TokenTree, Token![,]>::parse_terminated(&content)?;
    let mut scopes = Vec::new();
    let mut errors = Errors::default();
    for item in items {
        match syn::parse2::<LitStr>(item.clone().into()) {
            Ok(scope) => scopes.push(scope),
            Err(_) => errors.push(syn::Error::new(item.span(), expected)),
        }
    }
    match errors.into_error() {
        Some(error) => Err(error),
        None => Ok(scopes),
    }
}

fn tool_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<Type>> {
    if meta.input.peek(Token![=]) {
        return Err(meta.error("write the tools as a list: `tools(ToolA, ToolB)`"));
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let tools = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
    Ok(tools.into_iter().collect())
}

pub fn crate_path(meta: &ParseNestedMeta<'_>) -> syn::Result<syn::Path> {
    let lit: LitStr = meta.value()?.parse()?;
    lit.parse()
        .map_err(|_| syn::Error::new(lit.span(), "expected a path such as \"::capability\""))
}

pub fn unknown_key(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    attribute: &str,
    keys: &[&str],
) -> syn::Error {
    let message = match capability_rules::closest(key, keys) {
        Some(near) => format!("unknown {attribute} attribute `{key}`; did you mean `{near}`?"),
        None => format!(
            "unknown {attribute} attribute `{key}`, expected one of {}",
            keys.iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    syn::Error::new(meta.path.span(), message)
}

/// Consumes whatever follows an unknown key (`= value` or `(...)`), so parsing can go on.
pub fn skip_value(meta: &ParseNestedMeta<'_>) {
    let _ = meta.input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            if matches!(&tt, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            rest = next;
        }
        Ok(((), rest))
    });
}

/// The doc comment of an item, with the one space after `///` removed and blank edges trimmed.
pub fn doc_comment(attrs: &[Attribute]) -> Option<String> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            // `split`, not `lines`: an empty `///` line is `""`, and must stay a blank line.
            for line in s.value().split('\n') {
                lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
            }
        }
    }
    let text = lines.join("\n");
    let text = text.trim_matches('\n').trim();
    (!text.is_empty()).then(|| text.to_owned())
}
