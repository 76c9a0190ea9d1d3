//! What the macros emit next to their errors.
//!
//! Emitting the impls anyway stops follow-on errors ("`Foo` has no capability manifest" at every
//! place that uses the tool) and keeps the IDE usable. The bodies never run: the build fails on
//! the errors emitted with them.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::{Agent, Tool};
use crate::expand::facade;

/// `impl Capability` for a tool whose attributes have errors. A tool that said `read_only`
/// keeps `READ_ONLY = true`, so an advisor binding it does not report a second, false error.
pub fn tool(tool: &Tool<'_>) -> TokenStream {
    if matches!(tool.original.data, syn::Data::Union(_)) {
        return TokenStream::new();
    }
    let krate = facade(tool.attrs.krate.as_ref());
    let ident = tool.ident();
    let (impl_generics, ty_generics, where_clause) = tool.original.generics.split_for_impl();
    let read_only = tool.attrs.read_only.is_some_and(|flag| flag.value);
    let read_only_impl = read_only.then(|| {
        quote! {
            #[automatically_derived]
            impl #impl_generics #krate::__private::ReadOnlyTool for #ident #ty_generics #where_clause {
                const READ_ONLY_PROOF: #krate::__private::ReadOnlyProof<Self> =
                    #krate::__private::ReadOnlyProof::new();
            }
        }
    });
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::__private::Capability for #ident #ty_generics #where_clause {
            const READ_ONLY: bool = #read_only;

            fn manifest() -> &'static #krate::__private::CapabilityManifest {
                #krate::__private::unreachable!("the capability attributes have compile errors")
            }
        }
        #read_only_impl
    }
}

/// `impl Agent` for an agent whose attribute has errors, when the item can carry one.
pub fn agent(agent: &Agent<'_>) -> TokenStream {
    let item = agent.original;
    if matches!(item.data, syn::Data::Union(_)) || !item.generics.params.is_empty() {
        return TokenStream::new();
    }
    let krate = facade(agent.attrs.krate.as_ref());
    let ident = &item.ident;
    quote! {
        #[automatically_derived]
        impl #krate::__private::Agent for #ident {
            fn spec() -> &'static #krate::__private::AgentSpec {
                #krate::__private::unreachable!("the agent attribute has compile errors")
            }
        }
    }
}
