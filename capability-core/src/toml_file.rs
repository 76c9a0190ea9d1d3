//! TOML files that people write (policies, lockfiles): loading them, and the one error type that
//! says where a file is wrong, with its line and column.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;

/// A TOML file that could not be loaded: which file, where in it, and why.
///
/// Displayed as `file:line:column: message`, the form editors and terminals link to; when the
/// file could not be read at all, as `file: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TomlError {
    file: Option<String>,
    what: &'static str,
    line: usize,
    column: usize,
    message: String,
}

impl TomlError {
    /// An error at a byte offset of `text`. `what` names the kind of file (`policy`,
    /// `lockfile`) for messages about a file without a name.
    pub fn at(what: &'static str, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = position(text, offset);
        TomlError {
            file: None,
            what,
            line,
            column,
            message: message.into(),
        }
    }

    /// An error about the file as a whole (it could not be read): no line or column.
    pub fn whole(what: &'static str, file: Option<String>, message: impl Into<String>) -> Self {
        TomlError {
            file,
            what,
            line: 0,
            column: 0,
            message: message.into(),
        }
    }

    /// The same error, naming the file it came from.
    pub fn in_file(mut self, path: &Path) -> Self {
        self.file = Some(path.display().to_string());
        self
    }

    /// The file, when the text came from one.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// The line (from 1), or 0 when the file could not be read.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column (from 1, in characters), or 0 when the file could not be read.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TomlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.as_deref().unwrap_or(self.what);
        if self.line == 0 {
            write!(f, "{file}: {}", self.message)
        } else {
            write!(f, "{file}:{}:{}: {}", self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for TomlError {}

/// Parses TOML text into `T`; a syntax error, an unknown key or a bad value becomes a
/// [`TomlError`] at its position.
pub fn parse<T: DeserializeOwned>(what: &'static str, text: &str) -> Result<T, TomlError> {
    toml::from_str(text).map_err(|error| {
        let at = error.span().map_or(0, |span| span.start);
        TomlError::at(what, text, at, error.message().trim_end())
    })
}

/// Reads a file's text; `Ok(None)` when it does not exist and `missing_ok` is set.
pub fn read(
    what: &'static str,
    path: &Path,
    missing_ok: bool,
) -> Result<Option<String>, TomlError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if missing_ok && error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(TomlError::whole(
            what,
            Some(path.display().to_string()),
            format!("cannot read the {what}: {error}"),
        )),
    }
}

/// The line and column (both from 1, the column in characters) of a byte offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_positions_are_lines_and_columns() {
        let text = "a = 1\nbb = 2\n  ccc";
        let e = TomlError::at("policy", text, text.find("ccc").unwrap(), "x");
        assert_eq!((e.line(), e.column()), (3, 3));
        assert_eq!(e.to_string(), "policy:3:3: x");
        let e = TomlError::at("policy", text, 0, "x").in_file(Path::new("p.toml"));
        assert_eq!((e.line(), e.column()), (1, 1));
        assert_eq!(e.to_string(), "p.toml:1:1: x");
    }
}
