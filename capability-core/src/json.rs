//! Canonical JSON (RFC 8785, JCS) of a `serde_json::Value`, for descriptor hashes.
//!
//! Keys are sorted explicitly, by UTF-16 code units as RFC 8785 says, while writing: the order
//! of a `serde_json::Map` is never relied on (any crate in a build can turn on serde_json's
//! `preserve_order`). Numbers are written as ECMAScript writes them (`1.5e-7`, `1e+21`, `100`);
//! integers that a double cannot hold exactly are written exactly rather than rounded.

use serde_json::Value;

/// The canonical JSON text of a value.
pub fn to_canonical_json(value: &Value) -> String {
    let mut out = String::with_capacity(1024);
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => capability_rules::write_json_string(out, text),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // serde_json's default map is sorted by key bytes, which is the canonical order
            // whenever byte order and UTF-16 order agree: write it as it comes, checking the
            // order on the way. If a key is out of order (`preserve_order` is on somewhere in
            // the build) or its byte and UTF-16 orders may differ, undo and sort a copy.
            let mark = out.len();
            out.push('{');
            let mut previous: Option<&str> = None;
            let mut in_order = true;
            for (i, (key, item)) in map.iter().enumerate() {
                if previous.is_some_and(|p| p >= key.as_str()) || !byte_order_is_utf16_order(key) {
                    in_order = false;
                    break;
                }
                previous = Some(key);
                if i > 0 {
                    out.push(',');
                }
                capability_rules::write_json_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            if in_order {
                out.push('}');
            } else {
                out.truncate(mark);
                let mut entries: Vec<(&str, &Value)> =
                    map.iter().map(|(k, v)| (k.as_str(), v)).collect();
                write_object(out, &mut entries);
            }
        }
    }
}

/// Writes `"key":value`.
pub fn write_entry(out: &mut String, key: &str, value: &Value) {
    capability_rules::write_json_string(out, key);
    out.push(':');
    write_value(out, value);
}

/// Writes an object from its entries, sorting them by key first.
fn write_object(out: &mut String, entries: &mut [(&str, &Value)]) {
    if entries.iter().all(|(k, _)| byte_order_is_utf16_order(k)) {
        entries.sort_unstable_by_key(|(a, _)| *a);
    } else {
        entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    }
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
    fn strings_escape_only_what_rfc_8785_escapes() {
        let value = json!("\u{1}\"\\/é\u{2028}");
        assert_eq!(to_canonical_json(&value), "\"\\u0001\\\"\\\\/é\u{2028}\"");
    }
}
