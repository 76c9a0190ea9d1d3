//! `#[tool_capabilities]`: capability manifests for the `#[tool(...)]` methods of an rmcp
//! `#[tool_router]` impl block, read from the same tokens rmcp reads, and one bindable unit
//! struct per tool.
//!
//! parse (`parse.rs`, token level) → check (`capability-rules`, per method) → expand
//! (`expand.rs`), with a fallback per method whose rules failed.

mod expand;
mod meta;
mod parse;

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;

use crate::attr;
use crate::errors::Errors;

/// The arguments of `#[tool_capabilities(...)]`.
#[derive(Default)]
pub struct RouterArgs {
    /// `module = name`.
    pub module: Option<syn::Ident>,
    /// `crate = "path"`.
    pub krate: Option<syn::Path>,
}

const ROUTER_KEYS: &[&str] = &["module", "crate"];

/// Expands the attribute. Never panics: every problem is a `compile_error!` next to the item.
pub fn tool_capabilities(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut router_args = RouterArgs::default();
    let mut found = Errors::default();
    let parser = syn::meta::parser(|meta| {
        if let Err(error) = router_key(&mut router_args, &meta) {
            found.push(error);
            attr::skip_value(&meta);
        }
        Ok(())
    });
    errors.ok(syn::parse::Parser::parse2(parser, args));
    errors.append(found);
    let meta_for = |self_ident: Option<&proc_macro2::Ident>, method: &parse::Method, existing| {
        expand::meta_expr(&router_args, self_ident, method, existing)
    };
    let Some(block) = parse::impl_block(item.clone(), &mut errors, &meta_for) else {
        let mut out = syn::Error::new(
            Span::call_site(),
            "`#[tool_capabilities]` goes on an rmcp `#[tool_router]` impl block, above \
             `#[tool_router]`",
        )
        .to_compile_error();
        out.extend(item);
        return out;
    };
    let mut out = block.output;
    out.extend(expand::tools(
        &router_args,
        block.self_ident.as_ref(),
        &block.methods,
        &mut errors,
    ));
    out.extend(errors.to_compile_errors());
    out
}

fn router_key(out: &mut RouterArgs, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    let key = attr::meta_key(meta)?;
    match key.as_str() {
        "module" => attr::set(&mut out.module, meta.value()?.parse()?, meta, &key),
        "crate" => attr::set(&mut out.krate, attr::crate_path(meta)?, meta, &key),
        _ => Err(attr::unknown_key(
            meta,
            &key,
            "tool_capabilities",
            ROUTER_KEYS,
        )),
    }
}

#[cfg(test)]
mod tests;
