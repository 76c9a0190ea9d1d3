//! Canonical JSON (RFC 8785, JCS) of a `serde_json::Value`, for descriptor hashes.
//!
//! This is the one writer of canonical JSON for `serde_json` values: MCP descriptor hashes,
//! lockfile parts, audit records and digests, approvals all go through it. (The derive macro's
//! descriptor has its own small writer in `capability-rules`, which must not depend on
//! `serde_json`; both escape strings with the same `capability_rules::write_json_string`.)
//!
//! Keys are sorted explicitly, by UTF-16 code units as RFC 8785 says, while writing: the order
//! of a `serde_json::Map` is never relied on (any crate in a build can turn on serde_json's
//! `preserve_order`). Numbers are written as ECMAScript writes them (`1.5e-7`, `1e+21`, `100`);
//! integers that a double cannot hold exactly are written exactly rather than rounded.
//!
//! The writer walks the value with a stack of its own, not by recursion, so a value nested
//! however deep (built in code: parsing stops at [`MAX_DEPTH`]) cannot overflow the thread's
//! stack. [`depth`] measures a value the same way.

use serde_json::Value;

mod strict;

pub use strict::{DUPLICATE_KEY, no_duplicate_keys};

/// How deep the values that come from outside may nest: serde_json's own parsing limit. The
/// audited dispatch refuses an input deeper than this (its record says why) rather than walk
/// it with the recursive code of other crates.
pub const MAX_DEPTH: usize = 128;

/// How deep `value` nests: 0 for a scalar, 1 for `[]` or `{}`, one more per level. Walks the
/// value without recursion, and stops counting at `limit + 1` (so a caller checking against a
/// limit never walks a huge value whole).
///
/// ```
/// use capability::json::depth;
/// use serde_json::json;
///
/// assert_eq!(depth(&json!(1), 10), 0);
/// assert_eq!(depth(&json!({"a": [1, {"b": []}]}), 10), 4);
/// assert_eq!(depth(&json!([[[[]]]]), 2), 3, "stops at limit + 1");
/// ```
pub fn depth(value: &Value, limit: usize) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        let level = level + 1;
        deepest = deepest.max(level);
        if deepest > limit {
            return deepest;
        }
        stack.extend(children.map(|child| (child, level)));
    }
    deepest
}

/// The canonical JSON text of a value.
pub fn to_canonical_json(value: &Value) -> String {
    let mut out = String::with_capacity(1024);
    write_value(&mut out, value);
    out
}

/// Appends the canonical JSON text of a value to `out`: [`to_canonical_json`] into a buffer the
/// caller keeps, for a hot path that writes many values.
///
/// ```
/// use capability::json::write_canonical_json;
/// use serde_json::json;
///
/// let mut out = String::from("input=");
/// write_canonical_json(&mut out, &json!({"b": 1, "a": [true, null]}));
/// assert_eq!(out, r#"input={"a":[true,null],"b":1}"#);
/// ```
pub fn write_canonical_json(out: &mut String, value: &Value) {
    write_value(out, value);
}

/// What is left to write of an array or an object being written.
enum Frame<'a> {
    Array(std::slice::Iter<'a, Value>, bool),
    Object(std::vec::IntoIter<(&'a str, &'a Value)>, bool),
}

/// Writes `value` canonically, with a stack of frames instead of recursion.
fn write_value(out: &mut String, value: &Value) {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Null => out.push_str("null"),
                Value::Bool(true) => out.push_str("true"),
                Value::Bool(false) => out.push_str("false"),
                Value::Number(number) => write_number(out, number),
                Value::String(text) => capability_rules::write_json_string(out, text),
                Value::Array(items) => {
                    out.push('[');
                    stack.push(Frame::Array(items.iter(), true));
                }
                Value::Object(map) => {
                    out.push('{');
                    let mut entries: Vec<(&str, &Value)> =
                        map.iter().map(|(k, v)| (k.as_str(), v)).collect();
                    // serde_json's default map is sorted by key bytes, which is the canonical
                    // order whenever byte order and UTF-16 order agree; otherwise (or with
                    // `preserve_order` on somewhere in the build) sort.
                    let sorted = entries.windows(2).all(|w| w[0].0 < w[1].0)
                        && entries.iter().all(|(k, _)| byte_order_is_utf16_order(k));
                    if !sorted {
                        sort_keys(&mut entries, false);
                    }
                    stack.push(Frame::Object(entries.into_iter(), true));
                }
            }
        }
        let Some(frame) = stack.last_mut() else {
            return;
        };
        match frame {
            Frame::Array(items, first) => match items.next() {
                Some(item) => {
                    if !std::mem::replace(first, false) {
                        out.push(',');
                    }
                    next = Some(item);
                }
                None => {
                    out.push(']');
                    stack.pop();
                }
            },
            Frame::Object(entries, first) => match entries.next() {
                Some((key, item)) => {
                    if !std::mem::replace(first, false) {
                        out.push(',');
                    }
                    capability_rules::write_json_string(out, key);
                    out.push(':');
                    next = Some(item);
                }
                None => {
                    out.push('}');
                    stack.pop();
                }
            },
        }
    }
}

/// The canonical JSON text of the object made of these entries, in any order (a repeated key is
/// written once, with its first value).
///
/// For an object made of some fields of another without copying them, as the MCP descriptor
/// hash does:
///
/// ```
/// use capability::json::{to_canonical_json, to_canonical_json_object};
/// use serde_json::json;
///
/// let tool = json!({"name": "echo", "_meta": {"x": 1}, "description": "Echo."});
/// let covered = ["name", "description"].map(|key| (key, &tool[key]));
/// assert_eq!(to_canonical_json_object(covered), r#"{"description":"Echo.","name":"echo"}"#);
/// assert_eq!(
///     to_canonical_json_object(covered),
///     to_canonical_json(&json!({"name": "echo", "description": "Echo."})),
/// );
/// ```
pub fn to_canonical_json_object<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> String {
    let mut entries: Vec<(&str, &Value)> = entries.into_iter().collect();
    // A stable sort keeps repeated keys in their order, so `dedup` keeps the first.
    sort_keys(&mut entries, true);
    entries.dedup_by(|(a, _), (b, _)| a == b);
    // Room for a typical MCP tool descriptor (schemas included) without growing.
    let mut out = String::with_capacity(4096);
    write_sorted(&mut out, &entries);
    out
}

/// Sorts entries by key in RFC 8785 order (UTF-16 code units); `stable` keeps entries with the
/// same key in their order.
fn sort_keys(entries: &mut [(&str, &Value)], stable: bool) {
    let utf16 = !entries.iter().all(|(k, _)| byte_order_is_utf16_order(k));
    let order = |(a, _): &(&str, &Value), (b, _): &(&str, &Value)| {
        if utf16 {
            a.encode_utf16().cmp(b.encode_utf16())
        } else {
            a.cmp(b)
        }
    };
    if stable {
        entries.sort_by(order);
    } else {
        entries.sort_unstable_by(order);
    }
}

/// Writes an object from entries already in canonical order.
fn write_sorted(out: &mut String, entries: &[(&str, &Value)]) {
    out.push('{');
    for (i, (key, item)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        capability_rules::write_json_string(out, key);
        out.push(':');
        write_value(out, item);
    }
    out.push('}');
}

/// Byte (UTF-8) order and UTF-16 order agree on keys without characters at or above U+E000
/// (those above U+FFFF become surrogates, which sort below U+E000..U+FFFF in UTF-16).
fn byte_order_is_utf16_order(key: &str) -> bool {
    key.is_ascii() || key.chars().all(|c| (c as u32) < 0xE000)
}

fn write_number(out: &mut String, number: &serde_json::Number) {
    use std::fmt::Write;
    if let Some(n) = number.as_u64() {
        let _ = write!(out, "{n}");
    } else if let Some(n) = number.as_i64() {
        let _ = write!(out, "{n}");
    } else if let Some(f) = number.as_f64() {
        write_double(out, f);
    } else {
        // Arbitrary-precision numbers are not enabled; this is unreachable in practice.
        let _ = write!(out, "{number}");
    }
}

/// ECMAScript's Number::toString for a finite double (JSON has no NaN or infinity).
fn write_double(out: &mut String, f: f64) {
    if f == 0.0 {
        out.push('0');
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    // `{:e}` gives the shortest digits that round-trip, as ECMAScript requires.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exponent + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_white_space_removed() {
        let value = json!({ "b": [1, {"z": null, "a": true}], "a": "x" });
        assert_eq!(
            to_canonical_json(&value),
            r#"{"a":"x","b":[1,{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // RFC 8785 3.2.3: U+10000 (a surrogate pair, 0xD800...) sorts before U+FB33.
        let value = json!({ "\u{fb33}": 1, "\u{10000}": 2, "a": 3 });
        assert_eq!(
            to_canonical_json(&value),
            "{\"a\":3,\"\u{10000}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // Inputs as JSON text, several from RFC 8785 appendix B.
        let cases = [
            ("100", "100"),
            ("-7", "-7"),
            ("1.5", "1.5"),
            ("100.0", "100"),
            ("0.000001", "0.000001"),
            ("1.5e-7", "1.5e-7"),
            ("1e21", "1e+21"),
            ("123456789012345680000.0", "123456789012345680000"),
            ("-0.0", "0"),
            ("333333333.33333329", "333333333.3333333"),
            ("1E30", "1e+30"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("0.000000000000000000000000001", "1e-27"),
        ];
        for (text, want) in cases {
            let value: Value = serde_json::from_str(text).expect("valid JSON");
            assert_eq!(to_canonical_json(&value), want, "{text}");
        }
    }

    #[test]
    fn an_object_from_entries_is_sorted_and_keeps_the_first_of_a_repeated_key() {
        let (one, two, three) = (json!(1), json!(2), json!(3));
        let entries = [
            ("\u{fb33}", &one),
            ("b", &two),
            ("\u{10000}", &three),
            ("b", &one),
        ];
        assert_eq!(
            to_canonical_json_object(entries),
            "{\"b\":2,\"\u{10000}\":3,\"\u{fb33}\":1}"
        );
        assert_eq!(to_canonical_json_object([]), "{}");
        let tool = json!({"z": [1, {"y": true, "x": null}], "a": "é\u{1}"});
        let map = tool.as_object().expect("an object");
        assert_eq!(
            to_canonical_json_object(map.iter().map(|(k, v)| (k.as_str(), v))),
            to_canonical_json(&tool)
        );
    }

    /// The derive macro's descriptor is written by `capability-rules`, not here: the two
    /// writers must agree, or a descriptor would not be canonical JSON.
    #[test]
    fn a_descriptor_from_capability_rules_is_already_canonical() {
        use capability_rules::{Descriptor, Flags, Shape};
        let scopes = vec!["a:read".to_owned(), "\u{e9}\u{1f}:read".to_owned()];
        let sensitive = vec!["token".to_owned()];
        let input = Shape::Enum(vec![
            ("Unit".into(), Shape::Unit),
            (
                "Named".into(),
                Shape::Named(vec![("q\"uote".into(), "Vec<\\u8>".into())]),
            ),
            (
                "Tuple".into(),
                Shape::Tuple(vec!["\u{10000}\u{fb33}".into()]),
            ),
        ]);
        let descriptor = Descriptor {
            name: "probe",
            title: Some("Tab\there, new\nline, \u{7f} and \u{2028}"),
            description: None,
            provider: Some("k8s"),
            flags: Flags::resolve(Some(true), None, None, None).expect("valid"),
            scopes: &scopes,
            generics: "<T: Clone>",
            input: &input,
            output: Some("Result<(), String>"),
            version: None,
            sensitive: &sensitive,
        };
        let written = descriptor.canonical_json();
        let value: Value = serde_json::from_str(&written).expect("valid JSON");
        assert_eq!(to_canonical_json(&value), written);
    }

    #[test]
    fn a_value_nested_deeper_than_any_stack_is_written_and_measured() {
        // Built in code (parsing stops at 128 levels): 200,000 arrays, one inside the other.
        let levels = 200_000;
        let mut value = json!(1);
        for _ in 0..levels {
            value = Value::Array(vec![value]);
        }
        let text = to_canonical_json(&value);
        assert_eq!(text.len(), 2 * levels + 1);
        assert!(text.starts_with("[[[") && text.contains("[1]") && text.ends_with("]]]"));
        assert_eq!(depth(&value, MAX_DEPTH), MAX_DEPTH + 1);
        assert_eq!(depth(&value, usize::MAX), levels);
        // serde_json drops a value by recursion: take it apart level by level.
        let mut rest = value;
        while let Value::Array(mut items) = rest {
            rest = items.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn strings_escape_only_what_rfc_8785_escapes() {
        let value = json!("\u{1}\"\\/é\u{2028}");
        assert_eq!(to_canonical_json(&value), "\"\\u0001\\\"\\\\/é\u{2028}\"");
    }
}
