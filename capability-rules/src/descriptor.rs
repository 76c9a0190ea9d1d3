//! The canonical descriptor of a tool and its SHA-256 hash.
//!
//! The descriptor is canonical JSON: keys in byte order, no white space, strings escaped the way
//! RFC 8785 escapes them. It is written by hand here (no serde) so that nothing a user's build
//! turns on, such as serde_json's `preserve_order`, can change a hash.
//!
//! Why a second JSON writer, when `capability_core::json` is the canonical writer of a
//! `serde_json::Value`: the derive macro hashes descriptors at compile time, so this crate is a
//! dependency of the proc-macro crate, and everything it depends on is compiled into every build
//! of the macros. It stays on `sha2` alone, with no `serde_json`, and it cannot use
//! `capability-core`, which depends on it. So this writer knows only the descriptor's fixed shape
//! (strings, booleans, `null`, arrays and the [`Shape`] tree), with its keys written in order by
//! hand (all ASCII, where byte order is RFC 8785's UTF-16 order). The string escaping is shared:
//! `capability_core::json` writes every string with [`write_json_string`], and a test there
//! checks that a descriptor's JSON is its own canonical form.

use sha2::{Digest, Sha256};

/// The shape of a tool's input type, with field names and types as written.
///
/// Types are given as canonical token text (see the derive crate): white space and comments in
/// the source do not change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A unit struct, or a unit enum variant.
    Unit,
    /// Named fields: `(name, type)`.
    Named(Vec<(String, String)>),
    /// Positional fields: their types.
    Tuple(Vec<String>),
    /// An enum: `(variant name, variant shape)`.
    Enum(Vec<(String, Shape)>),
    /// A tool built at run time, whose input is not a Rust type.
    Dynamic,
}

/// Everything the descriptor hash covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor<'a> {
    /// The tool name.
    pub name: &'a str,
    /// The title, if any.
    pub title: Option<&'a str>,
    /// The description, if any.
    pub description: Option<&'a str>,
    /// The provider, if any.
    pub provider: Option<&'a str>,
    /// The hints after defaults.
    pub flags: crate::Flags,
    /// The scopes, sorted and de-duplicated.
    pub scopes: &'a [String],
    /// The generic parameters as written (canonical token text), empty when there are none.
    pub generics: &'a str,
    /// The input shape.
    pub input: &'a Shape,
    /// The output type as written, if any.
    pub output: Option<&'a str>,
    /// The explicit version, if any.
    pub version: Option<&'a str>,
    /// Input fields whose values the audit trail stores only as digests, sorted. Left out of
    /// the canonical JSON when empty, so tools without any keep their hash.
    pub sensitive: &'a [String],
}

impl Descriptor<'_> {
    /// The canonical JSON text of the descriptor.
    pub fn canonical_json(&self) -> String {
        let mut out = String::with_capacity(256);
        let flags = self.flags;
        // Keys are written in byte order.
        out.push('{');
        key(&mut out, "description");
        opt_string(&mut out, self.description);
        key(&mut out, "destructive");
        boolean(&mut out, flags.destructive);
        key(&mut out, "generics");
        string(&mut out, self.generics);
        key(&mut out, "idempotent");
        boolean(&mut out, flags.idempotent);
        key(&mut out, "input");
        shape(&mut out, self.input);
        key(&mut out, "name");
        string(&mut out, self.name);
        key(&mut out, "open_world");
        boolean(&mut out, flags.open_world);
        key(&mut out, "output");
        opt_string(&mut out, self.output);
        key(&mut out, "provider");
        opt_string(&mut out, self.provider);
        key(&mut out, "read_only");
        boolean(&mut out, flags.read_only);
        key(&mut out, "scopes");
        out.push('[');
        for (i, scope) in self.scopes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            string(&mut out, scope);
        }
        out.push(']');
        if !self.sensitive.is_empty() {
            key(&mut out, "sensitive");
            out.push('[');
            for (i, field) in self.sensitive.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(&mut out, field);
            }
            out.push(']');
        }
        key(&mut out, "title");
        opt_string(&mut out, self.title);
        key(&mut out, "version");
        opt_string(&mut out, self.version);
        out.push('}');
        out
    }

    /// The SHA-256 of [`canonical_json`](Self::canonical_json), as 64 lowercase hex digits.
    pub fn hash_hex(&self) -> String {
        sha256_hex(self.canonical_json().as_bytes())
    }
}

/// SHA-256 of some bytes, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex::encode(&Sha256::digest(bytes))
}

fn key(out: &mut String, name: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    string(out, name);
    out.push(':');
}

fn boolean(out: &mut String, value: bool) {
    out.push_str(if value { "true" } else { "false" });
}

fn opt_string(out: &mut String, value: Option<&str>) {
    match value {
        Some(value) => string(out, value),
        None => out.push_str("null"),
    }
}

/// Writes a JSON string as RFC 8785 does: only `"`, `\` and control characters are escaped.
pub fn write_json_string(out: &mut String, value: &str) {
    string(out, value);
}

fn string(out: &mut String, value: &str) {
    out.reserve(value.len() + 2);
    out.push('"');
    // Copy runs of bytes that need no escape in one go; escape the rest. Most text has nothing
    // to escape, so eight bytes at a time are checked at once (SWAR) and skipped when clean;
    // the last few, one by one.
    let bytes = value.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let word = <[u8; 8]>::try_from(chunk).unwrap_or([b' '; 8]);
            if !needs_escape(u64::from_le_bytes(word)) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => "",
            _ => {
                i += 1;
                continue;
            }
        };
        // `start..i` ends before an ASCII byte, so it is on a character boundary.
        out.push_str(&value[start..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            crate::hex::encode_to(out, &[b]);
        } else {
            out.push_str(escape);
        }
        i += 1;
        start = i;
    }
    out.push_str(&value[start..]);
    out.push('"');
}

/// Whether any of the eight bytes is a control character, `"` or `\\`.
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0;
    below_space
        || has_zero(word ^ (ONES * u64::from(b'"')))
        || has_zero(word ^ (ONES * u64::from(b'\\')))
}

fn shape(out: &mut String, shape: &Shape) {
    out.push('{');
    match shape {
        Shape::Unit => {
            key(out, "kind");
            string(out, "unit");
        }
        Shape::Dynamic => {
            key(out, "kind");
            string(out, "dynamic");
        }
        Shape::Named(fields) => {
            key(out, "fields");
            out.push('[');
            for (i, (name, ty)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('[');
                string(out, name);
                out.push(',');
                string(out, ty);
                out.push(']');
            }
            out.push(']');
            key(out, "kind");
            string(out, "named");
        }
        Shape::Tuple(types) => {
            key(out, "fields");
            out.push('[');
            for (i, ty) in types.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, ty);
            }
            out.push(']');
            key(out, "kind");
            string(out, "tuple");
        }
        Shape::Enum(variants) => {
            key(out, "kind");
            string(out, "enum");
            key(out, "variants");
            out.push('[');
            for (i, (name, variant)) in variants.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('[');
                string(out, name);
                out.push(',');
                self::shape(out, variant);
                out.push(']');
            }
            out.push(']');
        }
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Flags;

    fn flags() -> Flags {
        Flags::resolve(Some(true), None, Some(true), Some(false)).unwrap()
    }

    #[test]
    fn canonical_json_is_sorted_and_escaped() {
        let scopes = vec!["metrics:read".to_owned()];
        let input = Shape::Named(vec![("query".into(), "String".into())]);
        let d = Descriptor {
            name: "prom_query",
            title: None,
            description: Some("Run a \"PromQL\" query.\n"),
            provider: None,
            flags: flags(),
            scopes: &scopes,
            generics: "",
            input: &input,
            output: None,
            version: None,
            sensitive: &[],
        };
        assert_eq!(
            d.canonical_json(),
            r#"{"description":"Run a \"PromQL\" query.\n","destructive":false,"generics":"","idempotent":true,"input":{"fields":[["query","String"]],"kind":"named"},"name":"prom_query","open_world":false,"output":null,"provider":null,"read_only":true,"scopes":["metrics:read"],"title":null,"version":null}"#
        );
        let hash = d.hash_hex();
        assert_eq!(hash.len(), 64);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
    }

    #[test]
    fn control_characters_use_lowercase_unicode_escapes() {
        let mut out = String::new();
        string(&mut out, "a\u{1}\u{1f}");
        assert_eq!(out, r#""a\u0001\u001f""#);
    }

    #[test]
    fn escaping_finds_every_special_byte_at_every_offset() {
        for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', '\t'] {
            for offset in 0..20 {
                let mut text: String = "a".repeat(offset);
                text.push(special);
                text.push_str("é€𝄞 tail");
                let mut out = String::new();
                string(&mut out, &text);
                let expected = match special {
                    '"' => "\\\"".to_owned(),
                    '\\' => "\\\\".to_owned(),
                    '\n' => "\\n".to_owned(),
                    '\t' => "\\t".to_owned(),
                    c => format!("\\u{:04x}", c as u32),
                };
                assert_eq!(
                    out,
                    format!("\"{}{expected}é€𝄞 tail\"", "a".repeat(offset)),
                    "{special:?} at {offset}"
                );
            }
        }
        // Short text, and the last bytes of any: a special byte at every offset of every
        // length up to 17, and text without one, is written as one character at a time would.
        let reference = |text: &str| {
            let mut out = String::from("\"");
            for c in text.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        for len in 0..18 {
            for special in ['"', '\\', '\n', '\u{0}', '\u{1f}', 'é'] {
                for offset in 0..len {
                    let mut text: String = "abcdefghijklmnopq".chars().take(len).collect();
                    text.replace_range(offset..=offset, special.encode_utf8(&mut [0; 4]));
                    let mut out = String::new();
                    string(&mut out, &text);
                    assert_eq!(out, reference(&text), "{special:?} at {offset} of {len}");
                }
            }
            let text: String = "abcdefghijklmnopq".chars().take(len).collect();
            let mut out = String::new();
            string(&mut out, &text);
            assert_eq!(out, format!("\"{text}\""));
        }
        // Bytes at or above 0x80 are never escaped, and the quick check passes clean text.
        assert!(!needs_escape(u64::from_le_bytes(*b"plain tx")));
        assert!(needs_escape(u64::from_le_bytes(*b"a\"bcdefg")));
        assert!(needs_escape(u64::from_le_bytes(*b"abcdefg\x1f")));
        assert!(!needs_escape(u64::from_le_bytes([
            0xc3, 0xa9, 0xe2, 0x82, 0xac, 0x20, 0x7e, 0x7f
        ])));
    }

    #[test]
    fn enum_shapes_nest() {
        let mut out = String::new();
        shape(
            &mut out,
            &Shape::Enum(vec![
                ("A".into(), Shape::Unit),
                ("B".into(), Shape::Tuple(vec!["u8".into()])),
            ]),
        );
        assert_eq!(
            out,
            r#"{"kind":"enum","variants":[["A",{"kind":"unit"}],["B",{"fields":["u8"],"kind":"tuple"}]]}"#
        );
    }
}
