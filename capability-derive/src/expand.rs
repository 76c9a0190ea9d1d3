//! Token generation. Nothing is validated here: `check.rs` did that.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Agent, Tool};
use crate::attr::AgentKind;
use crate::check::{CheckedAgent, CheckedTool};

/// The path of the facade: `::capability` unless `crate = ".."` says otherwise.
pub fn facade(krate: Option<&syn::Path>) -> TokenStream {
    match krate {
        Some(path) => quote!(#path),
        None => quote!(::capability),
    }
}

fn opt_str(krate: &TokenStream, value: Option<&str>) -> TokenStream {
    match value {
        Some(value) => quote!(#krate::__private::Option::Some(#value)),
        None => quote!(#krate::__private::Option::None),
    }
}

/// `impl Capability` (and `ReadOnlyTool` for a read-only tool), the static manifest data and
/// the registration.
pub fn tool(tool: &Tool<'_>, checked: &CheckedTool) -> TokenStream {
    let krate = facade(tool.attrs.krate.as_ref());
    let ident = tool.ident();
    let ident_text = ident.to_string();
    let ident_text = ident_text.strip_prefix("r#").unwrap_or(&ident_text);
    let (impl_generics, ty_generics, where_clause) = tool.original.generics.split_for_impl();

    let name = &checked.name;
    let title = opt_str(
        &krate,
        tool.attrs.title.as_ref().map(|t| t.value()).as_deref(),
    );
    let description = opt_str(&krate, checked.description.as_deref());
    let provider = opt_str(
        &krate,
        tool.attrs.provider.as_ref().map(|p| p.value()).as_deref(),
    );
    let read_only = checked.flags.read_only;
    let opt_bool = |flag: Option<crate::attr::Flag>| match flag {
        Some(flag) => {
            let value = flag.value;
            quote!(#krate::__private::Option::Some(#value))
        }
        None => quote!(#krate::__private::Option::None),
    };
    let hint_read_only = opt_bool(tool.attrs.read_only);
    let hint_destructive = opt_bool(tool.attrs.destructive);
    let hint_idempotent = opt_bool(tool.attrs.idempotent);
    let hint_open_world = opt_bool(tool.attrs.open_world);
    let scopes = &checked.scopes;
    let output_id = opt_str(&krate, checked.output.as_deref());
    let schema_version = &checked.schema_version;
    let sensitive = &checked.sensitive;
    let descriptor_hash = &checked.descriptor_hash;

    // The output type is only named, never used: this makes a misspelt type a compile error at
    // the user's token, with the tool's generic parameters in scope.
    let output_check = tool.attrs.output.as_ref().map(|ty| {
        quote_spanned! {ty.span()=>
            let _: #krate::__private::PhantomData<#ty> = #krate::__private::PhantomData;
        }
    });
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
        // An anonymous const keeps the statics and the registration out of the user's namespace.
        const _: () = {
            // Outside the impl so that a generic tool has one manifest for all instantiations.
            // The data is assembled (hints resolved) at compile time: the manifest is a pointer
            // to it, and nothing is built at run time.
            static __CAPABILITY_DATA: #krate::__private::ManifestData =
                #krate::__private::ToolData {
                    name: #name,
                    title: #title,
                    description: #description,
                    provider: #provider,
                    hints: #krate::__private::HintSet {
                        read_only: #hint_read_only,
                        destructive: #hint_destructive,
                        idempotent: #hint_idempotent,
                        open_world: #hint_open_world,
                    },
                    scopes: &[#(#scopes),*],
                    input_schema_id: #krate::__private::concat!(
                        #krate::__private::module_path!(), "::", #ident_text
                    ),
                    output_schema_id: #output_id,
                    schema_version: #schema_version,
                    descriptor_hash: #descriptor_hash,
                    sensitive: &[#(#sensitive),*],
                }
                .assemble();
            static __CAPABILITY_TOOL: #krate::__private::StaticTool =
                #krate::__private::StaticTool::new(
                    &__CAPABILITY_DATA,
                    #krate::__private::module_path!(),
                );

            #[automatically_derived]
            impl #impl_generics #krate::__private::Capability for #ident #ty_generics #where_clause {
                const READ_ONLY: bool = #read_only;

                fn manifest() -> &'static #krate::__private::CapabilityManifest {
                    #output_check
                    __CAPABILITY_TOOL.manifest()
                }
            }

            #read_only_impl

            #krate::__private::inventory::submit! {
                #krate::__private::ToolEntry(&__CAPABILITY_TOOL)
            }
        };
    }
}

/// The bound tools: one binding impl per tool (the proof that this agent binds it) and the
/// `static` tool list made from them. An advisor's impl goes through the advisor gate, and its
/// list is made of proofs only the library creates; an operator's requires a manifest.
/// Emitted even when the attribute has other errors, so one build reports them all.
pub fn agent_tools(agent: &Agent<'_>) -> TokenStream {
    let krate = facade(agent.attrs.krate.as_ref());
    let ident = &agent.original.ident;
    // Impls need a plain type. A generic agent (or a union) is an error already; its tools are
    // still checked, as an operator's.
    let plain = agent.original.generics.params.is_empty()
        && !matches!(agent.original.data, syn::Data::Union(_));
    let advisor = agent.kind == AgentKind::Advisor && plain;
    // A path written twice is reported by `check.rs`; emitting its impl twice would add a
    // second, less helpful error. Two different paths to one tool are left to the compiler:
    // two impls of one trait for one type conflict.
    let mut seen = Vec::new();
    let tools: Vec<_> = agent
        .tools()
        .iter()
        .filter(|tool| {
            let text = crate::tokens::canonical(quote!(#tool));
            let new = !seen.contains(&text);
            seen.push(text);
            new
        })
        .collect();
    let len = tools.len();
    if advisor {
        // Spanned at the tool's path, so rustc's errors point at the tool inside the attribute.
        let impls = tools.iter().map(|tool| {
            quote_spanned! {tool.span()=>
                #[automatically_derived]
                impl #krate::__private::AdvisorBound<#ident> for #tool {
                    const BINDING: #krate::__private::AdvisorBinding<#tool, #ident> =
                        #krate::__private::bind_advisor_tool::<
                            #tool, #ident, { <#tool as #krate::__private::Capability>::READ_ONLY }
                        >(&__CapabilityBindingToken(__CapabilitySeal));
                }
            }
        });
        let elements = tools.iter().map(|tool| {
            quote_spanned! {tool.span()=>
                <#tool as #krate::__private::AdvisorBound<#ident>>::BINDING.tool()
            }
        });
        // The binding token: declared here, inside the expansion's own block, with a field of a
        // type only this block can name, so no code outside it can make one (a type alias of
        // `<Agent as AdvisorTokens>::Token` reaches the token, not its field's type).
        quote! {
            #[doc(hidden)]
            #[allow(dead_code)]
            pub struct __CapabilityBindingToken(__CapabilitySeal);
            struct __CapabilitySeal;
            #[automatically_derived]
            impl #krate::__private::AdvisorTokens for #ident {
                type Token = __CapabilityBindingToken;
            }
            #(#impls)*
            static __CAPABILITY_TOOLS: [#krate::__private::AdvisorTool; #len] = [#(#elements),*];
        }
    } else {
        let impls = tools.iter().filter(|_| plain).map(|tool| {
            quote_spanned! {tool.span()=>
                #[automatically_derived]
                impl #krate::__private::OperatorBound<#ident> for #tool {}
            }
        });
        let elements = tools.iter().map(|tool| {
            quote_spanned! {tool.span()=> #krate::__private::bind_tool::<#tool>() }
        });
        quote! {
            #(#impls)*
            static __CAPABILITY_TOOLS: [#krate::__private::OperatorTool; #len] = [#(#elements),*];
        }
    }
}

/// `impl Agent`, the static spec data and the registration.
pub fn agent(agent: &Agent<'_>, checked: &CheckedAgent) -> TokenStream {
    let krate = facade(agent.attrs.krate.as_ref());
    let ident = &agent.original.ident;
    let name = &checked.name;
    let target = syn::Ident::new(checked.target, proc_macro2::Span::call_site());
    let constructor = if agent.kind == AgentKind::Advisor {
        quote! {
            #krate::__private::StaticAgent::advisor(
                #name,
                #krate::__private::Target::#target,
                #krate::__private::module_path!(),
                &__CAPABILITY_TOOLS,
            )
        }
    } else {
        quote! {
            #krate::__private::StaticAgent::operator(
                #name,
                #krate::__private::module_path!(),
                &__CAPABILITY_TOOLS,
            )
        }
    };
    quote! {
        static __CAPABILITY_AGENT: #krate::__private::StaticAgent = #constructor;

        #[automatically_derived]
        impl #krate::__private::Agent for #ident {
            fn spec() -> &'static #krate::__private::AgentSpec {
                __CAPABILITY_AGENT.spec()
            }
        }

        #krate::__private::inventory::submit! {
            #krate::__private::AgentEntry(&__CAPABILITY_AGENT)
        }
    }
}
