//! The `meta = ..` that `#[tool_capabilities]` sets on each `#[tool(...)]`, so the tools rmcp
//! lists carry the manifest's scopes and descriptor hash in `_meta`.

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use syn::Attribute;

/// `#[tool(...)]` with `meta = <expr>` set: `make(None)` appended when the author gave no
/// `meta`, `make(Some(value))` in place of the author's value otherwise. `None` when `make`
/// gives nothing or the attribute is not `#[path]` / `#[path(...)]`.
pub fn with_meta(
    tool: &Attribute,
    make: impl Fn(Option<TokenStream>) -> Option<TokenStream>,
) -> Option<TokenStream> {
    let path = tool.path();
    let args: Vec<TokenTree> = match &tool.meta {
        syn::Meta::Path(_) => Vec::new(),
        syn::Meta::List(list) => list.tokens.clone().into_iter().collect(),
        syn::Meta::NameValue(_) => return None,
    };
    // The top-level `key = value` entries, split at commas.
    let mut entries: Vec<Vec<TokenTree>> = vec![Vec::new()];
    for tt in args {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => entries.push(Vec::new()),
            _ => entries.last_mut()?.push(tt),
        }
    }
    entries.retain(|entry| !entry.is_empty());
    let is_meta = |entry: &[TokenTree]| {
        matches!(entry, [TokenTree::Ident(key), TokenTree::Punct(eq), ..]
            if key == "meta" && eq.as_char() == '=')
    };
    let mut rebuilt = TokenStream::new();
    let mut found = false;
    for entry in &entries {
        if !rebuilt.is_empty() {
            rebuilt.extend(quote::quote!(,));
        }
        if is_meta(entry) && !found {
            found = true;
            let value: TokenStream = entry[2..].iter().cloned().collect();
            let expr = make(Some(value))?;
            let key = entry[0].clone();
            rebuilt.extend(quote::quote!(#key = #expr));
        } else {
            rebuilt.extend(entry.iter().cloned());
        }
    }
    if !found {
        let expr = make(None)?;
        if !rebuilt.is_empty() {
            rebuilt.extend(quote::quote!(,));
        }
        rebuilt.extend(quote::quote!(meta = #expr));
    }
    let mut group = Group::new(Delimiter::Parenthesis, rebuilt);
    if let syn::Meta::List(list) = &tool.meta {
        group.set_span(list.delimiter.span().join());
    }
    let pound = &tool.pound_token;
    let mut inner = quote::quote!(#path);
    inner.extend([TokenTree::Group(group)]);
    let mut bracket = Group::new(Delimiter::Bracket, inner);
    bracket.set_span(tool.bracket_token.span.join());
    let mut out = quote::quote!(#pound);
    out.extend([TokenTree::Group(bracket)]);
    Some(out)
}
