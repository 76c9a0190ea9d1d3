//! The macros of `capability`. Use them through the facade crate `capability`, which documents
//! them; generated code names the facade as `::capability` (or the path given by `crate = ".."`).

#![forbid(unsafe_code)]

mod ast;
mod attr;
mod check;
mod errors;
mod expand;
mod fallback;
mod router;
mod tokens;

use proc_macro::TokenStream;
use quote::ToTokens;
use syn::DeriveInput;

use crate::attr::AgentKind;
use crate::errors::Errors;

/// Attaches a frozen capability manifest to a tool type. Documented in the `capability` crate.
#[proc_macro_derive(Capability, attributes(capability))]
pub fn derive_capability(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    let mut errors = Errors::default();
    let tool = ast::Tool::from_input(&input, &mut errors);
    let checked = check::tool(&tool, &mut errors);
    match checked {
        Some(checked) if errors.is_empty() => expand::tool(&tool, &checked).into(),
        _ => {
            let mut out = errors.to_compile_errors();
            out.extend(fallback::tool(&tool));
            out.into()
        }
    }
}

/// Declares an advisor agent, which may bind read-only tools only. Documented in `capability`.
#[proc_macro_attribute]
pub fn advisor_agent(args: TokenStream, item: TokenStream) -> TokenStream {
    agent_macro(AgentKind::Advisor, args, item)
}

/// Declares an operator agent, which may bind any tool. Documented in `capability`.
#[proc_macro_attribute]
pub fn agent(args: TokenStream, item: TokenStream) -> TokenStream {
    agent_macro(AgentKind::Operator, args, item)
}

/// Gives each `#[tool(...)]` method of an rmcp `#[tool_router]` impl block a capability manifest
/// and a bindable type. Documented in `capability`.
#[proc_macro_attribute]
pub fn tool_capabilities(args: TokenStream, item: TokenStream) -> TokenStream {
    router::tool_capabilities(args.into(), item.into()).into()
}

fn agent_macro(kind: AgentKind, args: TokenStream, item: TokenStream) -> TokenStream {
    let item2 = proc_macro2::TokenStream::from(item.clone());
    let input: DeriveInput = match syn::parse(item) {
        Ok(input) => input,
        Err(_) => {
            // Not a struct or enum: emit the item unchanged so nothing else breaks, and point
            // at its first token (`fn`, `mod`, ...).
            let span = item2
                .clone()
                .into_iter()
                .find(|tt| !matches!(tt, proc_macro2::TokenTree::Punct(p) if p.as_char() == '#'))
                .map_or_else(proc_macro2::Span::call_site, |tt| tt.span());
            let error = syn::Error::new(
                span,
                format!("`#[{}]` goes on a struct or an enum", kind.attribute()),
            );
            let mut out = error.to_compile_error();
            out.extend(item2);
            return out.into();
        }
    };
    let mut errors = Errors::default();
    let attrs = attr::agent_attrs(kind, args.into(), &mut errors);
    let agent = ast::Agent {
        original: &input,
        kind,
        attrs,
    };
    let checked = check::agent(&agent, &mut errors);
    let tools = expand::agent_tools(&agent);
    // An agent type is used through its spec and is often never constructed: without this,
    // every unit-struct agent would warn as dead code.
    let mut out = quote::quote! { #[allow(dead_code)] };
    out.extend(input.to_token_stream());
    match checked {
        Some(checked) if errors.is_empty() => {
            let agent = expand::agent(&agent, &checked);
            // An anonymous const keeps the statics out of the user's namespace.
            out.extend(quote::quote! { const _: () = { #tools #agent }; });
        }
        _ => {
            out.extend(quote::quote! { const _: () = { #tools }; });
            out.extend(errors.to_compile_errors());
            out.extend(fallback::agent(&agent));
        }
    }
    out.into()
}
