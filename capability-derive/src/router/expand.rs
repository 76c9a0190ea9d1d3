//! The rules for each rmcp tool (the derive's, from `capability-rules`) and its generated type.

use capability_rules::{Descriptor, Draft, Shape, Subject, Validated};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};

use super::RouterArgs;
use super::parse::Method;
use crate::errors::Errors;
use crate::expand::facade;
use crate::tokens::canonical;

/// The module with one unit struct per tool, each with its manifest and registration.
pub fn tools(
    args: &RouterArgs,
    self_ident: Option<&syn::Ident>,
    methods: &[Method],
    errors: &mut Errors,
) -> TokenStream {
    let krate = facade(args.krate.as_ref());
    let module = module_ident(args, self_ident);
    let mut seen: Vec<String> = Vec::new();
    let mut items = Vec::new();
    for method in methods {
        let name = tool_name(method);
        let type_name = camel_case(&name);
        let Some(ident) = type_ident(method) else {
            errors.push(syn::Error::new(
                name_span(method),
                format!("the tool name `{name}` gives no Rust type name; set `name = \"..\"`"),
            ));
            continue;
        };
        if seen.contains(&type_name) {
            errors.push(syn::Error::new(
                name_span(method),
                format!("two tools of this router become the type `{type_name}`; rename one"),
            ));
            continue;
        }
        seen.push(type_name);
        items.push(tool(&krate, method, &name, &ident, errors));
    }
    let ty = self_ident.map_or_else(|| "this router".to_owned(), |t| format!("`{t}`"));
    let module_doc =
        format!("The rmcp tools of {ty} as types agents can bind (`#[tool_capabilities]`).");
    quote! {
        #[doc = #module_doc]
        #[allow(dead_code)]
        pub mod #module {
            #(#items)*
        }
    }
}

/// The module of the generated types: `module = ..`, else `<snake self type>_tools`.
fn module_ident(args: &RouterArgs, self_ident: Option<&syn::Ident>) -> syn::Ident {
    match (&args.module, self_ident) {
        (Some(module), _) => module.clone(),
        (None, Some(ty)) => {
            let text = ty.to_string();
            let text = text.strip_prefix("r#").unwrap_or(&text);
            format_ident!(
                "{}_tools",
                capability_rules::snake_case(text),
                span = ty.span()
            )
        }
        (None, None) => format_ident!("tools"),
    }
}

/// The tool's name as rmcp publishes it: `name = ".."`, else the method's.
fn tool_name(method: &Method) -> String {
    method
        .name
        .as_ref()
        .map_or_else(|| method.ident.to_string(), syn::LitStr::value)
}

/// The generated type of a tool, `None` when its name gives no Rust identifier.
fn type_ident(method: &Method) -> Option<syn::Ident> {
    syn::parse_str::<syn::Ident>(&camel_case(&tool_name(method)))
        .ok()
        .map(|i| syn::Ident::new(&i.to_string(), method.ident.span()))
}

/// The `meta` of a tool's `#[tool(...)]`: the author's `meta` (if any) with the manifest's
/// scopes and descriptor hash added under `dev.capability/manifest`, so the tools rmcp lists
/// carry them. `None` when the tool gets no type (its error is reported by [`tools`]).
pub fn meta_expr(
    args: &RouterArgs,
    self_ident: Option<&syn::Ident>,
    method: &Method,
    existing: Option<TokenStream>,
) -> Option<TokenStream> {
    let krate = facade(args.krate.as_ref());
    let module = module_ident(args, self_ident);
    let ty = type_ident(method)?;
    let existing = match existing {
        Some(value) => quote!(#krate::__private::Option::Some(#value)),
        None => quote!(#krate::__private::Option::None),
    };
    Some(quote_spanned! {method.ident.span()=>
        #krate::__private::tool_meta(
            <#module::#ty as #krate::__private::Capability>::manifest(),
            #existing,
        )
    })
}

fn tool(
    krate: &TokenStream,
    method: &Method,
    name: &str,
    ident: &syn::Ident,
    errors: &mut Errors,
) -> TokenStream {
    let hint = |i: usize| method.hints[i].map(|f| f.value);
    let provider = method.provider.as_ref().map(syn::LitStr::value);
    let scopes: Vec<String> = method.scopes.iter().map(syn::LitStr::value).collect();
    let draft = Draft {
        name,
        provider: provider.as_deref(),
        version: None,
        read_only: hint(0),
        destructive: hint(1),
        idempotent: hint(2),
        open_world: hint(3),
        scopes: scopes.iter().map(String::as_str).collect(),
    };
    let struct_doc = format!(
        "The rmcp tool `{name}` (method `{}`), as a type agents can bind.",
        method.ident
    );
    let struct_item = quote_spanned! {method.ident.span()=>
        #[doc = #struct_doc]
        pub struct #ident;
    };
    let read_only = hint(0) == Some(true);
    let read_only_impl = read_only.then(|| {
        quote! {
            impl #krate::__private::ReadOnlyTool for #ident {
                const READ_ONLY_PROOF: #krate::__private::ReadOnlyProof<Self> =
                    #krate::__private::ReadOnlyProof::new();
            }
        }
    });
    let Validated { flags, scopes } = match capability_rules::validate(&draft) {
        Ok(valid) => valid,
        Err(problems) => {
            for problem in problems {
                let mut message = problem.violation.to_string();
                if problem.subject == Subject::Name && method.name.is_none() {
                    message.push_str(&format!(
                        " (rmcp names the tool after the method `{}`; set `#[tool(name = \"..\")]`)",
                        method.ident
                    ));
                }
                errors.push(syn::Error::new(span_of(method, problem.subject), message));
            }
            // The fallback: the type exists, so uses of it report nothing further.
            return quote! {
                #struct_item
                impl #krate::__private::Capability for #ident {
                    const READ_ONLY: bool = #read_only;
                    fn manifest() -> &'static #krate::__private::CapabilityManifest {
                        #krate::__private::unreachable!("the tool's attributes have compile errors")
                    }
                }
                #read_only_impl
            };
        }
    };
    let title = method.title.as_ref().map(syn::LitStr::value);
    let description_text = method.description.as_ref().map(|(_, text)| text.as_str());
    let input = match &method.parameters {
        Some(ty) => Shape::Tuple(vec![canonical(ty.to_token_stream())]),
        None => Shape::Unit,
    };
    let descriptor = Descriptor {
        name,
        title: title.as_deref(),
        description: description_text,
        provider: provider.as_deref(),
        flags,
        scopes: &scopes,
        generics: "",
        input: &input,
        output: None,
        version: None,
        sensitive: &[],
    };
    let descriptor_hash = descriptor.hash_hex();
    let schema_version = &descriptor_hash[..12];
    let some = |value: TokenStream| quote!(#krate::__private::Option::Some(#value));
    let none = quote!(#krate::__private::Option::None);
    let opt_str = |value: Option<&str>| value.map_or_else(|| none.clone(), |v| some(quote!(#v)));
    let title = opt_str(title.as_deref());
    let provider = opt_str(provider.as_deref());
    let description = match &method.description {
        None => none.clone(),
        Some((parts, _)) if parts.len() == 1 => some(parts[0].clone()),
        Some((parts, _)) => {
            let mut joined = TokenStream::new();
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    joined.extend(quote!(, "\n",));
                }
                joined.extend(part.clone());
            }
            some(quote!(#krate::__private::concat!(#joined)))
        }
    };
    let hints: Vec<TokenStream> = (0..4)
        .map(|i| hint(i).map_or_else(|| none.clone(), |v| some(quote!(#v))))
        .collect();
    let [h_read_only, h_destructive, h_idempotent, h_open_world] = &hints[..] else {
        return TokenStream::new();
    };
    let ident_text = ident.to_string();
    quote! {
        #struct_item
        const _: () = {
            static __CAPABILITY_DATA: #krate::__private::ManifestData =
                #krate::__private::ToolData {
                    name: #name,
                    title: #title,
                    description: #description,
                    provider: #provider,
                    hints: #krate::__private::HintSet {
                        read_only: #h_read_only,
                        destructive: #h_destructive,
                        idempotent: #h_idempotent,
                        open_world: #h_open_world,
                    },
                    scopes: &[#(#scopes),*],
                    input_schema_id: #krate::__private::concat!(
                        #krate::__private::module_path!(), "::", #ident_text
                    ),
                    output_schema_id: #krate::__private::Option::None,
                    schema_version: #schema_version,
                    descriptor_hash: #descriptor_hash,
                    sensitive: &[],
                }
                .assemble();
            static __CAPABILITY_TOOL: #krate::__private::StaticTool =
                #krate::__private::StaticTool::new(
                    &__CAPABILITY_DATA,
                    #krate::__private::module_path!(),
                );

            #[automatically_derived]
            impl #krate::__private::Capability for #ident {
                const READ_ONLY: bool = #read_only;

                fn manifest() -> &'static #krate::__private::CapabilityManifest {
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

fn name_span(method: &Method) -> Span {
    method
        .name
        .as_ref()
        .map_or_else(|| method.ident.span(), syn::LitStr::span)
}

/// The most specific token for a problem.
fn span_of(method: &Method, subject: Subject) -> Span {
    let span = match subject {
        Subject::Name => Some(name_span(method)),
        Subject::Provider => method.provider.as_ref().map(syn::LitStr::span),
        Subject::Version => None,
        Subject::Scope(index) => method.scopes.get(index).map(syn::LitStr::span),
        // Whichever of the two hints came later: that is the one that contradicts.
        Subject::ReadOnlyAndDestructive => match (method.hints[0], method.hints[1]) {
            (Some(r), Some(d)) if r.order > d.order => Some(r.span),
            (_, Some(d)) => Some(d.span),
            (Some(r), None) => Some(r.span),
            (None, None) => None,
        },
    };
    span.unwrap_or_else(|| method.ident.span())
}

/// `list_pods` / `list-pods` / `list.pods` -> `ListPods`; a leading digit gets a `Tool` prefix.
pub(super) fn camel_case(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "Tool");
    }
    out
}
