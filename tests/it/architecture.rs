//! Architecture rules for the workspace, checked by reading the source tree.
//!
//! The project's design rules, each a test that fails with a message naming the offenders:
//!
//! 1. **No import circles inside a crate.** A crate's top-level modules, and the submodules of
//!    each directory module, must depend on each other without circles: when `a` uses
//!    `crate::b`, nothing in `b` may lead back to `a`. Modules in a circle can only be
//!    understood, tested and moved together.
//! 2. **No library source file over 500 lines** (its `#[cfg(test)] mod tests` not counted), so
//!    every file can be read in one sitting.
//! 3. **`capability-core` is at most 35% of the library code** (about a third), so the core
//!    stays small and the rest lives in crates that are reviewed and built on their own.
//! 4. **No library crate but the engine enables tokio's `process` feature**: spawning and
//!    supervising processes is `capability-gateway`'s job (one spawn-and-stop helper), never
//!    another library's.
//! 5. **Each file ends with its tests**: no code after a `#[cfg(test)] mod tests { ... }`,
//!    where a reader (and rule 1, before) would not look for it.
//! 6. **The command line is thin**: `capability-cli/src` under 4,000 lines, the engine in
//!    `capability-gateway`, which has no `proxy` module and does not depend on the command.
//!
//! Crates and modules are discovered from the file system (the workspace members in the root
//! `Cargo.toml`, each crate's `src/`, the `mod` declarations and `use` re-exports of
//! `lib.rs`, `main.rs` and `mod.rs`), so the checks follow the crates as they are reorganised.
//! The scanning is plain text, no `syn`; the tests in `mod checker` check the scanner itself.
//! `cargo test --test it architecture:: -- --nocapture` also prints the per-crate line counts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// Longest library source file allowed, in non-test lines.
const MAX_FILE_LINES: usize = 500;
/// The crate whose share of the library code is capped.
const CORE_CRATE: &str = "capability-core";
/// Its largest allowed share, in percent of the non-test lines of all library crates.
const MAX_CORE_PERCENT: usize = 35;
/// Workspace members that are not library crates.
const NOT_LIBRARIES: &[&str] = &["benches", "capability-testkit", "tests/toolkit"];
/// Stop listing circles of one module level after this many.
const MAX_CYCLES: usize = 100;

// ---------------------------------------------------------------------------------------------
// The three rules.
// ---------------------------------------------------------------------------------------------

#[test]
fn no_import_circle_inside_any_crate() {
    let mut report = String::new();
    for krate in library_crates() {
        for line in import_cycles(&krate.name, &krate.files) {
            report.push_str(&line);
            report.push('\n');
        }
    }
    assert!(
        report.is_empty(),
        "\nImport circles between modules of one crate. Module A depends on module B when a file \
         of A names `crate::B...` (or `super::`/`self::` paths to it, or a name that lib.rs or \
         mod.rs re-exports from B). Break each circle, e.g. by moving what both need into a \
         module they both depend on:\n\n{report}"
    );
}

#[test]
fn no_library_file_over_500_lines() {
    let mut offenders = Vec::new();
    for krate in library_crates() {
        for file in &krate.files {
            if file.lines > MAX_FILE_LINES {
                offenders.push(format!("    {}: {} lines", file.path, file.lines));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "\n{} library source file(s) over {MAX_FILE_LINES} lines (not counting the \
         `#[cfg(test)] mod tests` section). Split them:\n{}\n",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn core_is_at_most_35_percent_of_the_library_code() {
    let crates = library_crates();
    let counts: Vec<(&str, usize)> = crates
        .iter()
        .map(|krate| {
            (
                krate.name.as_str(),
                krate.files.iter().map(|f| f.lines).sum(),
            )
        })
        .collect();
    let total: usize = counts.iter().map(|(_, lines)| lines).sum();
    let core = counts
        .iter()
        .find(|(name, _)| *name == CORE_CRATE)
        .map(|(_, lines)| *lines);
    let Some(core) = core else {
        panic!("no library crate named `{CORE_CRATE}` among the workspace members");
    };

    let mut table = String::new();
    for (name, lines) in &counts {
        let _ = writeln!(
            table,
            "    {name:<20} {lines:>6} lines  {:>5.1}%",
            percent(*lines, total)
        );
    }
    let _ = writeln!(table, "    {:<20} {total:>6} lines", "total");

    assert!(
        core * 100 <= total * MAX_CORE_PERCENT,
        "\n{CORE_CRATE} has {core} of the {total} non-test lines of the library crates' src/ \
         ({:.1}%), more than {MAX_CORE_PERCENT}%. Move code out of it. Per crate:\n{table}",
        percent(core, total)
    );
    println!("Non-test lines of library code per crate:\n{table}");
}

/// The one crate that may spawn processes: the engine starts and supervises MCP servers.
const SPAWNS_PROCESSES: &str = "capability-gateway";

/// The command line's crate, and the most lines its `src/` may hold (tests included).
const COMMAND_LINE: (&str, usize) = ("capability-cli", 4000);

#[test]
fn every_file_ends_with_its_tests() {
    let offenders: Vec<String> = library_crates()
        .iter()
        .flat_map(|krate| &krate.files)
        .filter_map(|file| {
            file.code_after_tests
                .map(|line| format!("    {}:{line}", file.path))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "\ncode after a `#[cfg(test)] mod tests {{ ... }}` (move it above the tests):\n{}\n",
        offenders.join("\n")
    );
}

#[test]
fn the_command_line_is_thin_and_the_engine_knows_nothing_of_it() {
    let crates = library_crates();
    let (name, most) = COMMAND_LINE;
    let cli = crates
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no crate named `{name}`"));
    let lines: usize = cli.files.iter().map(|f| f.all_lines).sum();
    assert!(
        lines < most,
        "\n{name}/src has {lines} lines, {most} at most: the engine belongs in \
         `{SPAWNS_PROCESSES}`, the command keeps its arguments and its output"
    );
    let engine = crates
        .iter()
        .find(|k| k.name == SPAWNS_PROCESSES)
        .unwrap_or_else(|| panic!("no crate named `{SPAWNS_PROCESSES}`"));
    let proxy: Vec<&str> = engine
        .files
        .iter()
        .filter(|f| f.module.iter().any(|m| m == "proxy"))
        .map(|f| f.path.as_str())
        .collect();
    assert!(
        proxy.is_empty(),
        "the engine has a `proxy` module: {proxy:?}"
    );
    assert!(
        !toml_section(&engine.manifest, "dependencies").contains(name),
        "{SPAWNS_PROCESSES} depends on {name}"
    );
}

#[test]
fn no_library_crate_enables_tokio_process() {
    let crates = library_crates();
    let offenders: Vec<&str> = crates
        .iter()
        .filter(|krate| krate.name != SPAWNS_PROCESSES)
        .filter(|krate| {
            let dependencies = toml_section(&krate.manifest, "dependencies");
            dependencies
                .lines()
                .any(|line| line.trim_start().starts_with("tokio") && line.contains("\"process\""))
        })
        .map(|krate| krate.name.as_str())
        .collect();
    assert!(
        offenders.is_empty(),
        "\nthese library crates enable tokio's `process` feature in [dependencies]; spawning and \
         supervising processes belongs to `{SPAWNS_PROCESSES}`: {offenders:?}\n"
    );
}

/// The lines of one `[section]` of a TOML file (up to the next section header).
fn toml_section(toml: &str, section: &str) -> String {
    let header = format!("[{section}]");
    let mut inside = false;
    let mut lines = String::new();
    for line in toml.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == header;
        } else if inside {
            lines.push_str(line);
            lines.push('\n');
        }
    }
    lines
}

fn percent(part: usize, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

// ---------------------------------------------------------------------------------------------
// The workspace: library crates and their source files.
// ---------------------------------------------------------------------------------------------

/// A library crate and every `.rs` file under its `src/`.
struct Crate {
    name: String,
    /// The crate's `Cargo.toml`, as text.
    manifest: String,
    files: Vec<SourceFile>,
}

/// The workspace members of the root `Cargo.toml` (and the root package), minus [`NOT_LIBRARIES`].
fn library_crates() -> Vec<Crate> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = read(&root.join("Cargo.toml"));
    let excluded = toml_string_array(&manifest, "workspace", "exclude");

    let mut dirs = Vec::new();
    if toml_string_value(&manifest, "package", "name").is_some() {
        dirs.push(String::new());
    }
    for member in toml_string_array(&manifest, "workspace", "members") {
        dirs.extend(expand_member(root, &member));
    }
    dirs.retain(|dir| !NOT_LIBRARIES.contains(&dir.as_str()) && !excluded.contains(dir));

    dirs.iter()
        .map(|dir| {
            let crate_dir = root.join(dir);
            let manifest = read(&crate_dir.join("Cargo.toml"));
            let name = toml_string_value(&manifest, "package", "name")
                .unwrap_or_else(|| panic!("{dir}/Cargo.toml has no [package] name"));
            let src = crate_dir.join("src");
            let files = rust_files(&src)
                .into_iter()
                .map(|path| {
                    let in_src = path.strip_prefix(&src).expect("found under src/");
                    let shown = path.strip_prefix(root).expect("found under the workspace");
                    SourceFile::new(
                        &in_src.to_string_lossy(),
                        &shown.to_string_lossy(),
                        &read(&path),
                    )
                })
                .collect();
            Crate {
                name,
                manifest,
                files,
            }
        })
        .collect()
}

/// A member path, or for a `dir/*` glob every directory under `dir` with a `Cargo.toml`.
fn expand_member(root: &Path, member: &str) -> Vec<String> {
    let Some(parent) = member.strip_suffix("/*") else {
        return vec![member.to_string()];
    };
    let mut dirs: Vec<String> = fs::read_dir(root.join(parent))
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.path().join("Cargo.toml").is_file())
                .map(|entry| format!("{parent}/{}", entry.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The quoted strings of `key = [...]` in `[section]` (the array may span lines).
fn toml_string_array(toml: &str, section: &str, key: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut in_section = false;
    let mut in_array = false;
    for line in toml.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if in_array {
            items.extend(quoted_strings(line));
            in_array = !line.contains(']');
        } else if line.starts_with('[') {
            in_section = line == format!("[{section}]");
        } else if in_section && let Some(value) = toml_value(line, key) {
            items.extend(quoted_strings(value));
            in_array = !value.contains(']');
        }
    }
    items
}

/// The quoted string of `key = "..."` in `[section]`.
fn toml_string_value(toml: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == format!("[{section}]");
        } else if in_section && let Some(value) = toml_value(line, key) {
            return quoted_strings(value).into_iter().next();
        }
    }
    None
}

/// What follows `key =` on a line that sets `key`.
fn toml_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.strip_prefix(key)?.trim_start().strip_prefix('=')
}

fn quoted_strings(text: &str) -> Vec<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Source files, scanned as text.
// ---------------------------------------------------------------------------------------------

/// One `.rs` file under a crate's `src/`, without its `#[cfg(test)] mod tests` section.
struct SourceFile {
    /// The path shown in messages (relative to the workspace root).
    path: String,
    /// The module the file holds: `[]` for `lib.rs`/`main.rs`, `[x]` for `x.rs` or `x/mod.rs`,
    /// `[x, a]` for `x/a.rs`.
    module: Vec<String>,
    /// Whether it is a crate root, `src/lib.rs` or `src/main.rs`.
    is_root: bool,
    /// Non-test lines.
    lines: usize,
    /// Every line, tests included.
    all_lines: usize,
    /// The first line of code after the test module, if any (each file ends with its tests).
    code_after_tests: Option<usize>,
    /// The non-test code as tokens, comments and literals left out.
    tokens: Vec<Token>,
}

impl SourceFile {
    /// `in_src` is the path under `src/`, e.g. `x/mod.rs`.
    fn new(in_src: &str, path: &str, text: &str) -> SourceFile {
        let code = without_tests(text);
        let code = code.as_str();
        let mut module: Vec<String> = in_src
            .trim_end_matches(".rs")
            .split(['/', '\\'])
            .map(str::to_string)
            .collect();
        let is_root = matches!(in_src, "lib.rs" | "main.rs");
        if is_root || module.last().is_some_and(|last| last == "mod") {
            module.pop();
        }
        SourceFile {
            path: path.to_string(),
            module,
            is_root,
            lines: code.lines().count(),
            all_lines: text.lines().count(),
            code_after_tests: code_after_tests(text),
            tokens: tokenize(&blank_comments_and_literals(code)),
        }
    }
}

/// Where a file's `#[cfg(test)] mod tests { ... }` is: its first and last line (0-based,
/// inclusive), the braces matched on the code with comments and literals blanked.
fn tests_section(text: &str) -> Option<(usize, usize)> {
    let blanked = blank_comments_and_literals(text);
    let lines: Vec<&str> = blanked.lines().collect();
    let start = (0..lines.len()).find(|&i| {
        lines[i].trim() == "#[cfg(test)]"
            && lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty() && !l.starts_with("#["))
                .is_some_and(|l| is_tests_module(l) && !l.ends_with(';'))
    })?;
    let mut depth = 0usize;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if opened && depth == 0 {
            return Some((start, i));
        }
    }
    Some((start, lines.len().saturating_sub(1)))
}

/// The text without its `#[cfg(test)] mod tests { ... }` section (code after it is kept, and
/// scanned: a file cannot hide imports behind its tests).
fn without_tests(text: &str) -> String {
    let Some((start, end)) = tests_section(text) else {
        return text.to_owned();
    };
    text.split_inclusive('\n')
        .enumerate()
        .filter(|(i, _)| *i < start || *i > end)
        .map(|(_, line)| line)
        .collect()
}

/// The first line (1-based) of code after a file's test module, if there is any.
fn code_after_tests(text: &str) -> Option<usize> {
    let (_, end) = tests_section(text)?;
    let blanked = blank_comments_and_literals(text);
    blanked
        .lines()
        .enumerate()
        .skip(end + 1)
        .find(|(_, line)| !line.trim().is_empty())
        .map(|(i, _)| i + 1)
}

fn is_tests_module(line: &str) -> bool {
    let line = line.strip_prefix("pub ").unwrap_or(line);
    line.strip_prefix("mod tests")
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// The code with comments, string literals and char literals replaced by spaces (newlines kept,
/// so line numbers stay right): `crate::x` in a doc comment or a message is not an import.
fn blank_comments_and_literals(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        let end = match (chars[i], chars.get(i + 1)) {
            ('/', Some('/')) => Some(find_from(&chars, i, |c| c == '\n').unwrap_or(chars.len())),
            ('/', Some('*')) => Some(block_comment_end(&chars, i)),
            ('"', _) => Some(string_end(&chars, i + 1)),
            ('r', _) if raw_string_may_start(&chars, i) => raw_string_end(&chars, i),
            ('\'', _) => char_literal_end(&chars, i),
            _ => None,
        };
        match end {
            Some(end) => {
                out.extend(
                    chars[i..end]
                        .iter()
                        .map(|&c| if c == '\n' { '\n' } else { ' ' }),
                );
                i = end;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out
}

fn find_from(chars: &[char], start: usize, wanted: impl Fn(char) -> bool) -> Option<usize> {
    chars
        .get(start..)?
        .iter()
        .position(|&c| wanted(c))
        .map(|p| start + p)
}

/// End (exclusive) of a `/* ... */` comment starting at `start`; they nest.
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => {
                depth += 1;
                i += 2;
            }
            ('*', '/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    chars.len()
}

/// End (exclusive) of a `"..."` string whose contents start at `i`.
fn string_end(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// Whether the `r` at `i` starts a token (`r"`, `br"`), not the end of an identifier.
fn raw_string_may_start(chars: &[char], i: usize) -> bool {
    let before = |n: usize| i.checked_sub(n).map(|j| chars[j]);
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    !ident(before(1)) || (before(1) == Some('b') && !ident(before(2)))
}

/// End (exclusive) of a raw string `r#"..."#` starting at `start`, if one starts there.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let quote = find_from(chars, start + 1, |c| c != '#')?;
    if chars[quote] != '"' {
        return None;
    }
    let hashes = quote - start - 1;
    let mut i = quote + 1;
    while i < chars.len() {
        if chars[i] == '"'
            && chars[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}

/// End (exclusive) of a char literal (`'x'`, `'\n'`, `'\''`) at `start`; `None` for a lifetime.
fn char_literal_end(chars: &[char], start: usize) -> Option<usize> {
    if chars.get(start + 1) == Some(&'\\') {
        find_from(chars, start + 3, |c| c == '\'').map(|end| end + 1)
    } else if chars.get(start + 2) == Some(&'\'') {
        Some(start + 3)
    } else {
        None
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    /// `{`
    Open,
    /// `}`
    Close,
    Comma,
    Star,
    Punct(char),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

fn tokenize(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        i += 1;
        let tok = match c {
            '\n' => {
                line += 1;
                continue;
            }
            c if c.is_whitespace() => continue,
            c if c.is_alphanumeric() || c == '_' => {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                Tok::Ident(chars[start..i].iter().collect())
            }
            ':' if chars.get(i) == Some(&':') => {
                i += 1;
                Tok::PathSep
            }
            '{' => Tok::Open,
            '}' => Tok::Close,
            ',' => Tok::Comma,
            '*' => Tok::Star,
            c => Tok::Punct(c),
        };
        tokens.push(Token { tok, line });
    }
    tokens
}

fn is_ident(token: Option<&Token>, name: &str) -> bool {
    matches!(token, Some(Token { tok: Tok::Ident(ident), .. }) if ident == name)
}

/// One path spelled in the code, with the name it binds in a `use` (its alias or last segment).
#[derive(Debug, Clone, PartialEq)]
struct UsePath {
    segments: Vec<String>,
    name: String,
}

/// Parses a path or use tree at `*pos` (`a::b`, `a::{b::C, d::{self, E as F}}`, `a::*`) and
/// returns every full path it spells; `*pos` ends after it.
fn parse_use_tree(tokens: &[Token], pos: &mut usize) -> Vec<UsePath> {
    let mut prefix: Vec<String> = Vec::new();
    loop {
        match tokens.get(*pos).map(|t| &t.tok) {
            Some(Tok::Ident(segment)) => {
                prefix.push(segment.clone());
                *pos += 1;
            }
            Some(Tok::Open) => {
                *pos += 1;
                let mut paths = Vec::new();
                loop {
                    for tail in parse_use_tree(tokens, pos) {
                        if !tail.segments.is_empty() {
                            let segments = prefix.iter().cloned().chain(tail.segments).collect();
                            paths.push(UsePath {
                                segments,
                                name: tail.name,
                            });
                        }
                    }
                    match tokens.get(*pos).map(|t| &t.tok) {
                        Some(Tok::Comma) => *pos += 1,
                        Some(Tok::Close) => {
                            *pos += 1;
                            break;
                        }
                        _ => break,
                    }
                }
                return paths;
            }
            Some(Tok::Star) => {
                *pos += 1;
                return vec![use_path(prefix, None)];
            }
            _ => return vec![use_path(prefix, None)],
        }
        match tokens.get(*pos).map(|t| &t.tok) {
            Some(Tok::PathSep) => *pos += 1,
            Some(Tok::Ident(word)) if word == "as" => {
                let alias = match tokens.get(*pos + 1).map(|t| &t.tok) {
                    Some(Tok::Ident(alias)) => Some(alias.clone()),
                    _ => None,
                };
                *pos += 2;
                return vec![use_path(prefix, alias)];
            }
            _ => return vec![use_path(prefix, None)],
        }
    }
}

fn use_path(segments: Vec<String>, alias: Option<String>) -> UsePath {
    let name = alias.unwrap_or_else(|| {
        let mut named = segments.iter().rev().filter(|s| *s != "self");
        named.next().cloned().unwrap_or_default()
    });
    UsePath { segments, name }
}

/// Every path starting with `crate`, `super` or `self` (in `use` statements and inline), with
/// its line. `$crate` (macros) and `pub(in crate::x)` (visibility) are not imports.
fn module_paths(tokens: &[Token]) -> Vec<(usize, UsePath)> {
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let starts_path = ["crate", "super", "self"]
            .iter()
            .any(|kw| is_ident(tokens.get(i), kw));
        let prev = |n: usize| i.checked_sub(n).and_then(|j| tokens.get(j)).map(|t| &t.tok);
        let continues_path = matches!(prev(1), Some(Tok::PathSep | Tok::Punct('$')));
        let visibility = matches!(prev(1), Some(Tok::Ident(word)) if word == "in")
            && prev(2) == Some(&Tok::Punct('('));
        if starts_path && !continues_path && !visibility {
            let line = tokens[i].line;
            let mut pos = i;
            paths.extend(
                parse_use_tree(tokens, &mut pos)
                    .into_iter()
                    .map(|p| (line, p)),
            );
            i = pos.max(i + 1);
        } else {
            i += 1;
        }
    }
    paths
}

/// Every path of every `use` statement (public or not: a private `use` in a module is visible
/// to its submodules too).
fn use_statements(tokens: &[Token]) -> Vec<UsePath> {
    let mut paths = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if matches!(&token.tok, Tok::Ident(word) if word == "use") {
            let mut pos = i + 1;
            if tokens.get(pos).map(|t| &t.tok) == Some(&Tok::PathSep) {
                pos += 1;
            }
            paths.extend(parse_use_tree(tokens, &mut pos));
        }
    }
    paths
}

/// The `mod x;` declarations (file modules; inline `mod x { ... }` are part of their file).
fn declared_modules(tokens: &[Token]) -> BTreeSet<String> {
    tokens
        .windows(3)
        .filter_map(|w| match (&w[0].tok, &w[1].tok, &w[2].tok) {
            (Tok::Ident(kw), Tok::Ident(name), Tok::Punct(';')) if kw == "mod" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

/// The module path a `crate::`/`super::`/`self::` path names, seen from `module`.
fn absolute(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    let (first, rest) = segments.split_first()?;
    let mut path = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module.split_last()?.1.to_vec(),
        _ => return None,
    };
    for segment in rest {
        match segment.as_str() {
            "super" => {
                path.pop()?;
            }
            "self" => {}
            _ => path.push(segment.clone()),
        }
    }
    Some(path)
}

// ---------------------------------------------------------------------------------------------
// Module graphs and their circles.
// ---------------------------------------------------------------------------------------------

/// The modules directly inside one parent module (the crate root, or a directory module).
struct Level<'a> {
    parent: Vec<String>,
    /// The `mod x;` declared by the parent's file.
    children: BTreeSet<String>,
    /// Names bound by the parent's `use` statements (`pub use authz::{Policy, Decision}`) to
    /// the child they come from.
    bindings: BTreeMap<String, String>,
    files: &'a [SourceFile],
}

impl<'a> Level<'a> {
    fn new(parent: Vec<String>, parent_file: &SourceFile, files: &'a [SourceFile]) -> Self {
        let children = declared_modules(&parent_file.tokens);
        let mut bindings = BTreeMap::new();
        for path in use_statements(&parent_file.tokens) {
            let target = absolute(&parent, &path.segments).unwrap_or_else(|| {
                // A relative path: a child of the parent, or another crate.
                parent.iter().chain(&path.segments).cloned().collect()
            });
            let child = target
                .strip_prefix(parent.as_slice())
                .and_then(|rest| rest.first());
            if let Some(child) = child.filter(|c| children.contains(*c)) {
                bindings.insert(path.name.clone(), child.clone());
            }
        }
        Level {
            parent,
            children,
            bindings,
            files,
        }
    }

    /// The child holding a file, if the file is below the parent.
    fn owner(&self, file: &SourceFile) -> Option<&String> {
        let name = file.module.strip_prefix(self.parent.as_slice())?.first()?;
        self.children.get(name)
    }

    /// The child a module path leads to, directly or through a binding of the parent.
    fn child_of(&self, path: &[String]) -> Option<&String> {
        let name = path.strip_prefix(self.parent.as_slice())?.first()?;
        self.children.get(name).or_else(|| self.bindings.get(name))
    }

    fn label(&self, child: &str) -> String {
        self.parent
            .iter()
            .map(String::as_str)
            .chain([child])
            .collect::<Vec<_>>()
            .join("::")
    }

    /// Child -> child it depends on -> where (the first place, `file:line `path``).
    fn graph(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for file in self.files.iter().filter(|f| !f.is_root) {
            let Some(from) = self.owner(file) else {
                continue;
            };
            for (line, path) in module_paths(&file.tokens) {
                let Some(to) =
                    absolute(&file.module, &path.segments).and_then(|p| self.child_of(&p).cloned())
                else {
                    continue;
                };
                if to != *from {
                    let place = format!("{}:{line} `{}`", file.path, path.segments.join("::"));
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert(place);
                }
            }
        }
        graph
    }
}

/// Report lines for every import circle in a crate: at the top level of each crate root
/// (`lib.rs`, `main.rs`) and inside every directory module, one level down and further.
fn import_cycles(crate_name: &str, files: &[SourceFile]) -> Vec<String> {
    let roots: Vec<&SourceFile> = files.iter().filter(|f| f.is_root).collect();
    let mut report = Vec::new();
    for root in &roots {
        let label = if roots.len() > 1 {
            format!(
                "{crate_name} ({})",
                root.path.rsplit('/').next().unwrap_or_default()
            )
        } else {
            crate_name.to_string()
        };
        level_cycles(&label, Level::new(Vec::new(), root, files), &mut report);
    }
    report
}

fn level_cycles(label: &str, level: Level, report: &mut Vec<String>) {
    let graph = level.graph();
    let edges = graph
        .iter()
        .map(|(from, tos)| (from.clone(), tos.keys().cloned().collect()))
        .collect();
    let cycles = find_cycles(&edges);
    for cycle in &cycles {
        let names: Vec<String> = cycle.iter().map(|m| level.label(m)).collect();
        report.push(format!("{label}: {}", names.join(" -> ")));
        for pair in cycle.windows(2) {
            let place = &graph[&pair[0]][&pair[1]];
            report.push(format!(
                "    {} -> {}: {place}",
                level.label(&pair[0]),
                level.label(&pair[1])
            ));
        }
    }
    if cycles.len() >= MAX_CYCLES {
        report.push(format!("{label}: (stopped after {MAX_CYCLES} circles)"));
    }

    for child in &level.children {
        let path: Vec<String> = level.parent.iter().chain([child]).cloned().collect();
        let file = level.files.iter().find(|f| !f.is_root && f.module == path);
        if let Some(file) = file.filter(|f| !declared_modules(&f.tokens).is_empty()) {
            level_cycles(label, Level::new(path, file, level.files), report);
        }
    }
}

/// Every elementary circle of a directed graph, each as `[a, b, ..., a]` starting from its
/// smallest node (so each circle is listed once).
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut cycles = Vec::new();
    for start in graph.keys() {
        let mut path = vec![start.clone()];
        extend_cycles(graph, start, start, &mut path, &mut cycles);
    }
    cycles
}

fn extend_cycles(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    node: &str,
    path: &mut Vec<String>,
    cycles: &mut Vec<Vec<String>>,
) {
    for next in graph.get(node).into_iter().flatten() {
        if cycles.len() >= MAX_CYCLES {
            return;
        }
        if next == start {
            cycles.push(path.iter().chain([next]).cloned().collect());
        } else if next.as_str() > start && !path.contains(next) {
            path.push(next.clone());
            extend_cycles(graph, start, next, path, cycles);
            path.pop();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests of the checker itself, on small strings.
// ---------------------------------------------------------------------------------------------

mod checker {
    use super::*;

    fn paths(code: &str) -> Vec<String> {
        let tokens = tokenize(&blank_comments_and_literals(code));
        module_paths(&tokens)
            .into_iter()
            .map(|(_, p)| p.segments.join("::"))
            .collect()
    }

    fn file(in_src: &str, text: &str) -> SourceFile {
        SourceFile::new(in_src, &format!("demo/src/{in_src}"), text)
    }

    fn graph(files: &[SourceFile]) -> BTreeMap<String, BTreeSet<String>> {
        let root = files.iter().find(|f| f.is_root).unwrap();
        let level = Level::new(Vec::new(), root, files);
        level
            .graph()
            .into_iter()
            .map(|(from, tos)| (from, tos.into_keys().collect()))
            .collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn grouped_and_nested_use_is_expanded() {
        assert_eq!(
            paths("use crate::{b::X, c::{d::{self, Y}, Z as W}, e::*};"),
            [
                "crate::b::X",
                "crate::c::d::self",
                "crate::c::d::Y",
                "crate::c::Z",
                "crate::e"
            ]
        );
    }

    #[test]
    fn inline_paths_are_found_and_macros_comments_strings_are_not() {
        let code = "fn f() {\n    crate::b::f();\n    let _ = $crate::c::g();\n    // crate::d::h()\n    \
                    /// [x](crate::e::X)\n    let s = \"crate::f::i\";\n    let c = '\"';\n    \
                    super::g::j(&self.k);\n}\npub(crate) fn g() {}\npub(in crate::h) fn h() {}\n";
        assert_eq!(paths(code), ["crate::b::f", "super::g::j", "self", "crate"]);
    }

    #[test]
    fn paths_are_made_absolute_from_the_file_module() {
        let segs = |p: &str| p.split("::").map(str::to_string).collect::<Vec<_>>();
        let module = segs("x::a");
        assert_eq!(
            absolute(&module, &segs("super::b::F")),
            Some(segs("x::b::F"))
        );
        assert_eq!(absolute(&module, &segs("super::super::c")), Some(segs("c")));
        assert_eq!(
            absolute(&module, &segs("self::inner")),
            Some(segs("x::a::inner"))
        );
        assert_eq!(absolute(&module, &segs("crate::d")), Some(segs("d")));
        assert_eq!(absolute(&module, &segs("std::fmt")), None);
    }

    #[test]
    fn names_used_through_the_crate_root_resolve_to_their_module() {
        let files = [
            file(
                "lib.rs",
                "mod audit;\nmod authz;\nmod util;\npub use authz::{Decision, Policy as Rules};\n\
                 pub(crate) use util::helper;\nuse std::fmt;\npub fn root_fn() {}\n",
            ),
            file(
                "audit.rs",
                "use crate::{Rules, fmt};\nfn f() { crate::helper(); crate::root_fn(); }\n",
            ),
            file("authz.rs", "pub struct Policy;\npub struct Decision;\n"),
            file("util.rs", "pub fn helper() {}\n"),
        ];
        assert_eq!(
            graph(&files),
            BTreeMap::from([("audit".to_string(), set(&["authz", "util"]))])
        );
    }

    #[test]
    fn directory_modules_count_as_one_and_are_checked_inside() {
        let files = [
            file("lib.rs", "mod a;\nmod x;\n"),
            file("a.rs", "use crate::x::b::Thing;\n"),
            file("x/mod.rs", "mod b;\nmod c;\npub use self::c::Other;\n"),
            file("x/b.rs", "use super::Other;\npub struct Thing;\n"),
            file(
                "x/c.rs",
                "pub struct Other;\nfn f() { crate::x::b::Thing; crate::a::g(); }\n",
            ),
        ];
        assert_eq!(
            graph(&files),
            BTreeMap::from([
                ("x".to_string(), set(&["a"])),
                ("a".to_string(), set(&["x"]))
            ])
        );
        let report = import_cycles("demo", &files);
        assert_eq!(
            report,
            [
                "demo: a -> x -> a",
                "    a -> x: demo/src/a.rs:1 `crate::x::b::Thing`",
                "    x -> a: demo/src/x/c.rs:2 `crate::a::g`",
                "demo: x::b -> x::c -> x::b",
                "    x::b -> x::c: demo/src/x/b.rs:1 `super::Other`",
                "    x::c -> x::b: demo/src/x/c.rs:2 `crate::x::b::Thing`",
            ]
        );
    }

    #[test]
    fn every_cycle_of_a_synthetic_graph_is_found_once() {
        let graph: BTreeMap<String, BTreeSet<String>> = [
            ("a", &["b"][..]),
            ("b", &["c", "a"][..]),
            ("c", &["a", "d"][..]),
            ("d", &[][..]),
        ]
        .into_iter()
        .map(|(from, tos)| (from.to_string(), set(tos)))
        .collect();
        let cycles: Vec<String> = find_cycles(&graph).iter().map(|c| c.join(" -> ")).collect();
        assert_eq!(cycles, ["a -> b -> a", "a -> b -> c -> a"]);
        let acyclic = BTreeMap::from([
            ("a".to_string(), set(&["b"])),
            ("b".to_string(), set(&["c"])),
        ]);
        assert!(find_cycles(&acyclic).is_empty());
    }

    #[test]
    fn the_test_section_is_neither_counted_nor_scanned() {
        let text =
            "use crate::b::X;\n\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::c::Y;\n}\n";
        let source = file("a.rs", text);
        assert_eq!(source.lines, 3);
        assert_eq!(paths(&without_tests(text)), ["crate::b::X"]);
        // `#[cfg(test)]` on anything else is code.
        let other = "#[cfg(test)]\nfn helper() { crate::c::f(); }\n";
        assert_eq!(without_tests(other), other);
        // Code after the test module is code: counted, scanned, and a finding.
        let after = "use crate::b::X;\n#[cfg(test)]\nmod tests {\n    fn t() { let _ = \"}\"; }\n}\n\nuse crate::c::Y;\n";
        assert_eq!(paths(&without_tests(after)), ["crate::b::X", "crate::c::Y"]);
        assert_eq!(file("a.rs", after).lines, 3);
        assert_eq!(code_after_tests(after), Some(7));
        assert_eq!(code_after_tests(text), None);
        assert_eq!(
            without_tests("#[cfg(test)]\nmod tests_data;\n")
                .lines()
                .count(),
            2
        );
    }

    #[test]
    fn workspace_members_and_package_names_are_read() {
        let toml = "[workspace]\nmembers = [\n    \"benches\", # the benchmarks\n    \"core\",\n]\n\
                    exclude = [\"benches/cedar\"]\n\n[package]\nname = \"demo\"\n";
        assert_eq!(
            toml_string_array(toml, "workspace", "members"),
            ["benches", "core"]
        );
        assert_eq!(
            toml_string_array(toml, "workspace", "exclude"),
            ["benches/cedar"]
        );
        assert_eq!(
            toml_string_value(toml, "package", "name").as_deref(),
            Some("demo")
        );
        assert_eq!(toml_string_value(toml, "workspace", "name"), None);
    }
}
