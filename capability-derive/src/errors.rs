//! Collects every error of one macro call, so a single build shows all of them.

use proc_macro2::TokenStream;

/// The errors found so far.
#[derive(Default)]
pub struct Errors {
    first: Option<syn::Error>,
}

impl Errors {
    /// Records an error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
    }

    /// Records every error of another collection.
    pub fn append(&mut self, other: Errors) {
        if let Some(error) = other.first {
            self.push(error);
        }
    }

    /// Records the error of a result, and gives back its value.
    pub fn ok<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|error| self.push(error)).ok()
    }

    /// The combined error, if any.
    pub fn into_error(self) -> Option<syn::Error> {
        self.first
    }

    /// Whether nothing went wrong.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The errors as `compile_error!` invocations (empty when there are none).
    pub fn to_compile_errors(&self) -> TokenStream {
        self.first
            .as_ref()
            .map(syn::Error::to_compile_error)
            .unwrap_or_default()
    }
}
