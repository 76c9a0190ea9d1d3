//! The token-level reading of an rmcp impl block, without a compiler in the loop.

use quote::quote;

use super::parse::{self, Method};
use super::tool_capabilities;
use crate::errors::Errors;

fn methods(item: proc_macro2::TokenStream) -> (Vec<Method>, String, bool) {
    let mut errors = Errors::default();
    let block = parse::impl_block(item, &mut errors, &|_, _, _| None).expect("an impl block");
    (block.methods, block.output.to_string(), errors.is_empty())
}

#[test]
fn reads_what_rmcp_reads_and_removes_only_capability() {
    let (methods, output, ok) = methods(quote! {
        #[tool_router(router = r)]
        impl<T: Clone> Ops<T> where T: Send {
            #[allow(unused)]
            /// Line one.
            ///
            ///    line two.
            #[tool(name = "list-pods", annotations(title = "x", read_only_hint, open_world_hint = "false"), meta = Meta(json!({"a": 1, "b": 2})))]
            #[capability(scopes = ["k8s:read"], provider = "k8s")]
            async fn list(&self, ctx: RequestContext<RoleServer>, f: fn(u8) -> u8, Parameters(p): rmcp::wrapper::Parameters<Vec<(u8, u8)>>) -> String { p }

            /// Ignored: rmcp starts over at `#[allow]`.
            #[allow(unused)]
            /// Kept.
            #[rmcp::tool]
            fn plain(&self) {}

            fn helper() {}
            const X: u8 = 1;
        }
    });
    assert!(ok);
    assert!(output.contains("tool_router"));
    assert!(output.contains("allow (unused)"));
    assert!(!output.contains("capability"), "{output}");
    assert_eq!(methods.len(), 2);
    let list = &methods[0];
    assert_eq!(list.ident, "list");
    assert_eq!(
        list.name.as_ref().map(syn::LitStr::value).as_deref(),
        Some("list-pods")
    );
    assert_eq!(
        list.description.as_ref().map(|(_, t)| t.as_str()),
        Some("Line one.\nline two.")
    );
    let hints: Vec<Option<bool>> = list.hints.iter().map(|h| h.map(|f| f.value)).collect();
    assert_eq!(hints, [Some(true), None, None, Some(false)]);
    let params = list
        .parameters
        .as_ref()
        .map(|t| crate::tokens::canonical(quote!(#t)));
    assert_eq!(
        params.as_deref(),
        Some("rmcp::wrapper::Parameters<Vec<(u8,u8)>>")
    );
    assert_eq!(list.scopes.len(), 1);
    assert_eq!(
        list.provider.as_ref().map(syn::LitStr::value).as_deref(),
        Some("k8s")
    );
    let plain = &methods[1];
    assert_eq!(
        plain.description.as_ref().map(|(_, t)| t.as_str()),
        Some("Kept.")
    );
    assert!(plain.parameters.is_none() && plain.hints.iter().all(Option::is_none));
}

#[test]
fn a_description_key_wins_over_the_doc_comment_and_may_be_an_expression() {
    let (methods, _, ok) = methods(quote! {
        impl S {
            /// Doc.
            #[tool(description = concat!("a", "b"))]
            fn t(&self) {}
        }
    });
    assert!(ok);
    assert_eq!(
        methods[0].description.as_ref().map(|(_, t)| t.as_str()),
        Some("concat!(\"a\",\"b\")")
    );
}

#[test]
fn not_an_impl_block_is_an_error_and_the_item_is_kept() {
    let out = tool_capabilities(
        quote!(),
        quote!(
            struct S;
        ),
    )
    .to_string();
    assert!(out.contains("compile_error"), "{out}");
    assert!(out.contains("struct S"), "{out}");
}

#[test]
fn errors_accumulate_and_the_item_still_comes_out() {
    let out = tool_capabilities(
        quote!(modul = x),
        quote! {
            impl S {
                #[tool(annotations(read_only_hint = true, destructive_hint = true))]
                #[capability(scope = ["a:read"])]
                fn t(&self) {}
            }
        },
    )
    .to_string();
    assert_eq!(out.matches("compile_error").count(), 3, "{out}");
    assert!(out.contains("impl S"), "{out}");
    assert!(out.contains("pub mod s_tools"), "{out}");
}

#[test]
fn an_unreadable_hint_is_an_error_not_a_default() {
    let out = tool_capabilities(
        quote!(),
        quote! {
            impl S {
                #[tool(annotations(read_only_hint = READ_ONLY))]
                fn t(&self) {}
            }
        },
    )
    .to_string();
    assert!(out.contains("cannot read this"), "{out}");
}

#[test]
fn type_names_are_the_camel_case_of_tool_names() {
    use super::expand::camel_case;
    assert_eq!(camel_case("list_pods"), "ListPods");
    assert_eq!(camel_case("pod-logs.v2"), "PodLogsV2");
    assert_eq!(camel_case("2fa_reset"), "Tool2faReset");
}
