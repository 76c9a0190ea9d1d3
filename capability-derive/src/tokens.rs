//! Canonical text of tokens as written, for the descriptor hash.
//!
//! `proc_macro2`'s `Display` leaves spacing to the compiler, which may change it between
//! releases. This writes one space between two words and none elsewhere, so the text (and the
//! hash) depends only on the tokens: not on white space, comments or the compiler version.

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The canonical text of a token stream.
pub fn canonical(tokens: TokenStream) -> String {
    let mut out = String::new();
    let mut after_word = false;
    write(tokens, &mut out, &mut after_word);
    out
}

fn write(tokens: TokenStream, out: &mut String, after_word: &mut bool) {
    for tree in tokens {
        match tree {
            TokenTree::Ident(ident) => word(out, after_word, &ident.to_string()),
            TokenTree::Literal(literal) => word(out, after_word, &literal.to_string()),
            TokenTree::Punct(punct) => {
                out.push(punct.as_char());
                *after_word = false;
            }
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ('(', ')'),
                    Delimiter::Brace => ('{', '}'),
                    Delimiter::Bracket => ('[', ']'),
                    // An invisible group (a `$ty` from a macro_rules macro) adds no text.
                    Delimiter::None => {
                        write(group.stream(), out, after_word);
                        continue;
                    }
                };
                out.push(open);
                *after_word = false;
                write(group.stream(), out, after_word);
                out.push(close);
                *after_word = false;
            }
        }
    }
}

fn word(out: &mut String, after_word: &mut bool, text: &str) {
    if *after_word {
        out.push(' ');
    }
    out.push_str(text);
    *after_word = true;
}

#[cfg(test)]
mod tests {
    use super::canonical;
    use quote::quote;

    #[test]
    fn one_space_between_words_and_none_elsewhere() {
        assert_eq!(canonical(quote!(Vec<String>)), "Vec<String>");
        assert_eq!(canonical(quote!(&'static str)), "&'static str");
        assert_eq!(canonical(quote!(&'a mut [u8; 4])), "&'a mut[u8;4]");
        assert_eq!(
            canonical(quote!(dyn Fn(u8) -> bool + Send)),
            "dyn Fn(u8)->bool+Send"
        );
        assert_eq!(
            canonical(quote!(<T: Clone> where T: Default)),
            "<T:Clone>where T:Default"
        );
    }

    #[test]
    fn white_space_does_not_matter() {
        let spaced: proc_macro2::TokenStream = "Option <  Box< dyn  Error > >".parse().unwrap();
        let tight: proc_macro2::TokenStream = "Option<Box<dyn Error>>".parse().unwrap();
        assert_eq!(canonical(spaced), canonical(tight));
    }

    #[test]
    fn invisible_groups_add_no_text() {
        let inner = quote!(u8);
        let group = proc_macro2::Group::new(proc_macro2::Delimiter::None, inner);
        let tokens = quote!(Vec<#group>);
        assert_eq!(canonical(tokens), "Vec<u8>");
    }
}
