//! The model of what the macros read: a tool type and an agent type.

use capability_rules::Shape;
use quote::ToTokens;
use syn::{Data, DeriveInput, Fields, Ident, Type};

use crate::attr::{self, AgentAttrs, AgentKind, ToolAttrs};
use crate::errors::Errors;
use crate::tokens::canonical;

/// A type deriving `Capability`.
pub struct Tool<'a> {
    /// The item as written, for spans and generics.
    pub original: &'a DeriveInput,
    /// Its merged `#[capability(...)]` attributes.
    pub attrs: ToolAttrs,
    /// Its doc comment.
    pub doc: Option<String>,
    /// Its field names and types, as canonical text.
    pub shape: Shape,
    /// Its generic parameters and where clause, as canonical text.
    pub generics: String,
}

impl<'a> Tool<'a> {
    /// Reads a derive input. A union is an error (recorded); parsing still goes on so every
    /// attribute mistake is reported in the same build.
    pub fn from_input(original: &'a DeriveInput, errors: &mut Errors) -> Tool<'a> {
        let attrs = attr::tool_attrs(&original.attrs, errors);
        let shape = match &original.data {
            Data::Struct(data) => fields_shape(&data.fields),
            Data::Enum(data) => Shape::Enum(
                data.variants
                    .iter()
                    .map(|v| (v.ident.to_string(), fields_shape(&v.fields)))
                    .collect(),
            ),
            Data::Union(data) => {
                errors.push(syn::Error::new(
                    data.union_token.span,
                    "`#[derive(Capability)]` does not support unions; use a struct or an enum",
                ));
                Shape::Unit
            }
        };
        let generics = &original.generics;
        let where_clause = &generics.where_clause;
        Tool {
            original,
            attrs,
            doc: attr::doc_comment(&original.attrs),
            shape,
            generics: canonical(quote::quote!(#generics #where_clause)),
        }
    }

    /// The type's identifier.
    pub fn ident(&self) -> &Ident {
        &self.original.ident
    }
}

fn fields_shape(fields: &Fields) -> Shape {
    match fields {
        Fields::Named(named) => Shape::Named(
            named
                .named
                .iter()
                .map(|f| {
                    let name = f.ident.as_ref().map(Ident::to_string).unwrap_or_default();
                    (name, canonical(f.ty.to_token_stream()))
                })
                .collect(),
        ),
        Fields::Unnamed(unnamed) => Shape::Tuple(
            unnamed
                .unnamed
                .iter()
                .map(|f| canonical(f.ty.to_token_stream()))
                .collect(),
        ),
        Fields::Unit => Shape::Unit,
    }
}

/// A type carrying `#[advisor_agent(...)]` or `#[agent(...)]`.
pub struct Agent<'a> {
    /// The item as written.
    pub original: &'a DeriveInput,
    /// Which attribute it carries.
    pub kind: AgentKind,
    /// The attribute's arguments.
    pub attrs: AgentAttrs,
}

impl Agent<'_> {
    /// The bound tools, in declaration order.
    pub fn tools(&self) -> &[Type] {
        self.attrs.tools.as_deref().unwrap_or_default()
    }
}
