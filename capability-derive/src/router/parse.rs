//! Reading an rmcp `#[tool_router]` impl block at the token level (the macro crate builds `syn`
//! without `full`, so there is no `ItemImpl`): its items, each method's `#[tool(...)]` as rmcp
//! reads it, and the `#[capability(...)]` next to it, which is removed from the output.

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::{Attribute, LitStr, Token};

use crate::attr::{self, Flag};
use crate::errors::Errors;

/// The keys `#[capability(...)]` takes on an rmcp tool method.
pub const METHOD_KEYS: &[&str] = &["scopes", "provider"];

/// One `#[tool]` method, as rmcp and `#[capability]` describe it.
pub struct Method {
    /// The method's identifier.
    pub ident: Ident,
    /// `name = ".."` of `#[tool]`.
    pub name: Option<LitStr>,
    /// `title = ".."` of `#[tool]`.
    pub title: Option<LitStr>,
    /// The description rmcp publishes: its parts (`&'static str` expressions, joined by `\n`),
    /// and its text (canonical token text for a part that is not a literal).
    pub description: Option<(Vec<TokenStream>, String)>,
    /// `read_only_hint`, `destructive_hint`, `idempotent_hint`, `open_world_hint`.
    pub hints: [Option<Flag>; 4],
    /// The `Parameters<T>` argument's type, as written.
    pub parameters: Option<syn::Type>,
    /// `scopes = [..]` of `#[capability]`.
    pub scopes: Vec<LitStr>,
    /// `provider = ".."` of `#[capability]`.
    pub provider: Option<LitStr>,
}

/// The impl block: the tokens to emit (`#[capability]` removed), the type's last identifier and
/// the tool methods.
pub struct ImplBlock {
    /// The item as it goes to rmcp.
    pub output: TokenStream,
    /// The last identifier of the self type (`OpsServer` in `impl OpsServer`).
    pub self_ident: Option<Ident>,
    /// The `#[tool]` methods, in order.
    pub methods: Vec<Method>,
}

/// What gives each tool method's `#[tool(...)]` its `meta`: from the self type's last
/// identifier, the method and the `meta` the author wrote (if any), the expression rmcp
/// publishes as the tool's `_meta`; `None` leaves the attribute as written.
pub type MetaFor<'a> =
    dyn Fn(Option<&Ident>, &Method, Option<TokenStream>) -> Option<TokenStream> + 'a;

/// Splits the item; problems go to `errors`. `None` when it is not an impl block.
pub fn impl_block(
    item: TokenStream,
    errors: &mut Errors,
    meta_for: &MetaFor<'_>,
) -> Option<ImplBlock> {
    let mut head: Vec<TokenTree> = item.into_iter().collect();
    let body = match head.pop() {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => g,
        _ => return None,
    };
    let mut self_ident = None;
    let mut is_impl = false;
    let mut depth = 0i32;
    let mut previous_hash = false;
    for tt in &head {
        match tt {
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' => depth -= 1,
            TokenTree::Ident(i) if i == "impl" && !previous_hash => is_impl = true,
            TokenTree::Ident(i) if i == "where" => break,
            TokenTree::Ident(i) if is_impl && depth == 0 && i != "for" && i != "dyn" => {
                self_ident = Some(i.clone());
            }
            _ => {}
        }
        previous_hash = matches!(tt, TokenTree::Punct(p) if p.as_char() == '#');
    }
    if !is_impl {
        return None;
    }
    let mut methods = Vec::new();
    let meta_for = |method: &Method, existing| meta_for(self_ident.as_ref(), method, existing);
    let body_tokens = items(body.stream(), &mut methods, errors, &meta_for);
    let mut group = Group::new(Delimiter::Brace, body_tokens);
    group.set_span(body.span());
    let mut output: TokenStream = head.into_iter().collect();
    output.extend([TokenTree::Group(group)]);
    Some(ImplBlock {
        output,
        self_ident,
        methods,
    })
}

/// Walks the items of the body: attributes, then tokens up to a `;` or (for a `fn`) its body.
fn items(
    body: TokenStream,
    methods: &mut Vec<Method>,
    errors: &mut Errors,
    meta_for: &dyn Fn(&Method, Option<TokenStream>) -> Option<TokenStream>,
) -> TokenStream {
    let mut out = TokenStream::new();
    let mut tokens = body.into_iter().peekable();
    while tokens.peek().is_some() {
        let mut attrs: Vec<(TokenStream, Option<Attribute>)> = Vec::new();
        let mut rest: Vec<TokenTree> = Vec::new();
        // Outer attributes: `#` `[..]`.
        while let Some(TokenTree::Punct(p)) = tokens.peek() {
            if p.as_char() != '#' {
                break;
            }
            let Some(hash) = tokens.next() else { break };
            match tokens.next() {
                Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                    let raw: TokenStream = [hash, TokenTree::Group(g)].into_iter().collect();
                    let parsed = syn::parse::Parser::parse2(Attribute::parse_outer, raw.clone())
                        .ok()
                        .and_then(|mut a| a.pop());
                    attrs.push((raw, parsed));
                }
                // `#!` (an inner attribute) or anything else: kept as written.
                other => {
                    rest.push(hash);
                    rest.extend(other);
                    break;
                }
            }
        }
        let mut is_fn = false;
        for tt in tokens.by_ref() {
            let end = match &tt {
                TokenTree::Ident(i) if i == "fn" => {
                    is_fn = true;
                    false
                }
                TokenTree::Punct(p) => p.as_char() == ';',
                TokenTree::Group(g) => g.delimiter() == Delimiter::Brace && is_fn,
                _ => false,
            };
            rest.push(tt);
            if end {
                break;
            }
        }
        let parsed: Vec<&Attribute> = attrs.iter().filter_map(|(_, a)| a.as_ref()).collect();
        let capability: Vec<&Attribute> = parsed
            .iter()
            .copied()
            .filter(|a| a.path().is_ident("capability"))
            .collect();
        let tool = parsed.iter().copied().find(|a| is_tool_attr(a));
        // The `#[tool(...)]` to emit, with the manifest's `meta`.
        let mut tool_output: Option<(*const Attribute, TokenStream)> = None;
        match (is_fn, tool) {
            (true, Some(tool)) => {
                if let Some(method) = method(&rest, tool, &parsed, &capability, errors) {
                    if let Some(rewritten) =
                        super::meta::with_meta(tool, |existing| meta_for(&method, existing))
                    {
                        tool_output = Some((std::ptr::from_ref(tool), rewritten));
                    }
                    methods.push(method);
                }
            }
            _ => {
                for attr in capability {
                    errors.push(syn::Error::new_spanned(
                        attr,
                        "`#[capability(...)]` in a `#[tool_capabilities]` impl goes on a \
                         `#[tool(...)]` method",
                    ));
                }
            }
        }
        for (raw, parsed) in &attrs {
            if parsed
                .as_ref()
                .is_some_and(|a| a.path().is_ident("capability"))
            {
                continue;
            }
            match (&tool_output, parsed) {
                (Some((tool, rewritten)), Some(a)) if std::ptr::eq(*tool, a) => {
                    out.extend(rewritten.clone());
                }
                _ => out.extend(raw.clone()),
            }
        }
        out.extend(rest);
    }
    out
}

/// rmcp's test: the attribute path's last segment is `tool`.
fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "tool")
}

fn method(
    rest: &[TokenTree],
    tool: &Attribute,
    attrs: &[&Attribute],
    capability: &[&Attribute],
    errors: &mut Errors,
) -> Option<Method> {
    let fn_at = rest
        .iter()
        .position(|tt| matches!(tt, TokenTree::Ident(i) if i == "fn"))?;
    let ident = match rest.get(fn_at + 1) {
        Some(TokenTree::Ident(i)) => i.clone(),
        _ => return None,
    };
    let parameters = rest[fn_at + 1..].iter().find_map(|tt| match tt {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => Some(g.stream()),
        _ => None,
    });
    let mut method = Method {
        ident,
        name: None,
        title: None,
        description: None,
        hints: [None; 4],
        parameters: parameters.and_then(parameters_type),
        scopes: Vec::new(),
        provider: None,
    };
    tool_args(&mut method, tool, errors);
    if method.description.is_none() {
        // Every attribute but `#[tool]` itself and the removed `#[capability]`s, as rmcp sees them.
        let seen: Vec<&Attribute> = attrs
            .iter()
            .copied()
            .filter(|a| !std::ptr::eq(*a, tool) && !a.path().is_ident("capability"))
            .collect();
        method.description = doc_description(&seen);
    }
    for attr in capability {
        let result = attr.parse_nested_meta(|meta| {
            let result = capability_key(&mut method, &meta);
            if let Err(error) = result {
                errors.push(error);
                attr::skip_value(&meta);
            }
            Ok(())
        });
        errors.ok(result);
    }
    Some(method)
}

fn capability_key(method: &mut Method, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    let key = attr::meta_key(meta)?;
    match key.as_str() {
        "scopes" => {
            let scopes = attr::string_list(meta, "a scope is a string such as \"metrics:read\"")?;
            if !method.scopes.is_empty() {
                return Err(meta.error("`scopes` is given twice; keep one"));
            }
            method.scopes = scopes;
            Ok(())
        }
        "provider" => attr::set(&mut method.provider, meta.value()?.parse()?, meta, &key),
        "read_only" | "destructive" | "idempotent" | "open_world" => Err(meta.error(format!(
            "on an rmcp tool the hints are rmcp's: write `#[tool(annotations({key}_hint = true))]`, \
             which rmcp publishes and the manifest reads"
        ))),
        _ => Err(attr::unknown_key(meta, &key, "capability", METHOD_KEYS)),
    }
}

/// Reads `#[tool(...)]` the way rmcp's darling parser does, for the keys the manifest needs.
/// Other keys (`meta`, `icons`, `input_schema`, ...) are skipped; rmcp checks them.
fn tool_args(method: &mut Method, tool: &Attribute, errors: &mut Errors) {
    if matches!(tool.meta, syn::Meta::Path(_)) {
        return;
    }
    let mut order = 0;
    let result = tool.parse_nested_meta(|meta| {
        let key = attr::meta_key(&meta)?;
        match key.as_str() {
            "name" => method.name = Some(meta.value()?.parse()?),
            "title" => method.title = Some(meta.value()?.parse()?),
            "description" => {
                let tokens = value_tokens(&meta)?;
                let text = match syn::parse2::<LitStr>(tokens.clone()) {
                    Ok(lit) => lit.value(),
                    Err(_) => crate::tokens::canonical(tokens.clone()),
                };
                method.description = Some((vec![tokens], text));
            }
            "annotations" => meta.parse_nested_meta(|hint| {
                let key = attr::meta_key(&hint)?;
                let slot = match key.as_str() {
                    "read_only_hint" => 0,
                    "destructive_hint" => 1,
                    "idempotent_hint" => 2,
                    "open_world_hint" => 3,
                    _ => {
                        attr::skip_value(&hint);
                        return Ok(());
                    }
                };
                order += 1;
                method.hints[slot] = Some(hint_flag(&hint, order)?);
                Ok(())
            })?,
            _ => attr::skip_value(&meta),
        }
        Ok(())
    });
    if let Err(error) = result {
        errors.push(syn::Error::new(
            error.span(),
            format!("`#[tool_capabilities]` cannot read this `#[tool(...)]`: {error}"),
        ));
    }
}

/// A hint as darling reads a `bool`: bare (`true`), `= true`, or `= "true"`.
fn hint_flag(meta: &ParseNestedMeta<'_>, order: usize) -> syn::Result<Flag> {
    let span = meta.path.segments[0].ident.span();
    if !meta.input.peek(Token![=]) {
        return Ok(Flag {
            value: true,
            span,
            order,
        });
    }
    let value = match meta.value()?.parse::<syn::Lit>()? {
        syn::Lit::Bool(b) => b.value,
        syn::Lit::Str(s) if s.value() == "true" => true,
        syn::Lit::Str(s) if s.value() == "false" => false,
        other => return Err(syn::Error::new(other.span(), "expected `true` or `false`")),
    };
    Ok(Flag { value, span, order })
}

/// The tokens of `= value` up to the next top-level comma.
fn value_tokens(meta: &ParseNestedMeta<'_>) -> syn::Result<TokenStream> {
    let value = meta.value()?;
    value.step(|cursor| {
        let mut rest = *cursor;
        let mut out = TokenStream::new();
        while let Some((tt, next)) = rest.token_tree() {
            if matches!(&tt, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            out.extend([tt]);
            rest = next;
        }
        Ok((out, rest))
    })
}

/// rmcp's description from doc comments (`extract_doc_line` folded over the attributes): each
/// line trimmed, empty lines skipped, joined by `\n`; `#[doc = some_macro!(..)]` kept as an
/// expression; any other attribute starts over.
fn doc_description(attrs: &[&Attribute]) -> Option<(Vec<TokenStream>, String)> {
    let mut parts: Vec<(TokenStream, String)> = Vec::new();
    for attr in attrs {
        let syn::Meta::NameValue(nv) = &attr.meta else {
            parts.clear();
            continue;
        };
        if !attr.path().is_ident("doc") {
            parts.clear();
            continue;
        }
        match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => {
                let line = s.value().trim().to_owned();
                if !line.is_empty() {
                    let lit = LitStr::new(&line, s.span());
                    parts.push((quote::quote!(#lit), line));
                }
            }
            syn::Expr::Macro(m) => {
                let tokens = quote::ToTokens::to_token_stream(m);
                let text = crate::tokens::canonical(tokens.clone());
                parts.push((tokens, text));
            }
            _ => parts.clear(),
        }
    }
    if parts.is_empty() {
        return None;
    }
    let text: Vec<&str> = parts.iter().map(|(_, s)| s.as_str()).collect();
    let text = text.join("\n");
    Some((parts.into_iter().map(|(t, _)| t).collect(), text))
}

/// The type of the first argument whose type's last segment is `Parameters` (rmcp's rule).
fn parameters_type(args: TokenStream) -> Option<syn::Type> {
    let mut arg: Vec<TokenTree> = Vec::new();
    let mut depth = 0i32;
    let mut previous: Option<TokenTree> = None;
    let mut all = Vec::new();
    for tt in args {
        if let TokenTree::Punct(p) = &tt {
            let after_dash = matches!(&previous, Some(TokenTree::Punct(q)) if q.as_char() == '-');
            match p.as_char() {
                '<' => depth += 1,
                '>' if !after_dash => depth -= 1,
                ',' if depth == 0 => {
                    all.push(std::mem::take(&mut arg));
                    previous = None;
                    continue;
                }
                _ => {}
            }
        }
        previous = Some(tt.clone());
        arg.push(tt);
    }
    all.push(arg);
    all.into_iter().find_map(|arg| {
        // The first `:` that is not part of a `::`.
        let colon = (0..arg.len()).find(|&i| {
            let is_colon =
                |j: usize| matches!(arg.get(j), Some(TokenTree::Punct(p)) if p.as_char() == ':');
            is_colon(i) && !is_colon(i + 1) && (i == 0 || !is_colon(i - 1))
        })?;
        let ty: TokenStream = arg[colon + 1..].iter().cloned().collect();
        let ty: syn::Type = syn::parse2(ty).ok()?;
        match &ty {
            syn::Type::Path(p) if p.path.segments.last()?.ident == "Parameters" => Some(ty),
            _ => None,
        }
    })
}
