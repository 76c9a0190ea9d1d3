//! The one escaping function for text a server or an agent wrote, before the command prints it.
//!
//! A server names itself, its tools and their descriptions; an agent writes a proposal's
//! rationale and arguments; a record keeps a tool's error. Printed raw, such text drives the
//! terminal of the person reading it: escape sequences erase lines or set the window's title, a
//! right-to-left override reverses what follows, invisible characters hide text or make two
//! names look alike. [`escape`] writes every such character as `\u{..}` (and `\` as `\\`, so an
//! escape cannot be faked), for tables and messages; [`JsonEscaped`] does the same inside JSON
//! strings (`\uXXXX`), so `--json` output is still the same JSON value.

use std::io;

/// Whether a terminal could hide, move, reorder or mimic with `c`: C0 and C1 controls (and
/// DEL, newlines included), the bidirectional controls (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069), the line and paragraph separators (U+2028, U+2029), and
/// the zero-width and invisible characters (U+00AD, U+034F, U+115F, U+1160, U+17B4, U+17B5,
/// U+180E, U+200B–U+200D, U+2060–U+2064, U+3164, U+FE00–U+FE0F, U+FEFF, U+FFA0,
/// U+FFF9–U+FFFB, U+1D173–U+1D17A, U+E0000–U+E007F, U+E0100–U+E01EF).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E007F}'
                | '\u{E0100}'..='\u{E01EF}'
        )
}

/// `text` with every [hidden](is_hidden) character written as `\u{..}` and `\` as `\\`.
///
/// ```
/// use capability_gateway::escape::escape;
///
/// assert_eq!(escape("memory"), "memory");
/// assert_eq!(escape("a\u{1b}[2Kb"), r"a\u{1b}[2Kb");
/// assert_eq!(escape("evil\u{202e}gnp.exe"), r"evil\u{202e}gnp.exe");
/// assert_eq!(escape("tag\u{e0041}"), r"tag\u{e0041}");
/// assert_eq!(escape(r"a\u{41}"), r"a\\u{41}", "an escape cannot be faked");
/// ```
pub fn escape(text: &str) -> String {
    if !text.chars().any(|c| c == '\\' || is_hidden(c)) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// [`escape`] for each line of `text`, the line breaks kept: for messages of several lines
/// (a server's standard error, quoted under an error).
///
/// ```
/// use capability_gateway::escape::escape_lines;
///
/// assert_eq!(escape_lines("first\nsecond \u{1b}]0;title\u{7}"), "first\nsecond \\u{1b}]0;title\\u{7}");
/// ```
pub fn escape_lines(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// `value` as one line of JSON, every [hidden](is_hidden) character of its strings written as
/// a JSON escape: the same JSON value, safe on a terminal (a `--json` output of one object a
/// line; [`escape`] would make it JSON no more).
///
/// ```
/// use capability_gateway::escape::json_line;
///
/// let value = serde_json::json!({"body": "{\"a\": 1}\n", "name": "a\u{202e}b"});
/// let line = json_line(&value);
/// assert_eq!(line, r#"{"body":"{\"a\": 1}\n","name":"a\u202eb"}"#);
/// assert_eq!(serde_json::from_str::<serde_json::Value>(&line)?, value);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn json_line(value: &serde_json::Value) -> String {
    // Compact JSON has nothing outside its strings a terminal could hide, and serde_json
    // escapes the controls inside them: what is left are the other hidden characters.
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A `serde_json` formatter (pretty, two spaces) that writes every [hidden](is_hidden)
/// character of a string as a JSON escape (`\u202e`, surrogate pairs above U+FFFF): the same
/// JSON value, safe on a terminal.
///
/// ```
/// use capability_gateway::escape::JsonEscaped;
/// use serde::Serialize;
///
/// let mut out = Vec::new();
/// let mut ser = serde_json::Serializer::with_formatter(&mut out, JsonEscaped::new());
/// serde_json::json!({"name": "a\u{202e}b\u{e0041}"}).serialize(&mut ser)?;
/// let text = String::from_utf8(out)?;
/// assert!(text.contains(r"a\u202eb\udb40\udc41"), "{text}");
/// let back: serde_json::Value = serde_json::from_str(&text)?;
/// assert_eq!(back["name"], "a\u{202e}b\u{e0041}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JsonEscaped(serde_json::ser::PrettyFormatter<'static>);

impl JsonEscaped {
    /// The formatter.
    pub fn new() -> Self {
        JsonEscaped(serde_json::ser::PrettyFormatter::new())
    }
}

impl Default for JsonEscaped {
    fn default() -> Self {
        JsonEscaped::new()
    }
}

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $name<W: ?Sized + io::Write>(&mut self, writer: &mut W $(, $arg: $ty)*) -> io::Result<()> {
            self.0.$name(writer $(, $arg)*)
        }
    )*};
}

impl serde_json::ser::Formatter for JsonEscaped {
    delegate!(
        begin_array(),
        end_array(),
        begin_array_value(first: bool),
        end_array_value(),
        begin_object(),
        end_object(),
        begin_object_key(first: bool),
        begin_object_value(),
        end_object_value(),
    );

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if !is_hidden(c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_the_issue_names_is_escaped() {
        for c in [
            '\u{1b}',
            '\u{7}',
            '\u{7f}',
            '\u{85}',
            '\u{9b}',
            '\u{202e}',
            '\u{061c}',
            '\u{200e}',
            '\u{200f}',
            '\u{202a}',
            '\u{2066}',
            '\u{2069}',
            '\u{2028}',
            '\u{2029}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{00ad}',
            '\u{3164}',
            '\u{e0000}',
            '\u{e0041}',
            '\u{e007f}',
        ] {
            let text = format!("a{c}b");
            let escaped = escape(&text);
            assert!(!escaped.contains(c), "{:x} left raw", u32::from(c));
            assert!(escaped.contains("\\u{"), "{:x}", u32::from(c));
        }
        for fine in ["plain", "é ü 日本 😀", "tab-free", "k8s/list_pods"] {
            assert_eq!(escape(fine), fine);
        }
    }
}
